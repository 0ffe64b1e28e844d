// Which processes ran since the previous poll, so that the poll reads procfs only for them: on-CPU
// time per tgid, plus marks for processes that were forked or moved to another cgroup
// (https://docs.kernel.org/trace/events.html; include/trace/events/sched.h, timer.h, cgroup.h).
//
// Only the tracepoints' own arguments and helpers are used, never a task_struct field: BCC compiles
// against whatever headers scripts/setup-bpf.sh found, which need not be the running kernel's.
// - sched_switch (raw) fires in __schedule() on the switching CPU before the switch, so the current
//   task is `prev`: its tgid gets the time since the previous switch on this CPU (per-CPU
//   `switched_at_ns`).
// - A task that runs through a whole poll without being switched out (alone on its CPU) has no
//   sched_switch; the scheduler tick still interrupts it: hrtimer_expire_entry (raw; the tick is an
//   hrtimer on high-resolution kernels) marks the interrupted current task as having run.
// - A new process need not have run by the next poll: bpf/syscalls.c's task:task_newtask probe (the
//   one that sees clone flags, so threads are left out) puts its pid in `started`. This file comes
//   first in the module for that (CROFT_ONCPU).
// - A process that was reaped no longer has a /proc entry, and did not run to be reaped:
//   sched_process_free puts its pid in `freed` (a thread's too: user space knows only tgids).
//   With `started`, user space keeps the list of processes without listing /proc every poll.
// - A process moved to another cgroup (cgroup_attach_task, by whoever wrote cgroup.procs) has not
//   run, but its membership changed: it is marked in `moved` by bpf/syscalls.c's probe of that
//   tracepoint (which also invalidates its cached verdicts; CROFT_MOVES).
// User space drains the maps once per poll. An update that finds a map full is counted in
// oncpu_dropped; user space then lists and reads every process in that poll.
#ifndef CROFT_RAN_ENTRIES
#define CROFT_RAN_ENTRIES 65536
#endif
#ifndef CROFT_MOVED_ENTRIES
#define CROFT_MOVED_ENTRIES 16384
#endif

BPF_HASH(ran_ns, u32, u64, CROFT_RAN_ENTRIES);
BPF_HASH(moved, u32, u32, CROFT_MOVED_ENTRIES);
BPF_HASH(started, u32, u32, CROFT_MOVED_ENTRIES);
BPF_HASH(freed, u32, u32, CROFT_MOVED_ENTRIES);
BPF_PERCPU_ARRAY(switched_at_ns, u64, 1);
BPF_PERCPU_ARRAY(oncpu_dropped, u64, 1);

static __always_inline void oncpu_count_dropped(void) {
    u32 zero = 0;
    u64 *dropped = oncpu_dropped.lookup(&zero);
    if (dropped)
        *dropped += 1;
}

static __always_inline void mark_started(u32 pid) {
    u32 one = 1;
    if (started.update(&pid, &one) != 0)
        oncpu_count_dropped();
}

static __always_inline void mark_freed(u32 pid) {
    u32 one = 1;
    if (freed.update(&pid, &one) != 0)
        oncpu_count_dropped();
}

static __always_inline void mark_moved(u32 pid) {
    u32 one = 1;
    if (moved.update(&pid, &one) != 0)
        oncpu_count_dropped();
}

static __always_inline void add_ran(u32 tgid, u64 ns) {
    u64 zero = 0;
    u64 *total = ran_ns.lookup_or_try_init(&tgid, &zero);
    if (!total) {
        oncpu_count_dropped();
        return;
    }
    __sync_fetch_and_add(total, ns);
}

RAW_TRACEPOINT_PROBE(sched_switch) {
    u64 now = bpf_ktime_get_ns();
    u32 zero = 0;
    u64 *since = switched_at_ns.lookup(&zero);
    if (!since)
        return 0;
    u32 prev = bpf_get_current_pid_tgid() >> 32;
    if (prev != 0)
        add_ran(prev, *since ? now - *since : 0);
    *since = now;
    return 0;
}

RAW_TRACEPOINT_PROBE(hrtimer_expire_entry) {
    u32 interrupted = bpf_get_current_pid_tgid() >> 32;
    if (interrupted != 0)
        add_ran(interrupted, 0);
    return 0;
}

TRACEPOINT_PROBE(sched, sched_process_free) {
    mark_freed((u32)args->pid);
    return 0;
}
