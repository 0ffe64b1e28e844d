/* croft.domain.dataset._rowscan: croft stats' fast path over a buffer of whole lines.
 *
 * For each line, either accept it -- only when it is certainly a row the strict schema
 * (croft.domain.dataset.views.ROW_DECODER) accepts -- and fold it into the stats totals, or defer it
 * to the Python path (croft.domain.dataset.lines.view, then StatsAccumulator.add), which stays the
 * definition of a row. Acceptance is deliberately narrow: the canonical compact form croft's writer
 * produces (croft.domain.dataset.codec: the keys in on-disk order, no whitespace), strings of
 * printable ASCII with no backslash, integers within int64 ( unix_ms within
 * the calendar), numbers in the JSON grammar whose decimal exponent keeps them well inside a double
 * (a rate is parsed exactly: Clinger's fast path, else Python's correctly rounded dtoa), workloads
 * of the Literal, optional keys absent or of their type (never null). Everything else -- escapes,
 * non-ASCII, null optional keys, unusual numbers, and when the syscalls are summed too many of
 * them or rates of 2**44 or more -- is deferred, so the totals always equal what the Python path computes from the same lines
 * (tests/unit/test_rowscan.py).
 *
 * fold(data, start, stop, node, polls, tgids, processes, with_sums)
 *     -> (rows, first_ms, last_ms, (gpu-onset, gpu-held, no-gpu), sums, deferred)
 * data[start:stop] is whole lines (a last line without a newline is taken as one). polls and tgids
 * (dict node -> set of int) and processes (set of (container_id, framework)) are updated in place;
 * sums is a list of (name, int) in units of 2**-80 calls/s (every name seen, zero totals included),
 * empty unless with_sums; deferred is the list of lines (bytes, without newline) left to Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <emmintrin.h> /* SSE2: every x86-64 has it */
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_LINE_BYTES (1 << 20)
#define UNIX_MS_MAX 253402300799999LL
#define MAX_ROW_CALLS 256
#define NAME_SLOTS 4096 /* power of two; at most half used */
#define PAIR_SLOTS 4096
#define NODE_SLOTS 16
#define TGID_SLOTS 1024 /* power of two; at most half used */
#define RATE_LIMIT 17592186044416.0 /* 2**44: |rate * 2**80| < 2**124 */

typedef __int128 i128;

typedef struct {
    const char *ptr;
    Py_ssize_t len;
} span;

typedef struct {
    span name;
    double rate;
} call;

typedef struct {
    long long unix_ms, tgid;
    span node; /* len 0: no node key, or "" */
    span cid;  /* ptr NULL: null */
    span fw;   /* ptr NULL: absent */
    int workload;
    int ncalls;
    call calls[MAX_ROW_CALLS];
} row;

/* ---- the parser: returns 1 for a row it is sure of, 0 to defer ---- */

/* Whether p[0:n] equals lit[0:n], n a constant: 16 bytes at a time (8 or 4 below that), the
 * last chunk overlapping the one before; inlined, so the literal's chunks are constants. */
static inline __attribute__((always_inline)) int same(const char *p, const char *lit, size_t n) {
    if (n >= 16) {
        __m128i eq = _mm_set1_epi8(-1);
        size_t i = 0;
        for (; i + 16 <= n; i += 16)
            eq = _mm_and_si128(eq, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + i)),
                                                  _mm_loadu_si128((const __m128i *)(lit + i))));
        if (i < n)
            eq = _mm_and_si128(eq, _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + n - 16)),
                                                  _mm_loadu_si128((const __m128i *)(lit + n - 16))));
        return _mm_movemask_epi8(eq) == 0xffff;
    }
    if (n >= 8) {
        uint64_t a0, b0, a1, b1;
        memcpy(&a0, p, 8);
        memcpy(&b0, lit, 8);
        memcpy(&a1, p + n - 8, 8);
        memcpy(&b1, lit + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    if (n >= 4) {
        uint32_t a0, b0, a1, b1;
        memcpy(&a0, p, 4);
        memcpy(&b0, lit, 4);
        memcpy(&a1, p + n - 4, 4);
        memcpy(&b1, lit + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++) diff |= (unsigned)(unsigned char)(p[i] ^ lit[i]);
    return diff == 0;
}

#define NEED(lit)                                                                          \
    do {                                                                                   \
        if (end - p < (Py_ssize_t)(sizeof(lit) - 1) || !same(p, lit, sizeof(lit) - 1)) \
            return 0;                                                                      \
        p += sizeof(lit) - 1;                                                              \
    } while (0)
#define HAS(lit) (end - p >= (Py_ssize_t)(sizeof(lit) - 1) && same(p, lit, sizeof(lit) - 1))

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The bytes a string may hold here: printable ASCII but the quote and the backslash. */
static unsigned char STR_BYTE[256];

static void init_tables(void) {
    for (int c = 0x20; c <= 0x7e; c++) STR_BYTE[c] = c != '"' && c != '\\';
}

/* A string of printable ASCII, no quote or backslash inside. */
static inline __attribute__((always_inline)) int parse_str(const char **pp, const char *end, span *out) {
    const char *p = *pp;
    if (p >= end || *p != '"') return 0;
    const char *s = ++p;
    /* 16 bytes at a time: the first byte that is not printable ASCII (signed, the bytes from 0x80
     * are negative), or is a quote or a backslash, ends the scan */
    const __m128i below = _mm_set1_epi8(0x1f), above = _mm_set1_epi8(0x7f);
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i ok = _mm_and_si128(_mm_cmpgt_epi8(x, below), _mm_cmplt_epi8(x, above));
        ok = _mm_andnot_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)), ok);
        unsigned stop = (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
        if (stop) {
            p += __builtin_ctz(stop);
            goto scanned;
        }
        p += 16;
    }
    while (p < end && STR_BYTE[(unsigned char)*p]) p++;
