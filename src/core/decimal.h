/* SPDX-License-Identifier: BSD-3-Clause */
/* decimal.h -- integers formatted on the stack, for RedisModule_Replicate.
 *
 * Every write replicates a command whose arguments are mostly integers (times in
 * ms or us, counts, tokens). Given the 'l' format, the server turns each into an
 * sds string and then wraps it in an object: two allocations and a conversion per
 * integer, on every call. Formatted here into a small stack buffer and passed with
 * the 'b' format (pointer, length), each costs the server one allocation (an
 * embedded string) and the bytes on the wire -- to replicas and the AOF -- are the
 * same decimal text, so the replication format does not change.
 *
 * mc_dec_write does the same into a caller's buffer (keys, replies).
 *
 * Usage: mc_dec t = mc_dec_of(tat);
 *        RedisModule_Replicate(ctx, "RL.GCRA_SET", "sb", key, MC_DEC_ARG(t)); */
#ifndef MC_DECIMAL_H
#define MC_DECIMAL_H

#include <stddef.h>

/* A decimal integer: s[off..off+n) holds its digits (and a leading '-'), written
 * right-aligned, not NUL-terminated. 20 digits and a sign fit any long long. */
typedef struct {
    char s[24];
    unsigned char off, n;
} mc_dec;

/* `v` in decimal, exactly as "%lld" writes it: two digits per division, from a
 * table (the way Redis' own ll2string does it). */
static inline mc_dec mc_dec_of(long long v) {
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    mc_dec d;
    size_t i = sizeof(d.s);
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100) * 2;
        u /= 100;
        d.s[--i] = pairs[r + 1];
        d.s[--i] = pairs[r];
    }
    if (u >= 10) {
        d.s[--i] = pairs[u * 2 + 1];
        d.s[--i] = pairs[u * 2];
    } else {
        d.s[--i] = (char)('0' + u);
    }
    if (v < 0) d.s[--i] = '-';
    d.off = (unsigned char)i;
    d.n = (unsigned char)(sizeof(d.s) - i);
    return d;
}

/* `v` in decimal into out (at least 20 bytes, not NUL-terminated); returns how
 * many bytes it wrote. For building keys and replies without printf. */
static inline size_t mc_dec_write(long long v, char *out) {
    mc_dec d = mc_dec_of(v);
    for (size_t i = 0; i < d.n; i++) out[i] = d.s[d.off + i];
    return d.n;
}

/* The two arguments that the 'b' format of RedisModule_Replicate takes. */
#define MC_DEC_ARG(d) (d).s + (d).off, (size_t)(d).n

#endif
