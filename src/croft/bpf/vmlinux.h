// The kernel types croft's programs use, as the kernel's BTF declares them (`bpftool btf dump file
// /sys/kernel/btf/vmlinux format c`), with only the fields the programs read. libbpf relocates each
// access against the running kernel's own BTF by type and field name (preserve_access_index below),
// so nothing here fixes an offset: one header serves every kernel that has these fields, on x86-64
// and arm64 alike (https://docs.kernel.org/bpf/libbpf/libbpf_overview.html#bpf-co-re-compile-once-run-everywhere).
// A field missing from a kernel fails the load, naming the program and the field.
#ifndef __VMLINUX_H__
#define __VMLINUX_H__  // the guard bpftool writes: bpf_tracing.h then names the kernel's pt_regs fields

typedef signed char __s8;
typedef unsigned char __u8;
typedef short int __s16;
typedef short unsigned int __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long int __s64;
typedef long long unsigned int __u64;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s64 s64;
typedef _Bool bool;
typedef int pid_t;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;

// include/uapi/linux/bpf.h: stable numbers.
enum bpf_map_type {
    BPF_MAP_TYPE_HASH = 1,
    BPF_MAP_TYPE_ARRAY = 2,
    BPF_MAP_TYPE_PERCPU_ARRAY = 6,
    BPF_MAP_TYPE_LRU_HASH = 9,
};

enum {
    BPF_ANY = 0,
    BPF_NOEXIST = 1,
    BPF_EXIST = 2,
};

// A raw tracepoint's context: the tracepoint's own arguments (include/trace/events/*.h, TP_PROTO).
struct bpf_raw_tracepoint_args {
    __u64 args[0];
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

// Where the raw sys_enter tracepoint's `struct pt_regs *regs` keeps a syscall's first argument:
// %rdi on x86-64; orig_x0 on arm64, which bpf_tracing.h reads through its own pt_regs___arm64.
struct pt_regs {
#if defined(__TARGET_ARCH_x86)
    long unsigned int di;
#endif
};

// Classic tracepoints: the record the tracepoint writes (include/trace/events/sched.h, task.h,
// cgroup.h, tcp.h, sock.h); field names are those of the tracefs format file.
struct trace_entry {
    short unsigned int type;
};

struct trace_event_raw_sched_process_template {
    struct trace_entry ent;
    pid_t pid;
};

struct trace_event_raw_task_newtask {
    struct trace_entry ent;
    pid_t pid;
    u64 clone_flags;
};

struct trace_event_raw_cgroup_migrate {
    struct trace_entry ent;
    int pid;
};

struct trace_event_raw_tcp_probe {
    struct trace_entry ent;
    __u8 saddr[28];
    __u16 sport;
    __u16 family;
    __u16 data_len;
};

struct trace_event_raw_inet_sock_set_state {
    struct trace_entry ent;
    int newstate;
    __u16 sport;
    __u16 family;
    __u16 protocol;
    __u8 saddr[4];
    __u8 saddr_v6[16];
};

#pragma clang attribute pop

#endif