scanned:
    if (p >= end || *p != '"') return 0;
    out->ptr = s;
    out->len = p - s;
    *pp = p + 1;
    return 1;
}

/* How many digits p[0:] starts with (16 at a time). */
static inline Py_ssize_t digit_run(const char *p, const char *end) {
    const char *q = p;
    while (end - q >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)q);
        __m128i d = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
        unsigned other = (unsigned)_mm_movemask_epi8(d) ^ 0xffffu;
        if (other) return (q - p) + __builtin_ctz(other);
        q += 16;
    }
    while (q < end && is_digit(*q)) q++;
    return q - p;
}

/* parse_int without the value: the same integers pass. */
static inline __attribute__((always_inline)) int check_int(const char **pp, const char *end) {
    const char *p = *pp;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) return 0;
    Py_ssize_t n = 1;
    if (*p == '0') {
        if (neg) return 0;
    } else {
        n = digit_run(p, end);
        if (n > 19) return 0;
        /* 19 digits: within int64 when not above its bound, digit by digit */
        if (n == 19 && memcmp(p, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0) return 0;
    }
    p += n;
    if (p < end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E')) return 0;
    *pp = p;
    return 1;
}

/* The value of the 8 digits p[0:8] (simdjson's parse_eight_digits_unrolled: pairs, then fours, then
 * the eight, each step a multiply of the lanes the one before left). */
static inline uint64_t eight_digits(const char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    v -= 0x3030303030303030ULL;
    v = (v * 10) + (v >> 8);
    v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
         (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
        32;
    return v;
}

/* An integer within int64: -?(0|[1-9][0-9]{0,18}), not "-0", followed by no other number
 * character. */
static inline __attribute__((always_inline)) int parse_int(const char **pp, const char *end, long long *out) {
    const char *p = *pp;
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) return 0;
    uint64_t v = 0;
    Py_ssize_t n = 1;
    if (*p == '0') {
        if (neg) return 0;
    } else {
        n = digit_run(p, end);
        if (n > 19) return 0;
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) v = v * 100000000ULL + eight_digits(p + i); /* < 10**19 < 2**64 */
        for (; i < n; i++) v = v * 10 + (uint64_t)(p[i] - '0');
    }
    p += n;
    if (p < end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E')) return 0;
    if (v > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX)) return 0;
    *out = neg ? (long long)(0 - v) : (long long)v;
    *pp = p;
    return 1;
}

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The end of a number that began at `s` and whose digits end at `*pp`: its optional exponent
 * ([eE][+-]?[0-9]{1,3}, into `*exp10`), then the checks both scanners make: at most 40 characters,
 * and a magnitude well inside a double's normal range. */
static inline int num_tail(const char **pp, const char *end, const char *s, int nonzero, int intdigits,
                           int fraczeros, int *exp10) {
    const char *p = *pp;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) {
            eneg = *p == '-';
            p++;
        }
        if (p >= end || !is_digit(*p)) return 0;
        int digits = 0;
        while (p < end && is_digit(*p)) {
            *exp10 = *exp10 * 10 + (*p - '0');
            p++;
            if (++digits > 3) return 0;
        }
        if (eneg) *exp10 = -*exp10;
    }
    if (p - s > 40) return 0;
    if (nonzero) {
        /* The value lies in [10**(lead-1), 10**lead) */
        int lead = (intdigits ? intdigits : -fraczeros) + *exp10;
        if (lead > 300 || lead < -300) return 0;
    }
    *pp = p;
    return 1;
}

/* A JSON number whose magnitude is well inside a double's normal range (or exactly zero):
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]{1,3})?, at most 40 characters. With `value`, its
 * double, correctly rounded. */
