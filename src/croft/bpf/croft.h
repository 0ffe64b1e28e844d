// What every croft program includes. The programs are written in libbpf's dialect and compiled
// ahead of time into croft.<arch>.bpf.o (scripts/build-bpf.sh), which libbpf relocates against the
// running kernel's BTF. On a kernel without BTF, BCC compiles the same files at start against the
// kernel's headers (CROFT_BCC, croft.adapters.host.bcc_loader), after rewriting the few forms BCC
// spells its own way: map definitions, map helper calls on `&map`, and SEC() program headers.
// Within these files, write those forms exactly as the rewrite expects (bcc_loader.bcc_dialect
// says which, and refuses what it does not know).
#ifndef CROFT_H
#define CROFT_H

#ifdef CROFT_BCC

// BCC's own helpers.h comes first, compiled against the running kernel's headers; the loader's
// settings are defines (-DCROFT_SETTING_name=value).
#include <linux/ptrace.h>
#define croft_setting(name) (CROFT_SETTING_##name)
// sys_enter's `struct pt_regs *regs` is a kernel pointer BCC does not rewrite: read it as such.
#define PT_REGS_PARM1_CORE_SYSCALL(regs)                                      \
    ({                                                                        \
        u64 _croft_arg = 0;                                                   \
        bpf_probe_read_kernel(&_croft_arg, sizeof(_croft_arg), &PT_REGS_PARM1(regs)); \
        _croft_arg;                                                           \
    })

#else

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

// What the loader decides before loading (croft.adapters.host.core_loader.Settings): read-only
// data, so the verifier knows each value and drops the code a setting turns off.
struct croft_settings {
    u32 ioctl_nr;  // the ioctl syscall's number on this architecture (its syscall table)
    u32 oncpu;     // bpf/oncpu.c's programs are attached: syscalls.c's task_newtask marks for them
    u32 moves;     // cgroup:cgroup_attach_task is attached: it invalidates cached verdicts
    u32 pad;
};

const volatile struct croft_settings croft_settings = {};
#define croft_setting(name) (croft_settings.name)

// BCC's map.lookup_or_try_init(): the value of `key`, created as `*init` when absent (another CPU
// may create it first: then that one is returned). NULL when the map is full.
static __always_inline void *croft_lookup_or_try_init(void *map, const void *key, const void *init) {
    void *value = bpf_map_lookup_elem(map, key);
    if (value)
        return value;
    bpf_map_update_elem(map, key, init, BPF_NOEXIST);
    return bpf_map_lookup_elem(map, key);
}

#endif

#endif
