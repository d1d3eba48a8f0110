/* SPDX-License-Identifier: BSD-3-Clause */
/* fixed.h -- the fixed-window counter: hits counted in a window that starts
 * with the first hit and ends window-ms later, when the count starts again
 * from zero. It is the counter behind the `limits` library's fixed-window
 * strategies (FixedWindowRateLimiter: the window's end is set by the first
 * hit; FixedWindowElasticExpiryRateLimiter: by every hit), kept in a plain
 * Redis string holding a decimal integer with the key's expiry as the
 * window's end, so GET, TTL and PTTL read it as `limits` does.
 *
 * The state is (count, end): the decimal count stored in the key and the
 * key's absolute expiry in Unix milliseconds, or none. A hit of `cost`:
 *   count' = count + cost (the count is 0 when there is no key);
 *   end'   = now + window when there was no key, when `elastic`, or when the
 *            key had no expiry (a window that never ends is never what a
 *            counter means); else end' = end.
 * Every hit counts, over the limit too: the caller compares count' with its
 * limit, as `limits` does (so a client that keeps hitting a full window keeps
 * it full; the elastic strategy's whole point).
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_fixed.c. */
#ifndef MC_FIXED_H
#define MC_FIXED_H

#include <stddef.h>
#include <stdint.h>

#define FW_NO_END (-1)
#define FW_OK 0
#define FW_ERR_NOT_INTEGER 1 /* the stored value is not a decimal integer */
#define FW_ERR_OVERFLOW 2    /* count + cost leaves the signed 64-bit range */

/* Parse a stored value as Redis's INCRBY does: an optional '-', then decimal
 * digits without leading zeros ("0" itself is fine), at most 20 bytes, inside
 * the signed 64-bit range; nothing else (no spaces, no '+'). FW_OK or
 * FW_ERR_NOT_INTEGER. */
int fw_parse_count(const char *s, size_t len, int64_t *out);

/* Whether a key that exists (exists != 0) with end end_ms (FW_NO_END: no
 * expiry) still holds a window at now_ms: its end is later than now. A server
 * can still show a key whose expiry has just passed (Redis 7.0 decides expiry
 * on the time cached when a MULTI or script began, the module reads the clock):
 * such a window is over and counts as none. */
static inline int fw_live(int exists, int64_t end_ms, uint64_t now_ms) {
    return exists && (end_ms == FW_NO_END || end_ms > (int64_t)now_ms);
}

/* One hit of `cost` at now_ms on a window of window_ms (>= 1). exists: the key
 * is there, holding `count` and ending at end_ms (FW_NO_END: no expiry); a
 * window already over (fw_live) starts again from 0. Fills *count_out and
 * *end_out (always an end later than now_ms: now_ms + window_ms, or end_ms
 * kept) and returns FW_OK, or FW_ERR_OVERFLOW having filled nothing. */
int fw_hit(int exists, int64_t count, int64_t end_ms, uint64_t cost, uint64_t window_ms, uint64_t now_ms,
           int elastic, int64_t *count_out, int64_t *end_out);

#endif