static inline int parse_num(const char **pp, const char *end, double *value) {
    const char *p = *pp, *s = p;
    if (end - p >= 16) {
        /* The usual rate, -?(0|[1-9][0-9]*)(\.[0-9]+)? of at most 15 digits and its end within 16
         * bytes, found from one mask of the digits as check_num finds it: its digits are m and its
         * fraction's length -e, as the loop below takes them (leading zeros add nothing to m), and
         * m < 10**15 is exact, so the value is the same one division or none (Clinger). A number of
         * 16 characters or fewer needs no magnitude check. Anything else is read by the loop. */
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i d = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
        unsigned other = ((unsigned)_mm_movemask_epi8(d) ^ 0xffffu) | 0x10000u; /* bit 16: past the window */
        unsigned k = p[0] == '-';
        unsigned whole = (unsigned)__builtin_ctz(other >> k), fraction = 0, point = 0;
        if (whole && (p[k] != '0' || whole == 1)) {
            const char *digits = p + k;
            k += whole;
            if (k < 16 && p[k] == '.') {
                point = 1;
                fraction = (unsigned)__builtin_ctz(other >> (k + 1));
                k += 1 + fraction;
            }
            if (k < 16 && fraction >= point && p[k] != 'e' && p[k] != 'E' && whole + fraction <= 15) {
                uint64_t m = 0;
                for (unsigned i = 0; i < whole; i++) m = m * 10 + (uint64_t)(digits[i] - '0');
                for (unsigned i = 0; i < fraction; i++) m = m * 10 + (uint64_t)(digits[whole + 1 + i] - '0');
                double v = fraction ? (double)m / POW10[fraction] : (double)m;
                *value = p[0] == '-' ? -v : v;
                *pp = p + k;
                return 1;
            }
        }
    }
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= end || !is_digit(*p)) return 0;
    uint64_t m = 0;
    int sig = 0;        /* significant digits taken into m (leading zeros skipped) */
    int intdigits = 0;  /* digits of the integer part after its leading zeros */
    int fraczeros = 0;  /* zeros after the point before the first significant digit (when int part 0) */
    int scale = 0;      /* decimal exponent of m's last digit, before the explicit exponent */
    int nonzero = 0;
    if (*p == '0') {
        p++;
    } else {
        while (p < end && is_digit(*p)) {
            if (sig < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                sig++;
            } else {
                scale++;
            }
            intdigits++;
            nonzero = 1;
            p++;
        }
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return 0;
        while (p < end && is_digit(*p)) {
            if (*p != '0') nonzero = 1;
            if (!nonzero && !intdigits) {
                fraczeros++; /* a leading zero: m stays 0, its place moves */
                scale--;
            } else if (sig < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                sig++;
                scale--;
            }
            p++;
        }
    }
    int exp10 = 0;
    if (!num_tail(&p, end, s, nonzero, intdigits, fraczeros, &exp10)) return 0;
    if (value) {
        double v;
        int e = scale + exp10;
        if (!nonzero) {
            v = 0.0;
        } else if (sig <= 15 && e >= -22 && e <= 22) {
            /* exact m and 10**|e|: one correctly rounded operation (Clinger) */
            v = e >= 0 ? (double)m * POW10[e] : (double)m / POW10[-e];
        } else {
            char buf[48];
            Py_ssize_t n = p - s;
            memcpy(buf, s, (size_t)n);
            buf[n] = 0;
            char *stop = NULL;
            v = PyOS_string_to_double(buf, &stop, NULL);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            if (stop != buf + n || !isfinite(v)) return 0;
            *pp = p;
            *value = v;
            return 1;
        }
        *value = neg ? -v : v;
    }
    *pp = p;
    return 1;
}

/* parse_num without the value, faster: the same numbers pass, and end at the same byte. */
static inline __attribute__((always_inline)) int check_num(const char **pp, const char *end) {
    const char *p = *pp, *s = p;
    if (end - p >= 16) {
        /* The usual number, -?(0|[1-9][0-9]*)(\.[0-9]+)? and its end within 16 bytes, from one mask
         * of the digits (so at most 15 characters: its magnitude needs no check); anything else
         * (a leading zero before digits, an exponent, a longer number) is read by the loop below. */
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i d = _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8('9' + 1)));
        unsigned other = ((unsigned)_mm_movemask_epi8(d) ^ 0xffffu) | 0x10000u; /* bit 16: past the window */
        unsigned k = p[0] == '-';
        unsigned n = (unsigned)__builtin_ctz(other >> k);
        if (n == 0) return 0; /* no digit where one must be */
        if (p[k] != '0' || n == 1) {
            k += n;
            if (k < 16 && p[k] == '.') {
                k++;
                n = (unsigned)__builtin_ctz(other >> k);
                if (n == 0 && k < 16) return 0; /* a point without a digit after it */
                k += n;
            }
            if (k < 16 && p[k] != 'e' && p[k] != 'E') {
                *pp = p + k;
                return 1;
            }
        }
    }
    if (p < end && *p == '-') p++;
    if (p >= end || !is_digit(*p)) return 0;
    int intdigits = 0, fraczeros = 0, nonzero = 0, exp10 = 0;
    if (*p == '0') {
        p++;
    } else {
        Py_ssize_t n = digit_run(p, end);
        if (n > 40) return 0; /* too long anyway (and intdigits stays an int) */
        intdigits = (int)n;
        p += n;
        nonzero = 1;
    }
    if (p < end && *p == '.') {
        const char *q = ++p;
        if (!intdigits) {
            while (p < end && *p == '0') p++;
            fraczeros = (int)(p - q);
            if (p < end && is_digit(*p)) nonzero = 1;
        }
        p += digit_run(p, end);
        if (p == q) return 0;
    }
    if (!num_tail(&p, end, s, nonzero, intdigits, fraczeros, &exp10)) return 0;
    *pp = p;
    return 1;
}

