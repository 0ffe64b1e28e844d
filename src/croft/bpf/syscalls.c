// Syscall counts per (tgid, syscall nr), and ioctls per (tgid, fd) with the time of the last one.
//
// Both come from one raw tracepoint on sys_enter, the tracepoint behind raw_syscalls:sys_enter
// (https://docs.kernel.org/trace/events.html). A raw tracepoint hands over the tracepoint's own
// arguments (struct pt_regs *regs, long id) without the perf buffer copy of a classic tracepoint, and
// ioctls are picked out here by number instead of attaching syscalls:sys_enter_ioctl: enabling a
// second syscall event adds its own probe to every syscall on the host, ioctl or not.
//
// Which ioctls are GPU ioctls is decided in user space, through /proc/<tgid>/fd/<fd>.
// User space drains both maps once per poll with BPF_MAP_LOOKUP_AND_DELETE_BATCH, so every count is
// "since the previous poll". An update that finds a map full is counted in syscalls_dropped.
#include <linux/ptrace.h>
#include <asm/unistd.h>

#ifndef CROFT_SYSCALL_ENTRIES
#define CROFT_SYSCALL_ENTRIES 65536
#endif
#ifndef CROFT_IOCTL_ENTRIES
#define CROFT_IOCTL_ENTRIES 16384
#endif

struct syscall_key {
    u32 tgid;
    u32 nr;
};

struct ioctl_key {
    u32 tgid;
    u32 fd;
};

struct ioctl_value {
    u64 count;
    u64 last_ns;  // bpf_ktime_get_ns: CLOCK_MONOTONIC
};

BPF_HASH(syscall_counts, struct syscall_key, u64, CROFT_SYSCALL_ENTRIES);
BPF_HASH(ioctl_counts, struct ioctl_key, struct ioctl_value, CROFT_IOCTL_ENTRIES);
BPF_PERCPU_ARRAY(syscalls_dropped, u64, 1);

static __always_inline void syscalls_count_dropped(void) {
    u32 slot = 0;
    u64 *dropped = syscalls_dropped.lookup(&slot);
    if (dropped)
        *dropped += 1;
}

static __always_inline void count_ioctl(u32 tgid, struct pt_regs *regs) {
    u64 fd = 0;
    // The first syscall argument: on x86-64 in %rdi of the user registers saved at entry.
    bpf_probe_read_kernel(&fd, sizeof(fd), &PT_REGS_PARM1(regs));
    struct ioctl_key key = {.tgid = tgid, .fd = (u32)fd};
    struct ioctl_value zero = {};
    struct ioctl_value *value = ioctl_counts.lookup_or_try_init(&key, &zero);
    if (!value) {
        syscalls_count_dropped();
        return;
    }
    __sync_fetch_and_add(&value->count, 1);
    value->last_ns = bpf_ktime_get_ns();
}

RAW_TRACEPOINT_PROBE(sys_enter) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    long nr = (long)ctx->args[1];
    struct syscall_key key = {.tgid = tgid, .nr = (u32)nr};
    u64 zero = 0;
    u64 *count = syscall_counts.lookup_or_try_init(&key, &zero);
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        syscalls_count_dropped();
    if (nr == __NR_ioctl)
        count_ioctl(tgid, (struct pt_regs *)ctx->args[0]);
    return 0;
}
