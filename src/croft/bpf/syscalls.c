// Syscall counts per (tgid, syscall nr, group) of the processes croft writes, and ioctls per
// (tgid, fd) of every process with the time of the last one.
//
// Both come from one raw tracepoint on sys_enter, the tracepoint behind raw_syscalls:sys_enter
// (https://docs.kernel.org/trace/events.html). A raw tracepoint hands over the tracepoint's own
// arguments (struct pt_regs *regs, long id) without the perf buffer copy of a classic tracepoint, and
// ioctls are picked out here by number instead of attaching syscalls:sys_enter_ioctl: enabling a
// second syscall event adds its own probe to every syscall on the host, ioctl or not.
//
// Which syscalls are counted is decided here, so that churn nobody watches cannot fill the map:
// - a process whose cgroup-v2 cgroup, or an ancestor of it, is in watched_cgroups (user space puts
//   there the cgroups the --watch prefixes match). The verdict per cgroup id is cached in
//   cgroup_verdicts, valid while watch_generation holds the generation it was made in (user space
//   bumps it after changing watched_cgroups); `group` is then the cgroup id;
// - a process in watched_tgids, whose value is the `origin` tgid user space marked (a process
//   watched through a cgroup-v1 path, or a GPU holder); a new process (task:task_newtask without
//   CLONE_THREAD) of a marked one is marked with the same origin, so a fork burst is counted from its
//   first syscall. `group` is then CROFT_GROUP_ORIGIN | origin.
// That verdict costs a helper call and two hash lookups, on every syscall of the host. sys_enter
// keeps the last two per CPU (last_verdicts; two, so that two tasks taking turns on a CPU, as a
// pipe's or a socket's two ends do, both find theirs): the next syscall of the same task (pid_tgid)
// on that CPU reuses its verdict, while both slots of watch_generation hold what they held when it
// was made:
// - [0], bumped by user space after it changes watched_cgroups or watched_tgids;
// - [1], bumped here when a task is created (its pid may be one a verdict was cached for), when a
//   new process is marked, and when a task moves to another cgroup (cgroup:cgroup_attach_task,
//   which fires once the move is committed; the `moves` setting). Without that tracepoint the cached
//   verdict's cgroup id is checked against bpf_get_current_cgroup_id().
// A syscall-heavy task then pays one hash lookup per syscall (its count), an unwatched one none.
// sys_enter runs with preemption disabled, so no other task's syscall on this CPU interleaves
// between its reading and its writing the cached verdict.
// Ioctls are counted for every process: GPU holders are found by them (which ioctls are GPU ioctls
// is decided in user space, through /proc/<tgid>/fd/<fd>).
//
// User space drains the maps once per poll with BPF_MAP_LOOKUP_AND_DELETE_BATCH, so every count is
// "since the previous poll". The drained maps come in pairs, even and odd, by the drain parity in
// watch_generation[CROFT_PARITY]: a program (this file's, bpf/net.c's, bpf/ingress.c's) reads it
// once per run and counts into the maps of that parity. Each poll user space flips the parity, waits
// for every program run that may have read the old one (membarrier(MEMBARRIER_CMD_GLOBAL), a
// synchronize_rcu(); tracepoint programs run under rcu_read_lock), then drains the old parity's maps,
// which nothing writes any more. Draining the map being written would lose an increment: the batch
// copies and deletes an element under its bucket lock, but a program holding the element's pointer
// from lookup_or_try_init can still add to it after the copy. A count that finds syscall_counts full goes to syscall_overflow under
// tgid 0 (the container's rate keeps it, the process's row does not); one that finds both full is
// dropped and counted in syscalls_dropped, slot CROFT_DROP_SYSCALL (CROFT_DROP_IOCTL and
// CROFT_DROP_TGID for the other maps; CROFT_SPILLED counts what went to syscall_overflow).
// Which syscall is ioctl, and whether the cgroup_attach_task probe is attached, are settings the
// loader gives (croft_setting in bpf/croft.h): its architecture's syscall table says the former.
#include "croft.h"