/* [{"name":STR,"rate_per_sec":NUM},...]; with r, the calls are kept in it */
static inline int parse_calls(const char **pp, const char *end, row *r) {
    const char *p = *pp;
    NEED("[");
    if (p < end && *p == ']') {
        *pp = p + 1;
        return 1;
    }
    for (;;) {
        span name;
        double rate = 0;
        NEED("{\"name\":");
        if (!parse_str(&p, end, &name)) return 0;
        NEED(",\"rate_per_sec\":");
        if (r ? !parse_num(&p, end, &rate) : !check_num(&p, end)) return 0;
        NEED("}");
        if (r) {
            if (r->ncalls >= MAX_ROW_CALLS || !(fabs(rate) < RATE_LIMIT)) return 0;
            r->calls[r->ncalls].name = name;
            r->calls[r->ncalls].rate = rate;
            r->ncalls++;
        }
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        NEED("]");
        *pp = p;
        return 1;
    }
}

#define STR(lit)                                \
    do {                                        \
        NEED(lit);                              \
        if (!parse_str(&p, end, &tmp)) return 0; \
    } while (0)
#define INT(lit)                                 \
    do {                                         \
        NEED(lit);                               \
        if (!parse_int(&p, end, &ival)) return 0; \
    } while (0)
#define CHECK_INT(lit)                          \
    do {                                        \
        NEED(lit);                              \
        if (!check_int(&p, end)) return 0;      \
    } while (0)
#define NUM(lit)                                  \
    do {                                          \
        NEED(lit);                                \
        if (!check_num(&p, end)) return 0;       \
    } while (0)

/* Members of objects already read in this buffer, for the rows that repeat them: the process of a
 * tgid (the same from poll to poll) and the cgroup usage of the row before (the same for each
 * process of a container in a poll). Bytes equal to members read before, followed by the same
 * closing bytes, read as those did -- a member ends at a quote or at a byte no number holds, both
 * inside the bytes compared or the closing ones -- so they are taken without reading them again.
 * Only the buffer's bytes are remembered: the memo lives for one call. */
#define PROC_BITS 7
typedef struct {
    const char *ptr; /* from comm's value to the end of cwd's or framework's; NULL: none */
    Py_ssize_t len;
    long long tgid;
    Py_ssize_t cid_at, cid_len; /* the container id's offset from ptr; -1: null */
    Py_ssize_t fw_at, fw_len;   /* the framework's offset from ptr; -1: absent */
} proc_memo;

typedef struct {
    proc_memo procs[1 << PROC_BITS];
    const char *cgroup_usage; /* from cpu_cores' value to the end of io_pressure_avg10's; NULL: none */
    Py_ssize_t cgroup_usage_len;
} memo;

/* Whether p[0:] starts with the n bytes at `before` and then the literal `close`. */
#define seen_before(p, end, before, n, close)                                                   \
    ((end) - (p) >= (n) + (Py_ssize_t)(sizeof(close) - 1) && !memcmp((p), (before), (size_t)(n)) && \
     same((p) + (n), close, sizeof(close) - 1))

/* With `calls`, the row's syscalls are kept in r (their rates parsed, at most MAX_ROW_CALLS of
 * them, each below RATE_LIMIT); without, they are only checked (their rates count in no total).
 * `end` may lie past the line's newline: no part of a row takes a newline in (a string stops at any
 * byte below 0x20, a number at any byte not of a number, the keys hold none), so the row is
 * accepted only when the parse stops at its newline or at `end`; `*stopped` says where it stopped. */
