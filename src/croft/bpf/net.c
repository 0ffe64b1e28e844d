// Network bytes per tgid, received and sent, from the sock:sock_recv_length and sock:sock_send_length
// tracepoints (Linux 6.3+; include/trace/events/sock.h). They fire in sock_recvmsg/sock_sendmsg, in
// the calling process, for every socket family and every syscall that ends there (read/write,
// send*/recv*, io_uring). Attached as raw tracepoints: args are (struct sock *sk, int ret, int flags);
// ret is the byte count or a negative errno, and a MSG_PEEK receive is not counted, as the kernel's
// own trace output does.
//
// Only processes croft writes are counted (croft_watched, from syscalls.c, which comes first in the
// module). User space drains net_bytes once per poll (the even or the odd map by turns); an update that finds the map full counts in
// net_dropped.
#include <linux/socket.h>

#ifndef CROFT_NET_ENTRIES
#define CROFT_NET_ENTRIES 16384
#endif

#define CROFT_NET_RX 0
#define CROFT_NET_TX 1

struct net_key {
    u32 tgid;
    u32 direction;  // CROFT_NET_RX or CROFT_NET_TX
};

// Even and odd by bpf/syscalls.c's drain parity (see there).
BPF_HASH(net_bytes_even, struct net_key, u64, CROFT_NET_ENTRIES);
BPF_HASH(net_bytes_odd, struct net_key, u64, CROFT_NET_ENTRIES);
BPF_PERCPU_ARRAY(net_dropped, u64, 1);

static __always_inline void add_net_bytes(u32 direction, int bytes) {
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    u64 group = 0;
    if (!croft_watched(tgid, &group))
        return;
    struct net_key key = {.tgid = tgid, .direction = direction};
    u64 zero = 0;
    u64 *total = croft_drain_parity() ? net_bytes_odd.lookup_or_try_init(&key, &zero)
                                      : net_bytes_even.lookup_or_try_init(&key, &zero);
    if (total) {
        __sync_fetch_and_add(total, (u64)bytes);
        return;
    }
    u32 slot = 0;
    u64 *dropped = net_dropped.lookup(&slot);
    if (dropped)
        *dropped += 1;
}

RAW_TRACEPOINT_PROBE(sock_send_length) {
    int ret = (int)ctx->args[1];
    if (ret > 0)
        add_net_bytes(CROFT_NET_TX, ret);
    return 0;
}

RAW_TRACEPOINT_PROBE(sock_recv_length) {
    int ret = (int)ctx->args[1];
    int flags = (int)ctx->args[2];
    if (ret > 0 && !(flags & MSG_PEEK))
        add_net_bytes(CROFT_NET_RX, ret);
    return 0;
}