#ifndef CROFT_SYSCALL_ENTRIES
#define CROFT_SYSCALL_ENTRIES 65536
#endif
#ifndef CROFT_OVERFLOW_ENTRIES
#define CROFT_OVERFLOW_ENTRIES 8192
#endif
#ifndef CROFT_IOCTL_ENTRIES
#define CROFT_IOCTL_ENTRIES 16384
#endif
#ifndef CROFT_TGID_ENTRIES
#define CROFT_TGID_ENTRIES 65536
#endif
#ifndef CROFT_CGROUP_ROOTS
#define CROFT_CGROUP_ROOTS 4096
#endif
#ifndef CROFT_VERDICT_ENTRIES
#define CROFT_VERDICT_ENTRIES 16384
#endif
#define CROFT_MAX_CGROUP_DEPTH 16
#define CROFT_GROUP_ORIGIN (1ULL << 63)
#define CROFT_CLONE_THREAD 0x00010000  // include/uapi/linux/sched.h

#define CROFT_DROP_SYSCALL 0
#define CROFT_DROP_IOCTL 1
#define CROFT_DROP_TGID 2
#define CROFT_SPILLED 3

struct syscall_key {
    u32 tgid;
    u32 nr;
    u64 group;
};

struct ioctl_key {
    u32 tgid;
    u32 fd;
};

struct ioctl_value {
    u64 count;
    u64 last_ns;  // bpf_ktime_get_ns: CLOCK_MONOTONIC
};

struct task_verdict {
    u64 pid_tgid;
    u64 group;
    u64 cgroup;      // checked only without the `moves` setting
    u32 generation;  // watch_generation[0] when made
    u32 tasks;       // watch_generation[1] when made
    u32 watched;
    u32 pad;
};

struct cgroup_verdict {
    u32 generation;
    u32 watched;
};

struct task_verdicts {
    struct task_verdict slot[2];
    u32 older;  // the slot the next verdict made replaces
    u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_SYSCALL_ENTRIES);
    __type(key, struct syscall_key);
    __type(value, u64);
} syscall_counts_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_SYSCALL_ENTRIES);
    __type(key, struct syscall_key);
    __type(value, u64);
} syscall_counts_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_OVERFLOW_ENTRIES);
    __type(key, struct syscall_key);
    __type(value, u64);
} syscall_overflow_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_OVERFLOW_ENTRIES);
    __type(key, struct syscall_key);
    __type(value, u64);
} syscall_overflow_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_IOCTL_ENTRIES);
    __type(key, struct ioctl_key);
    __type(value, struct ioctl_value);
} ioctl_counts_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_IOCTL_ENTRIES);
    __type(key, struct ioctl_key);
    __type(value, struct ioctl_value);
} ioctl_counts_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_CGROUP_ROOTS);
    __type(key, u64);
    __type(value, u32);
} watched_cgroups SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_TGID_ENTRIES);
    __type(key, u32);
    __type(value, u32);
} watched_tgids SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, CROFT_VERDICT_ENTRIES);
    __type(key, u64);
    __type(value, struct cgroup_verdict);
} cgroup_verdicts SEC(".maps");

// [0], [1]: the verdicts' generations (above); [CROFT_PARITY]: the drain parity, set by user space.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 3);
    __type(key, u32);
    __type(value, u32);
} watch_generation SEC(".maps");
#define CROFT_PARITY 2

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, struct task_verdicts);
} last_verdicts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 4);
    __type(key, u32);
    __type(value, u64);
} syscalls_dropped SEC(".maps");

static __always_inline void syscalls_count_dropped(u32 slot) {
    u64 *dropped = bpf_map_lookup_elem(&syscalls_dropped, &slot);
    if (dropped)
        *dropped += 1;
}

// The parity of the maps this program run counts into: read once per run (see the top of this file).
static __always_inline u32 croft_drain_parity(void) {
    u32 slot = CROFT_PARITY;
    u32 *parity = bpf_map_lookup_elem(&watch_generation, &slot);
    return parity ? *parity & 1 : 0;
}