static int parse_row(const char *p, const char *end, row *r, int calls, const char **stopped, memo *m) {
    span tmp;
    long long ival;
    INT("{\"unix_ms\":");
    if (ival < 0 || ival > UNIX_MS_MAX) return 0;
    r->unix_ms = ival;
    INT(",\"tgid\":");
    r->tgid = ival;
    r->node.ptr = NULL;
    r->node.len = 0;
    if (HAS(",\"node\":")) {
        STR(",\"node\":");
        r->node = tmp;
    }
    NEED(",\"process\":{\"comm\":");
    const char *members = p;
    proc_memo *pm = NULL;
    if (m) {
        pm = &m->procs[((uint64_t)r->tgid * 0x9e3779b97f4a7c15ULL) >> (64 - PROC_BITS)];
        if (pm->ptr && pm->tgid == r->tgid && seen_before(p, end, pm->ptr, pm->len, "},\"workload\":")) {
            r->cid = pm->cid_at < 0 ? (span){NULL, 0} : (span){p + pm->cid_at, pm->cid_len};
            r->fw = pm->fw_at < 0 ? (span){NULL, 0} : (span){p + pm->fw_at, pm->fw_len};
            p += pm->len;
            goto process_read;
        }
    }
    if (!parse_str(&p, end, &tmp)) return 0;
    STR(",\"exe\":");
    STR(",\"cgroup\":");
    NEED(",\"container_id\":");
    if (HAS("null")) {
        p += 4;
        r->cid.ptr = NULL;
        r->cid.len = 0;
    } else if (!parse_str(&p, end, &r->cid)) {
        return 0;
    }
    STR(",\"cwd\":");
    r->fw.ptr = NULL;
    r->fw.len = 0;
    if (HAS(",\"framework\":")) {
        STR(",\"framework\":");
        r->fw = tmp;
    }
    if (pm) {
        pm->ptr = members;
        pm->len = p - members;
        pm->tgid = r->tgid;
        pm->cid_at = r->cid.ptr ? r->cid.ptr - members : -1;
        pm->cid_len = r->cid.len;
        pm->fw_at = r->fw.ptr ? r->fw.ptr - members : -1;
        pm->fw_len = r->fw.len;
    }
process_read:
    STR("},\"workload\":");
    if (tmp.len == 9 && !memcmp(tmp.ptr, "gpu-onset", 9))
        r->workload = 0;
    else if (tmp.len == 8 && !memcmp(tmp.ptr, "gpu-held", 8))
        r->workload = 1;
    else if (tmp.len == 6 && !memcmp(tmp.ptr, "no-gpu", 6))
        r->workload = 2;
    else
        return 0;
    if (HAS(",\"ioctl_count\":")) CHECK_INT(",\"ioctl_count\":");
    if (HAS(",\"since_last_gpu_ioctl_ms\":")) CHECK_INT(",\"since_last_gpu_ioctl_ms\":");
    NUM(",\"usage\":{\"cpu_cores\":");
    CHECK_INT(",\"rss_bytes\":");
    CHECK_INT(",\"threads\":");
    NUM(",\"ctx_voluntary_s\":");
    NUM(",\"ctx_involuntary_s\":");
    NUM(",\"read_bytes_s\":");
    NUM(",\"write_bytes_s\":");
    NUM(",\"network_rx_bytes_s\":");
    NUM(",\"network_tx_bytes_s\":");
    NUM(",\"runqueue_s\":");
    NEED("},\"cgroup_usage\":{\"cpu_cores\":");
    if (m && m->cgroup_usage && seen_before(p, end, m->cgroup_usage, m->cgroup_usage_len, "},\"syscalls\":")) {
        p += m->cgroup_usage_len;
    } else {
        members = p;
        if (!check_num(&p, end)) return 0;
        NUM(",\"cpu_throttled_fraction\":");
        CHECK_INT(",\"memory_bytes\":");
        CHECK_INT(",\"oom_kills\":");
        NUM(",\"cpu_pressure_avg10\":");
        NUM(",\"memory_pressure_avg10\":");
        NUM(",\"io_pressure_avg10\":");
        if (m) {
            m->cgroup_usage = members;
            m->cgroup_usage_len = p - members;
        }
    }
    NEED("},\"syscalls\":");
    r->ncalls = 0;
    if (!parse_calls(&p, end, calls ? r : NULL)) return 0;
    if (HAS(",\"short_lived\":")) {
        CHECK_INT(",\"short_lived\":{\"processes\":");
        NEED(",\"syscalls\":");
        if (!parse_calls(&p, end, NULL)) return 0;
        NEED("}");
    }
    if (HAS(",\"ingress\":")) {
        NUM(",\"ingress\":{\"tcp_passive_opens_s\":");
        NUM(",\"tcp_in_segs_s\":");
        NUM(",\"rx_packets_s\":");
        NUM(",\"rx_bytes_s\":");
        NUM(",\"listen_drops_s\":");
        CHECK_INT(",\"listen_backlog\":");
        CHECK_INT(",\"unread_bytes\":");
        if (HAS(",\"tcp_data_segments_s\":")) NUM(",\"tcp_data_segments_s\":");
        if (HAS(",\"tcp_connections_s\":")) NUM(",\"tcp_connections_s\":");
        NEED("}");
    }
    if (HAS(",\"label\":")) STR(",\"label\":");
    NEED("}");
    *stopped = p;
    return p == end || *p == '\n';
}

/* ---- the fold ---- */

static inline uint64_t hash_bytes(uint64_t h, const char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h ^ (h >> 32);
}

/* hash_bytes of a syscall's name in a row fold took: 8 bytes from its start are there to read
 * (`","rate_per_sec":` follows every name), so a short name is one masked load. */
static inline uint64_t hash_name(const char *p, Py_ssize_t n) {
    if (n > 8) return hash_bytes(0xcbf29ce484222325ULL, p, n);
    uint64_t x;
    memcpy(&x, p, 8);
    if (n < 8) x &= (1ULL << (8 * n)) - 1;
    uint64_t h = (x ^ (uint64_t)n) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 32);
}

/* Whether the names a and b, both of n bytes and both in rows fold took, are equal (see hash_name). */
static inline int same_name(const char *a, const char *b, Py_ssize_t n) {
    if (n > 8) return !memcmp(a, b, (size_t)n);
    uint64_t x, y;
    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    return n == 8 ? x == y : ((x ^ y) & ((1ULL << (8 * n)) - 1)) == 0;
}

typedef struct {
    span name;
    uint64_t hash;
    i128 sum;
    PyObject *big; /* what overflowed `sum`, or NULL */
    uint32_t gen;  /* used in this call when equal to the state's gen */
} name_slot;

typedef struct {
    span cid, fw;
    uint64_t hash;
    uint32_t gen;
} pair_slot;

typedef struct {
    long long tgid;
    int node; /* its node slot */
    uint32_t gen;
} tgid_slot;

typedef struct {
    span raw; /* ptr NULL: the file's node */
    PyObject *polls, *tgids; /* borrowed from the dicts */
    long long last_ms;
    int has_last;
} node_slot;

