// Network bytes per tgid, received and sent, from the sock:sock_recv_length and sock:sock_send_length
// tracepoints (Linux 6.3+; include/trace/events/sock.h). They fire in sock_recvmsg/sock_sendmsg, in
// the calling process, for every socket family and every syscall that ends there (read/write,
// send*/recv*, io_uring). Attached as raw tracepoints: args are (struct sock *sk, int ret, int flags);
// ret is the byte count or a negative errno, and a MSG_PEEK receive is not counted, as the kernel's
// own trace output does.
//
// Only processes croft writes are counted (croft_watched, from syscalls.c, which comes first). User space drains net_bytes once per poll (the even or the odd map by turns); an update that finds the map full counts in
// net_dropped.
#include "croft.h"

#ifndef CROFT_NET_ENTRIES
#define CROFT_NET_ENTRIES 16384
#endif

#define CROFT_NET_RX 0
#define CROFT_NET_TX 1
#define CROFT_MSG_PEEK 2  // include/linux/socket.h

struct net_key {
    u32 tgid;
    u32 direction;  // CROFT_NET_RX or CROFT_NET_TX
};

// Even and odd by bpf/syscalls.c's drain parity (see there).
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_NET_ENTRIES);
    __type(key, struct net_key);
    __type(value, u64);
} net_bytes_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_NET_ENTRIES);
    __type(key, struct net_key);
    __type(value, u64);
} net_bytes_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u64);
} net_dropped SEC(".maps");

static __always_inline void add_net_bytes(u32 direction, int bytes) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u64 group = 0;
    if (!croft_watched(tgid, &group))
        return;
    struct net_key key = {.tgid = tgid, .direction = direction};
    u64 zero = 0;
    u64 *total;
    if (croft_drain_parity())
        total = croft_lookup_or_try_init(&net_bytes_odd, &key, &zero);
    else
        total = croft_lookup_or_try_init(&net_bytes_even, &key, &zero);
    if (total) {
        __sync_fetch_and_add(total, (u64)bytes);
        return;
    }
    u32 slot = 0;
    u64 *dropped = bpf_map_lookup_elem(&net_dropped, &slot);
    if (dropped)
        *dropped += 1;
}

// TP_PROTO(struct sock *sk, int ret, int flags)
SEC("raw_tp/sock_send_length")
int sock_send_length(struct bpf_raw_tracepoint_args *ctx) {
    int ret = (int)ctx->args[1];
    if (ret > 0)
        add_net_bytes(CROFT_NET_TX, ret);
    return 0;
}

SEC("raw_tp/sock_recv_length")
int sock_recv_length(struct bpf_raw_tracepoint_args *ctx) {
    int ret = (int)ctx->args[1];
    int flags = (int)ctx->args[2];
    if (ret > 0 && !(flags & CROFT_MSG_PEEK))
        add_net_bytes(CROFT_NET_RX, ret);
    return 0;
}