static __always_inline u32 croft_cgroup_watched(u64 cgroup) {
    u32 zero = 0;
    u32 *stored = bpf_map_lookup_elem(&watch_generation, &zero);
    u32 generation = stored ? *stored : 0;
    struct cgroup_verdict *cached = bpf_map_lookup_elem(&cgroup_verdicts, &cgroup);
    if (cached && cached->generation == generation)
        return cached->watched;
    struct cgroup_verdict verdict = {.generation = generation, .watched = 0};
#pragma unroll
    for (int level = 0; level < CROFT_MAX_CGROUP_DEPTH; level++) {
        u64 ancestor = bpf_get_current_ancestor_cgroup_id(level);
        if (ancestor == 0)
            break;  // past the process's own level
        if (bpf_map_lookup_elem(&watched_cgroups, &ancestor)) {
            verdict.watched = 1;
            break;
        }
    }
    bpf_map_update_elem(&cgroup_verdicts, &cgroup, &verdict, BPF_ANY);
    return verdict.watched;
}

// Whether the current process, in cgroup `cgroup`, is one croft writes; its group in *group.
static __always_inline int croft_watched_in(u64 cgroup, u32 tgid, u64 *group) {
    if (croft_cgroup_watched(cgroup)) {
        *group = cgroup;
        return 1;
    }
    u32 *origin = bpf_map_lookup_elem(&watched_tgids, &tgid);
    if (!origin)
        return 0;
    *group = CROFT_GROUP_ORIGIN | *origin;
    return 1;
}

// Whether the current process is one croft writes; its group in *group.
static __always_inline int croft_watched(u32 tgid, u64 *group) {
    return croft_watched_in(bpf_get_current_cgroup_id(), tgid, group);
}

// Whether a cached verdict holds for the current task: made for it, in the current generations, and
// (without the cgroup_attach_task probe to bump the generation on a move) in its current cgroup.
static __always_inline int verdict_holds(struct task_verdict *made, u64 pid_tgid, u64 cgroup,
                                         u32 generation_now, u32 tasks_now) {
    return made->pid_tgid == pid_tgid && made->generation == generation_now && made->tasks == tasks_now &&
           (croft_setting(moves) || made->cgroup == cgroup);
}

// croft_watched, through this CPU's last verdicts (sys_enter only: see the top of this file).
static __always_inline int croft_watched_cached(u64 pid_tgid, u64 *group) {
    u32 zero = 0, one = 1;
    u32 *generation = bpf_map_lookup_elem(&watch_generation, &zero);
    u32 *tasks = bpf_map_lookup_elem(&watch_generation, &one);
    struct task_verdicts *last = bpf_map_lookup_elem(&last_verdicts, &zero);
    if (!generation || !tasks || !last)
        return croft_watched(pid_tgid >> 32, group);
    // Read before the maps they guard: whatever changes those afterwards bumps them afterwards.
    u32 generation_now = *generation, tasks_now = *tasks;
    u64 cgroup = croft_setting(moves) ? 0 : bpf_get_current_cgroup_id();
    if (verdict_holds(&last->slot[0], pid_tgid, cgroup, generation_now, tasks_now)) {
        *group = last->slot[0].group;
        return last->slot[0].watched;
    }
    if (verdict_holds(&last->slot[1], pid_tgid, cgroup, generation_now, tasks_now)) {
        *group = last->slot[1].group;
        return last->slot[1].watched;
    }
    u32 watched = croft_setting(moves) ? croft_watched(pid_tgid >> 32, group)
                                       : croft_watched_in(cgroup, pid_tgid >> 32, group);
    struct task_verdict *made = last->older ? &last->slot[1] : &last->slot[0];
    last->older = !last->older;
    made->cgroup = cgroup;
    made->pid_tgid = pid_tgid;
    made->group = *group;
    made->generation = generation_now;
    made->tasks = tasks_now;
    made->watched = watched;
    return watched;
}

static __always_inline void verdicts_stale(void) {
    u32 one = 1;
    u32 *tasks = bpf_map_lookup_elem(&watch_generation, &one);
    if (tasks)
        __sync_fetch_and_add(tasks, 1);
}