typedef struct {
    name_slot *names;
    uint32_t gen; /* a slot of names or pairs is in use when its gen equals this */
    int nnames;
    uint16_t used[NAME_SLOTS / 2]; /* the slots of names in use, nnames of them (at most half) */
    pair_slot *pairs;
    int npairs;
    tgid_slot *tgids; /* the (node, tgid) pairs added to the tgid sets in this call */
    int ntgids;
    node_slot nodes[NODE_SLOTS];
    int nnodes;
    span last_cid, last_fw; /* the pair added last (in the set already) */
    int has_last_pair;
    memo memo;
} state;

static PyObject *i128_to_long(i128 v) {
    if (v >= INT64_MIN && v <= INT64_MAX) return PyLong_FromLongLong((long long)v);
    /* its 16 bytes as they lie in memory: x86-64 (SSE2 above) is little-endian */
    return _PyLong_FromByteArray((const unsigned char *)&v, sizeof v, 1, 1);
}

static name_slot *find_name(state *st, span name, uint64_t h) {
    size_t i = h & (NAME_SLOTS - 1);
    for (;;) {
        name_slot *s = &st->names[i];
        if (s->gen != st->gen) return s;
        if (s->hash == h && s->name.len == name.len && same_name(s->name.ptr, name.ptr, name.len))
            return s;
        i = (i + 1) & (NAME_SLOTS - 1);
    }
}

/* The node slot of a row (its own node when it names one, else the file's), or NULL to defer
 * (too many nodes) / on error (exception set). */
static node_slot *node_of(state *st, span raw, PyObject *file_node, PyObject *polls, PyObject *tgids,
                          int *error) {
    for (int i = 0; i < st->nnodes; i++) {
        node_slot *s = &st->nodes[i];
        if (raw.len == 0 ? s->raw.ptr == NULL
                         : (s->raw.ptr && s->raw.len == raw.len && !memcmp(s->raw.ptr, raw.ptr, (size_t)raw.len)))
            return s;
    }
    if (st->nnodes >= NODE_SLOTS) return NULL;
    PyObject *name;
    if (raw.len == 0) {
        name = file_node;
        Py_INCREF(name);
    } else {
        name = PyUnicode_DecodeASCII(raw.ptr, raw.len, "strict");
        if (!name) goto fail;
    }
    PyObject *p = PyDict_GetItemWithError(polls, name);
    PyObject *t;
    if (!p) {
        if (PyErr_Occurred()) goto fail_name;
        p = PySet_New(NULL);
        if (!p) goto fail_name;
        int bad = PyDict_SetItem(polls, name, p);
        Py_DECREF(p);
        if (bad) goto fail_name;
        t = PySet_New(NULL);
        if (!t) goto fail_name;
        bad = PyDict_SetItem(tgids, name, t);
        Py_DECREF(t);
        if (bad) goto fail_name;
    } else {
        t = PyDict_GetItemWithError(tgids, name);
        if (!t) {
            if (PyErr_Occurred()) goto fail_name;
            t = PySet_New(NULL);
            if (!t) goto fail_name;
            int bad = PyDict_SetItem(tgids, name, t);
            Py_DECREF(t);
            if (bad) goto fail_name;
        }
    }
    if (!PySet_Check(p) || !PySet_Check(t)) {
        PyErr_SetString(PyExc_TypeError, "polls and tgids must map nodes to sets");
        goto fail_name;
    }
    Py_DECREF(name);
    node_slot *s = &st->nodes[st->nnodes++];
    s->raw = raw.len == 0 ? (span){NULL, 0} : raw;
    s->polls = p; /* borrowed: the dicts hold them for the call */
    s->tgids = t;
    s->has_last = 0;
    return s;
fail_name:
    Py_DECREF(name);
fail:
    *error = 1;
    return NULL;
}

static PyObject *str_or_none(span s) {
    if (s.ptr == NULL) Py_RETURN_NONE;
    return PyUnicode_DecodeASCII(s.ptr, s.len, "strict");
}

static inline int same_span(span a, span b) {
    return (a.ptr == NULL) == (b.ptr == NULL) && a.len == b.len && (!a.ptr || !memcmp(a.ptr, b.ptr, (size_t)a.len));
}

static int add_pair(state *st, PyObject *processes, span cid, span fw) {
    if (st->has_last_pair && same_span(st->last_cid, cid) && same_span(st->last_fw, fw)) return 0;
    st->last_cid = cid;
    st->last_fw = fw;
    st->has_last_pair = 1;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = hash_bytes(h, cid.ptr ? "s" : "n", 1);
    if (cid.ptr) h = hash_bytes(h, cid.ptr, cid.len);
    h = hash_bytes(h, fw.ptr ? "s" : "n", 1);
    if (fw.ptr) h = hash_bytes(h, fw.ptr, fw.len);
    size_t i = h & (PAIR_SLOTS - 1);
    for (;;) {
        pair_slot *s = &st->pairs[i];
        if (s->gen != st->gen) break;
        if (s->hash == h && (s->cid.ptr == NULL) == (cid.ptr == NULL) && (s->fw.ptr == NULL) == (fw.ptr == NULL) &&
            s->cid.len == cid.len && s->fw.len == fw.len &&
            (!cid.ptr || !memcmp(s->cid.ptr, cid.ptr, (size_t)cid.len)) &&
            (!fw.ptr || !memcmp(s->fw.ptr, fw.ptr, (size_t)fw.len)))
            return 0;
        i = (i + 1) & (PAIR_SLOTS - 1);
    }
    PyObject *a = str_or_none(cid);
    if (!a) return -1;
    PyObject *b = str_or_none(fw);
    if (!b) {
        Py_DECREF(a);
        return -1;
    }
    PyObject *pair = PyTuple_Pack(2, a, b);
    Py_DECREF(a);
    Py_DECREF(b);
    if (!pair) return -1;
    int bad = PySet_Add(processes, pair);
    Py_DECREF(pair);
    if (bad) return -1;
    if (st->npairs < PAIR_SLOTS / 2) { /* else: not remembered, looked up again next time */
        pair_slot *s = &st->pairs[i];
        s->cid = cid;
        s->fw = fw;
        s->hash = h;
        s->gen = st->gen;
        st->npairs++;
    }
    return 0;
}

