// TCP arrivals per local endpoint (address, port): segments that carried data and handshakes begun,
// the offered load a server receives whether or not its application keeps up.
//
// - tcp:tcp_probe fires in tcp_rcv_established for every segment an established socket receives
//   (net/ipv4/tcp_input.c), in softirq context; its data_len is the segment's payload. A small
//   request on a keep-alive connection is one segment with data; ACKs carry none.
// - sock:inet_sock_set_state into TCP_SYN_RECV fires when the kernel creates the child socket of
//   a listener for a new connection (inet_csk_clone_lock), in the listener's namespace.
// Both are classic tracepoints: their fields come from the tracefs format (include/trace/events/
// tcp.h, sock.h), so nothing here depends on the layout of struct sock (libbpf relocates them by
// field name, BCC reads them from tracefs). The local endpoint is the socket's own address and port (tcp_probe's saddr
// and sport, inet_sock_set_state's saddr/saddr_v6 and sport: on a server socket, the listening
// port). They fire for every namespace: user space gives each namespace the counts of its own
// addresses at the ports it listens on. An IPv4-mapped IPv6 address is kept as IPv6 here and
// mapped in user space.
//
// User space drains endpoint_counts once per poll (the even or the odd map by turns); an update that finds the map full counts in
// ingress_dropped.
#include "croft.h"

#ifndef CROFT_ENDPOINT_ENTRIES
#define CROFT_ENDPOINT_ENTRIES 16384
#endif

#define CROFT_AF_INET 2
#define CROFT_AF_INET6 10
#define CROFT_TCP_SYN_RECV 3
#define CROFT_IPPROTO_TCP 6

struct endpoint_key {
    u8 addr[16];  // IPv4 in the first 4 bytes, the rest 0
    u16 port;     // host byte order
    u16 family;   // AF_INET or AF_INET6
    u32 pad;
};

struct endpoint_value {
    u64 data_segments;
    u64 connections;
};

// Even and odd by bpf/syscalls.c's drain parity (see there; this file comes after it).
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_ENDPOINT_ENTRIES);
    __type(key, struct endpoint_key);
    __type(value, struct endpoint_value);
} endpoint_counts_even SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, CROFT_ENDPOINT_ENTRIES);
    __type(key, struct endpoint_key);
    __type(value, struct endpoint_value);
} endpoint_counts_odd SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, u32);
    __type(value, u64);
} ingress_dropped SEC(".maps");

static __always_inline struct endpoint_value *endpoint_value(struct endpoint_key *key) {
    struct endpoint_value zero = {};
    struct endpoint_value *value;
    if (croft_drain_parity())
        value = croft_lookup_or_try_init(&endpoint_counts_odd, key, &zero);
    else
        value = croft_lookup_or_try_init(&endpoint_counts_even, key, &zero);
    if (!value) {
        u32 slot = 0;
        u64 *dropped = bpf_map_lookup_elem(&ingress_dropped, &slot);
        if (dropped)
            *dropped += 1;
    }
    return value;
}

SEC("tp/tcp/tcp_probe")
int tcp_probe(struct trace_event_raw_tcp_probe *args) {
    if (args->data_len == 0)
        return 0;
    struct endpoint_key key = {};
    key.port = args->sport;
    key.family = args->family;
    // saddr holds a struct sockaddr_in (family, port, 4-byte address) or sockaddr_in6 (family,
    // port, flowinfo, 16-byte address). Copied with a helper: the verifier refuses loads through a
    // context pointer moved by a relocated offset.
    if (args->family == CROFT_AF_INET)
        bpf_probe_read_kernel(key.addr, 4, &args->saddr[4]);
    else if (args->family == CROFT_AF_INET6)
        bpf_probe_read_kernel(key.addr, 16, &args->saddr[8]);
    else
        return 0;
    struct endpoint_value *value = endpoint_value(&key);
    if (value)
        __sync_fetch_and_add(&value->data_segments, 1);
    return 0;
}

SEC("tp/sock/inet_sock_set_state")
int inet_sock_set_state(struct trace_event_raw_inet_sock_set_state *args) {
    if (args->newstate != CROFT_TCP_SYN_RECV || args->protocol != CROFT_IPPROTO_TCP)
        return 0;
    struct endpoint_key key = {};
    key.port = args->sport;
    key.family = args->family;
    if (args->family == CROFT_AF_INET)
        bpf_probe_read_kernel(key.addr, 4, args->saddr);
    else if (args->family == CROFT_AF_INET6)
        bpf_probe_read_kernel(key.addr, 16, args->saddr_v6);
    else
        return 0;
    struct endpoint_value *value = endpoint_value(&key);
    if (value)
        __sync_fetch_and_add(&value->connections, 1);
    return 0;
}
