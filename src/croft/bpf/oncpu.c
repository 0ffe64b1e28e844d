// Which processes ran since the previous poll, so that the poll reads procfs only for them: the
// tgids that were on a CPU, plus marks for processes that were forked or moved to another cgroup
// (https://docs.kernel.org/trace/events.html; include/trace/events/sched.h, timer.h, cgroup.h).
//
// Only the tracepoints' own arguments and helpers are used, never a task_struct field (a
// task_struct pointer is only compared, never dereferenced).
// - sched_switch (raw) fires in __schedule() on the switching CPU before the switch, so the current
//   task is `prev` (args[1]): its tgid is marked as having run.
// - A task that runs through a whole poll without being switched out (alone on its CPU) has no
//   sched_switch; the scheduler tick still interrupts it: hrtimer_expire_entry (raw; the tick is an
//   hrtimer on high-resolution kernels) marks the interrupted current task.
// - A new process need not have run by the next poll: bpf/syscalls.c's task:task_newtask probe (the
//   one that sees clone flags, so threads are left out) puts its pid in `started`. This file comes
//   before syscalls.c for that (CROFT_ONCPU; the `oncpu` setting says these programs are attached).
// - A process that was reaped no longer has a /proc entry, and did not run to be reaped:
//   sched_process_free puts its pid in `freed` (a thread's too: user space knows only tgids).
//   With `started`, user space keeps the list of processes without listing /proc every poll.
// - A process moved to another cgroup (cgroup_attach_task, by whoever wrote cgroup.procs) has not
//   run, but its membership changed: it is marked in `moved` by bpf/syscalls.c's probe of that
//   tracepoint (which also invalidates its cached verdicts; CROFT_MOVES).
//
// A mark is a set member, not a sum: the poll needs to know which processes ran, not for how long
// (procfs says that), and bpf_ktime_get_ns, the clock a sum needs at every switch, cost as much as
// the rest of the program together. A task is marked once per poll per CPU: each CPU keeps the last
// two tasks it marked (oncpu_marked; two, for the two ends of a pipe taking turns on one CPU), and a
// switch of one of those is not marked again while both slots of oncpu_generation hold what they
// held when it was marked:
// - [0], the drain generation, bumped by user space at each poll. The marks of generation g go to
//   ran_even or ran_odd by g's parity, and user space drains the map of the generation it has just
//   ended: a cached mark always stands for an entry still in the map being filled, where draining
//   that map could empty it under a CPU that still believed it marked.
// - [1], bumped by bpf/syscalls.c's task_newtask probe for every new task, thread or process: the
//   cache holds task_struct addresses, which a new task may reuse once the old one is freed.
// Both programs that mark run with interrupts disabled (__schedule holds the runqueue lock; hrtimer
// callbacks run under the hrtimer base lock), so no other mark on this CPU interleaves with one.
//
// User space drains the maps once per poll. An update that finds a map full is counted in
// oncpu_dropped; user space then lists and reads every process in that poll.
#include "croft.h"

#ifndef CROFT_RAN_ENTRIES
#define CROFT_RAN_ENTRIES 65536
#endif
#ifndef CROFT_MOVED_ENTRIES
#define CROFT_MOVED_ENTRIES 16384
#endif

struct oncpu_marks {
    u64 task[2];  // task_struct addresses, compared only
    u32 drains;   // oncpu_generation[0] when marked
    u32 tasks;    // oncpu_generation[1] when marked
    u32 older;    // the slot the next mark replaces
    u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_RAN_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} ran_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_RAN_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} ran_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_MOVED_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} moved SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_MOVED_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} started SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_MOVED_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} freed SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 2);
    __type(key, u32);
    __type(value, u32);
} oncpu_generation SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, struct oncpu_marks);
} oncpu_marked SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u64);
} oncpu_dropped SEC(".maps");

static __always_inline void oncpu_count_dropped(void) {
    u32 zero = 0;
    u64 *dropped = bpf_map_lookup_elem(&oncpu_dropped, &zero);
    if (dropped)
        *dropped += 1;
}

static __always_inline void mark_started(u32 pid) {
    u32 one = 1;
    if (bpf_map_update_elem(&started, &pid, &one, BPF_ANY) != 0)
        oncpu_count_dropped();
}

static __always_inline void mark_freed(u32 pid) {
    u32 one = 1;
    if (bpf_map_update_elem(&freed, &pid, &one, BPF_ANY) != 0)
        oncpu_count_dropped();
}

static __always_inline void mark_moved(u32 pid) {
    u32 one = 1;
    if (bpf_map_update_elem(&moved, &pid, &one, BPF_ANY) != 0)
        oncpu_count_dropped();
}

// A new task may take the task_struct address of one freed since it was marked (bpf/syscalls.c's
// task_newtask probe calls this before the new task can run).
static __always_inline void oncpu_tasks_stale(void) {
    u32 one = 1;
    u32 *tasks = bpf_map_lookup_elem(&oncpu_generation, &one);
    if (tasks)
        __sync_fetch_and_add(tasks, 1);
}

static __always_inline int ran_insert(u32 drains, u32 tgid) {
    u32 one = 1;
    if (drains & 1)
        return bpf_map_lookup_elem(&ran_odd, &tgid) ? 0 : bpf_map_update_elem(&ran_odd, &tgid, &one, BPF_ANY);
    return bpf_map_lookup_elem(&ran_even, &tgid) ? 0 : bpf_map_update_elem(&ran_even, &tgid, &one, BPF_ANY);
}

// Marks the process of the current task, `task`, unless this CPU marked it in this generation.
static __always_inline void mark_ran(u64 task) {
    u32 zero = 0, one = 1;
    u32 *drains = bpf_map_lookup_elem(&oncpu_generation, &zero);
    u32 *tasks = bpf_map_lookup_elem(&oncpu_generation, &one);
    struct oncpu_marks *marked = bpf_map_lookup_elem(&oncpu_marked, &zero);
    if (!drains || !tasks || !marked)
        return;
    // Read before the map they choose and guard: a drain or a new task afterwards bumps them afterwards.
    u32 drains_now = *drains, tasks_now = *tasks;
    if (marked->drains != drains_now || marked->tasks != tasks_now) {
        marked->drains = drains_now;
        marked->tasks = tasks_now;
        marked->task[0] = 0;
        marked->task[1] = 0;
    } else if (marked->task[0] == task || marked->task[1] == task) {
        return;
    }
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (tgid != 0 && ran_insert(drains_now, tgid) != 0) {
        oncpu_count_dropped();
        return;
    }
    if (marked->older)
        marked->task[1] = task;
    else
        marked->task[0] = task;
    marked->older = !marked->older;
}

// TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
SEC("raw_tp/sched_switch")
int sched_switch(struct bpf_raw_tracepoint_args *ctx) {
    mark_ran(ctx->args[1]);
    return 0;
}

SEC("raw_tp/hrtimer_expire_entry")
int hrtimer_expire_entry(struct bpf_raw_tracepoint_args *ctx) {
    mark_ran(bpf_get_current_task());
    return 0;
}

SEC("tp/sched/sched_process_free")
int sched_process_free(struct trace_event_raw_sched_process_template *args) {
    mark_freed((u32)args->pid);
    return 0;
}