static int add_long(PyObject *set, long long v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (!o) return -1;
    int bad = PySet_Add(set, o);
    Py_DECREF(o);
    return bad;
}

/* Add a row's tgid to its node's set, once per call (a set adds a value once anyway). */
static int add_tgid(state *st, int node, PyObject *set, long long tgid) {
    uint64_t h = ((uint64_t)tgid ^ ((uint64_t)node << 56)) * 0x9e3779b97f4a7c15ULL;
    size_t i = (size_t)(h >> 54) & (TGID_SLOTS - 1);
    for (;;) {
        tgid_slot *s = &st->tgids[i];
        if (s->gen != st->gen) break;
        if (s->tgid == tgid && s->node == node) return 0;
        i = (i + 1) & (TGID_SLOTS - 1);
    }
    if (add_long(set, tgid)) return -1;
    if (st->ntgids < TGID_SLOTS / 2) { /* else: not remembered, added again next time */
        tgid_slot *s = &st->tgids[i];
        s->tgid = tgid;
        s->node = node;
        s->gen = st->gen;
        st->ntgids++;
    }
    return 0;
}

/* The tables fold keeps between calls (allocated once, by the module's init). */
static row *kept_row;
static name_slot *kept_names;
static pair_slot *kept_pairs;
static tgid_slot *kept_tgids;
static uint32_t kept_gen;
static int tables_busy;