static __always_inline void count_ioctl(u32 parity, u32 tgid, struct pt_regs *regs) {
    // The first syscall argument, from the user registers saved at entry (bpf_tracing.h knows where
    // each architecture keeps it).
    u64 fd = PT_REGS_PARM1_CORE_SYSCALL(regs);
    struct ioctl_key key = {.tgid = tgid, .fd = (u32)fd};
    struct ioctl_value zero = {};
    struct ioctl_value *value;
    if (parity)
        value = croft_lookup_or_try_init(&ioctl_counts_odd, &key, &zero);
    else
        value = croft_lookup_or_try_init(&ioctl_counts_even, &key, &zero);
    if (!value) {
        syscalls_count_dropped(CROFT_DROP_IOCTL);
        return;
    }
    __sync_fetch_and_add(&value->count, 1);
    value->last_ns = bpf_ktime_get_ns();
}

static __always_inline u64 *syscall_count(u32 parity, struct syscall_key *key) {
    u64 zero = 0;
    if (parity)
        return croft_lookup_or_try_init(&syscall_counts_odd, key, &zero);
    return croft_lookup_or_try_init(&syscall_counts_even, key, &zero);
}

static __always_inline u64 *syscall_spill(u32 parity, struct syscall_key *key) {
    u64 zero = 0;
    if (parity)
        return croft_lookup_or_try_init(&syscall_overflow_odd, key, &zero);
    return croft_lookup_or_try_init(&syscall_overflow_even, key, &zero);
}

// TP_PROTO(struct pt_regs *regs, long id)
SEC("raw_tp/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx) {
    u32 parity = croft_drain_parity();
    u64 pid_tgid = bpf_get_current_pid_tgid();
    u32 tgid = pid_tgid >> 32;
    long nr = (long)ctx->args[1];
    if (nr == croft_setting(ioctl_nr))
        count_ioctl(parity, tgid, (struct pt_regs *)ctx->args[0]);
    u64 group = 0;
    if (!croft_watched_cached(pid_tgid, &group))
        return 0;
    struct syscall_key key = {.tgid = tgid, .nr = (u32)nr, .group = group};
    u64 *count = syscall_count(parity, &key);
    if (count) {
        __sync_fetch_and_add(count, 1);
        return 0;
    }
    key.tgid = 0;
    count = syscall_spill(parity, &key);
    if (count) {
        __sync_fetch_and_add(count, 1);
        syscalls_count_dropped(CROFT_SPILLED);
        return 0;
    }
    syscalls_count_dropped(CROFT_DROP_SYSCALL);
    return 0;
}

// A new process (not a thread) of a marked process is marked with the same origin. The tracepoint
// fires in the parent, in copy_process, before the child can run; `pid` is the child's (for a
// process, its tgid). With bpf/oncpu.c (which then comes first), every new process is also noted
// as started, and every new task invalidates the marks oncpu.c's CPUs remember.
SEC("tp/task/task_newtask")
int task_newtask(struct trace_event_raw_task_newtask *args) {
    verdicts_stale();  // a new task, thread or not, may have the pid_tgid of a cached verdict
#ifdef CROFT_ONCPU
    if (croft_setting(oncpu))
        oncpu_tasks_stale();  // or the task_struct address of one bpf/oncpu.c marked
#endif
    if (args->clone_flags & CROFT_CLONE_THREAD)
        return 0;
#ifdef CROFT_ONCPU
    if (croft_setting(oncpu))
        mark_started((u32)args->pid);
#endif
    u32 parent = bpf_get_current_pid_tgid() >> 32;
    u32 *origin = bpf_map_lookup_elem(&watched_tgids, &parent);
    if (!origin)
        return 0;
    u32 child = (u32)args->pid;
    u32 value = *origin;
    if (bpf_map_update_elem(&watched_tgids, &child, &value, BPF_ANY) != 0)
        syscalls_count_dropped(CROFT_DROP_TGID);
    verdicts_stale();
    return 0;
}

#ifdef CROFT_MOVES
// A task moved to another cgroup: the cached verdicts are stale (its own, with its old cgroup's).
// It fires once per move (cgroup.procs: the leader, for the whole process; cgroup.threads: the
// thread), after the move is committed. With bpf/oncpu.c, the moved pid is also noted.
SEC("tp/cgroup/cgroup_attach_task")
int cgroup_attach_task(struct trace_event_raw_cgroup_migrate *args) {
    verdicts_stale();
#ifdef CROFT_ONCPU
    if (croft_setting(oncpu))
        mark_moved((u32)args->pid);
#endif
    return 0;
}
#endif
