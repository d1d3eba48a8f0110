/* SPDX-License-Identifier: BSD-3-Clause */
/* bucket.h -- an exact, bounded leaky-bucket counter ("sliding window of hits").
 *
 * Every hit adds to the count and is taken off again `window` milliseconds later.
 * mCaptcha calls the window the captcha's `duration` and a hit a visit; the rate
 * limiters use the same counter as a sliding-window log.
 *
 * Algorithm. Time is cut into slots of w = max(1, window/256) ms; slot s covers
 * [s*w, (s+1)*w). A hit at time t goes into slot floor(t/w) and stops counting at
 * E(s) = (s+1)*w + window. So a hit at t counts while now < E(s), that is:
 *   - always at least `window` ms: it still counts at now = t + window;
 *   - at most window + w ms <= window + window/256 (for window >= 256 ms;
 *     below that, w = 1 ms and the extra time is below 1 ms).
 * Slot counts live in a ring of nslots = floor(window/w) + 2 entries (at most
 * 258 for window >= 65,536 ms, 335 at the worst case window = 1,000 ms, and
 * window + 2 for windows below 256 ms), indexed by s mod nslots. Slots are swept
 * out lazily when the counter is next written, each once, so every call costs
 * O(1) amortized and O(nslots) at worst.
 *
 * Memory bound: sizeof(lbucket) (64 bytes) + 4 * nslots bytes. For windows of
 * 1 s and more (every mCaptcha duration) that is at most 64 + 4*335 = 1,404 bytes;
 * lb_init refuses windows that would need more than LB_MAX_SLOTS slots (4 KiB).
 * The ring is allocated at the first hit.
 *
 * Clock. All times are absolute Unix milliseconds and the caller reads the clock
 * once and passes `now` in. The counter keeps the highest `now` it has seen
 * (last_ms) and uses max(now, last_ms) as the time: a clock that steps backwards
 * never makes a count negative or drops a hit early, and it pauses decay only
 * until the clock is back where it was, that is, for no longer than the step.
 *
 * The file is pure C (no Redis include), unit-tested in tests/unit/test_bucket.c.
 */
#ifndef MC_BUCKET_H
#define MC_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#define LB_SLOT_DIVISOR 256            /* w = window / 256 */
#define LB_MAX_SLOTS 1000              /* ring entries at most (4,000 bytes) */
#define LB_MIN_WINDOW_MS 1ULL
#define LB_MAX_WINDOW_MS (1ULL << 42)  /* ~139 years */
#define LB_MAX_TIME_MS (1ULL << 48)    /* absolute times above this are refused */

typedef enum lb_status {
    LB_OK = 0,
    LB_ERR_RANGE,    /* an argument is out of range */
    LB_ERR_FULL,     /* the hit's slot is at UINT32_MAX: the count cannot grow */
    LB_ERR_NOMEM,    /* the ring could not be allocated */
    LB_ERR_CORRUPT,  /* restored state breaks an invariant */
} lb_status;

typedef struct lbucket {
    uint64_t window_ms; /* how long each hit counts, ms */
    uint64_t slot_ms;   /* w: width of one slot, ms */
    uint64_t last_ms;   /* highest clock reading seen (Unix ms); 0 = never */
    uint64_t total;     /* sum of all ring entries (expired ones not yet swept included) */
    uint64_t tail;      /* absolute number of the oldest slot that may be non-zero */
    uint64_t head;      /* absolute number of the newest slot written */
    uint32_t nslots;    /* ring capacity */
    uint32_t *ring;     /* slot counts, ring[s % nslots]; NULL until the first hit */
} lbucket;

/* Set up an empty counter for `window_ms` (LB_MIN_WINDOW_MS..LB_MAX_WINDOW_MS).
 * Allocates nothing. Returns LB_OK or LB_ERR_RANGE. */
lb_status lb_init(lbucket *b, uint64_t window_ms);

/* Release the ring; the counter is left empty and can be reused. */
void lb_free(lbucket *b);

/* The number of hits still counting at `now_ms` (read-only: changes nothing). */
uint64_t lb_count(const lbucket *b, uint64_t now_ms);

/* Add `n` hits at `now_ms` (<= LB_MAX_TIME_MS). Sweeps expired slots first. On
 * success stores the count after the hits in *count (if not NULL). On any error
 * nothing is changed: LB_ERR_RANGE (now_ms too large), LB_ERR_FULL (the slot
 * would pass UINT32_MAX), LB_ERR_NOMEM. */
lb_status lb_add(lbucket *b, uint64_t now_ms, uint32_t n, uint64_t *count);

/* Take up to `n` hits off, newest first, at `now_ms` (a refund: never below 0).
 * Returns how many were taken off. Sweeps first; changes last_ms like lb_add. */
uint64_t lb_remove(lbucket *b, uint64_t now_ms, uint64_t n);

/* The time (Unix ms) at which the count next drops, or 0 when it is empty at now_ms. */
uint64_t lb_next_expiry(const lbucket *b, uint64_t now_ms);

/* The time (Unix ms) at which every hit counting at now_ms has left, or 0 when empty. */
uint64_t lb_empty_at(const lbucket *b, uint64_t now_ms);

/* The earliest time (Unix ms, >= the effective now) at which lb_count() + cost
 * <= limit, i.e. when `cost` more hits fit under `limit`; UINT64_MAX when they
 * never can (cost > limit). */
uint64_t lb_fits_at(const lbucket *b, uint64_t now_ms, uint64_t limit, uint64_t cost);

/* Bytes of memory used, the struct itself included. */
size_t lb_mem_usage(const lbucket *b);

/* Deep copy into `dst` (uninitialized). Returns LB_OK or LB_ERR_NOMEM. */
lb_status lb_copy(lbucket *dst, const lbucket *src);

/* Iterate the non-zero slots, oldest first: call cb(slot_number, count, priv)
 * for each. Used to persist the counter (RDB, AOF). */
void lb_foreach_slot(const lbucket *b, void (*cb)(uint64_t slot, uint32_t count, void *priv),
                     void *priv);

/* Restore: start from lb_init(b, window), call lb_restore_begin(b, last_ms),
 * then lb_restore_slot() for each persisted slot in ascending order, then
 * lb_restore_end(). Each checks what it is given and returns LB_ERR_CORRUPT
 * (slot zero-count, out of order, newer than last_ms, or spanning more than the
 * ring holds), LB_ERR_RANGE or LB_ERR_NOMEM. On error call lb_free(). */
lb_status lb_restore_begin(lbucket *b, uint64_t last_ms);
lb_status lb_restore_slot(lbucket *b, uint64_t slot, uint32_t count);
lb_status lb_restore_end(lbucket *b);

#endif