static PyObject *fold(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t start, stop;
    PyObject *file_node, *polls, *tgids, *processes;
    int with_sums;
    if (!PyArg_ParseTuple(args, "y*nnUO!O!O!p", &buf, &start, &stop, &file_node, &PyDict_Type, &polls,
                          &PyDict_Type, &tgids, &PySet_Type, &processes, &with_sums))
        return NULL;
    PyObject *result = NULL, *deferred = NULL, *sums = NULL;
    state st;
    memset(&st, 0, sizeof st);
    /* The tables are kept from call to call (a fresh 430 KB per buffer cost as much as parsing a
     * tenth of it): a new generation empties them. A call made while another runs (never, but a
     * finalizer could) gets tables of its own. */
    int own = tables_busy;
    row *r = own ? PyMem_Malloc(sizeof(row)) : kept_row;
    st.names = own ? PyMem_Calloc(NAME_SLOTS, sizeof(name_slot)) : kept_names;
    st.pairs = own ? PyMem_Calloc(PAIR_SLOTS, sizeof(pair_slot)) : kept_pairs;
    st.tgids = own ? PyMem_Calloc(TGID_SLOTS, sizeof(tgid_slot)) : kept_tgids;
    if (own) {
        st.gen = 1;
    } else {
        tables_busy = 1;
        if (++kept_gen == 0) { /* wrapped: every slot's gen may look current again */
            memset(kept_names, 0, NAME_SLOTS * sizeof(name_slot));
            memset(kept_pairs, 0, PAIR_SLOTS * sizeof(pair_slot));
            memset(kept_tgids, 0, TGID_SLOTS * sizeof(tgid_slot));
            kept_gen = 1;
        }
        st.gen = kept_gen;
    }
    deferred = PyList_New(0);
    if (!r || !st.names || !st.pairs || !st.tgids || !deferred) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (start < 0) start = 0;
    if (stop > buf.len) stop = buf.len;
    const char *data = buf.buf;
    long long rows = 0, first = 0, last = 0;
    long long workloads[3] = {0, 0, 0};
    Py_ssize_t pos = start;
    while (pos < stop) {
        const char *line = data + pos, *end = NULL;
        /* one pass: the parse finds the newline of a row it takes; memchr only for the others */
        int ok = parse_row(line, data + stop, r, with_sums, &end, &st.memo) && end - line <= MAX_LINE_BYTES;
        if (!ok) {
            const char *nl = memchr(line, '\n', (size_t)(stop - pos));
            end = nl ? nl : data + stop;
        }
        pos = (end - data) + 1;
        Py_ssize_t n = end - line;
        node_slot *ns = NULL;
        if (ok && with_sums && st.nnames + r->ncalls > NAME_SLOTS / 2) ok = 0;
        if (ok) {
            int error = 0;
            ns = node_of(&st, r->node, file_node, polls, tgids, &error);
            if (error) goto done;
            if (!ns) ok = 0;
        }
        if (!ok) {
            PyObject *b = PyBytes_FromStringAndSize(line, n);
            if (!b) goto done;
            int bad = PyList_Append(deferred, b);
            Py_DECREF(b);
            if (bad) goto done;
            continue;
        }
        if (rows == 0 || r->unix_ms < first) first = r->unix_ms;
        if (rows == 0 || r->unix_ms > last) last = r->unix_ms;
        rows++;
        if (!ns->has_last || ns->last_ms != r->unix_ms) {
            if (add_long(ns->polls, r->unix_ms)) goto done;
            ns->last_ms = r->unix_ms;
            ns->has_last = 1;
        }
        if (add_tgid(&st, (int)(ns - st.nodes), ns->tgids, r->tgid)) goto done;
        if (add_pair(&st, processes, r->cid, r->fw)) goto done;
        workloads[r->workload]++;
        if (with_sums) {
            for (int i = 0; i < r->ncalls; i++) {
                call *c = &r->calls[i];
                uint64_t h = hash_name(c->name.ptr, c->name.len);
                name_slot *s = find_name(&st, c->name, h);
                if (s->gen != st.gen) {
                    s->gen = st.gen;
                    s->name = c->name;
                    s->hash = h;
                    s->sum = 0;
                    s->big = NULL;
                    st.used[st.nnames++] = (uint16_t)(s - st.names);
                }
                /* exact: a power-of-two scale, |x| < 2**124; the conversion truncates toward 0 */
                i128 x = (i128)(c->rate * 1208925819614629174706176.0); /* 2**80 */
                i128 t;
                if (__builtin_add_overflow(s->sum, x, &t)) {
                    PyObject *part = i128_to_long(s->sum);
                    if (!part) goto done;
                    if (s->big) {
                        PyObject *sum = PyNumber_Add(s->big, part);
                        Py_DECREF(part);
                        if (!sum) goto done;
                        Py_SETREF(s->big, sum);
                    } else {
                        s->big = part;
                    }
                    t = x;
                }
                s->sum = t;
            }
        }
    }
    sums = PyList_New(0);
    if (!sums) goto done;
    if (with_sums) {
        for (int i = 0; i < st.nnames; i++) {
            name_slot *s = &st.names[st.used[i]];
            PyObject *total = i128_to_long(s->sum);
            if (!total) goto done;
            if (s->big) {
                PyObject *t = PyNumber_Add(s->big, total);
                Py_DECREF(total);
                if (!t) goto done;
                total = t;
            }
            PyObject *name = PyUnicode_DecodeASCII(s->name.ptr, s->name.len, "strict");
            if (!name) {
                Py_DECREF(total);
                goto done;
            }
            PyObject *item = PyTuple_Pack(2, name, total);
            Py_DECREF(name);
            Py_DECREF(total);
            if (!item) goto done;
            int bad = PyList_Append(sums, item);
            Py_DECREF(item);
            if (bad) goto done;
        }
    }
    if (rows)
        result = Py_BuildValue("(LLL(LLL)OO)", rows, first, last, workloads[0], workloads[1], workloads[2], sums,
                               deferred);
    else
        result = Py_BuildValue("(LOO(LLL)OO)", rows, Py_None, Py_None, workloads[0], workloads[1], workloads[2],
                               sums, deferred);
done:
    for (int i = 0; i < st.nnames; i++) Py_CLEAR(st.names[st.used[i]].big);
    if (own) {
        PyMem_Free(st.names);
        PyMem_Free(st.pairs);
        PyMem_Free(st.tgids);
        PyMem_Free(r);
    } else {
        tables_busy = 0;
    }
    Py_XDECREF(sums);
    Py_XDECREF(deferred);
    PyBuffer_Release(&buf);
    return result;
}

/* accepts(line) -> bool: whether fold would fold `line` (for the tests). */
static PyObject *accepts(PyObject *self, PyObject *args) {
    Py_buffer buf;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    row *r = PyMem_Malloc(sizeof(row));
    if (!r) {
        PyBuffer_Release(&buf);
        return PyErr_NoMemory();
    }
    const char *p = buf.buf;
    const char *stopped = NULL;
    int ok = buf.len <= MAX_LINE_BYTES && !memchr(p, '\n', (size_t)buf.len) &&
             parse_row(p, p + buf.len, r, 1, &stopped, NULL) && stopped == p + buf.len;
    PyMem_Free(r);
    PyBuffer_Release(&buf);
    return PyBool_FromLong(ok);
}

static PyMethodDef methods[] = {
    {"fold", fold, METH_VARARGS, "Fold the canonical rows of data[start:stop] into stats totals."},
    {"accepts", accepts, METH_VARARGS, "Whether fold folds this line (else it defers it)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rowscan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__rowscan(void) {
    init_tables();
    if (!kept_row) {
        kept_row = PyMem_RawMalloc(sizeof(row));
        kept_names = PyMem_RawCalloc(NAME_SLOTS, sizeof(name_slot));
        kept_pairs = PyMem_RawCalloc(PAIR_SLOTS, sizeof(pair_slot));
        kept_tgids = PyMem_RawCalloc(TGID_SLOTS, sizeof(tgid_slot));
        if (!kept_row || !kept_names || !kept_pairs || !kept_tgids) return PyErr_NoMemory();
    }
    return PyModule_Create(&module);
}
