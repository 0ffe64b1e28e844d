// croft's CO-RE object: every program in one object, compiled once per architecture by
// scripts/build-bpf.sh (`make bpf`) into croft.<arch>.bpf.o. The loader (croft.adapters.host.
// core_loader) leaves out the programs whose tracepoints the running kernel lacks and sets the
// settings of bpf/croft.h before loading. BCC, on a kernel without BTF, compiles the same files
// but this one.
#define CROFT_ONCPU
#define CROFT_MOVES
#include "oncpu.c"
#include "syscalls.c"
#include "net.c"
#include "ingress.c"

char LICENSE[] SEC("license") = "GPL";
