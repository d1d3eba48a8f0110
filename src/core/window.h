/* SPDX-License-Identifier: BSD-3-Clause */
/* window.h -- the rate limiters' sliding window: an exact, sparse leaky-bucket
 * counter whose slots are at most one second wide.
 *
 * Why not core/bucket.h. The captchas' counter cuts time into 256 slots per
 * window in a dense ring, so a hit of a one-hour window counts ~14 s too long.
 * TrafficJam's RollingLimit (and users of RL.WINDOW) expect a hit to be gone at
 * most one second after its period. Slots of one second over a long window are
 * too many for a dense ring, so this counter keeps only the slots that hold
 * hits, oldest first, in a growable array used as a queue (entries leave at the
 * front, arrive at the back; 8 bytes each).
 *
 * Algorithm. Slot width w (sw_fine_width): max(1, window/256), capped at
 * 1,000 ms, except that a window longer than SW_MAX_SPAN seconds (about 36 h)
 * gets w = ceil(window / SW_MAX_SPAN) so that at most SW_MAX_SPAN + 2 slots are
 * ever live. Slot s covers [s*w, (s+1)*w); a hit in it stops counting at
 * E(s) = (s+1)*w + window: it counts at least `window` ms and at most window + w
 * (so at most one second longer for windows up to SW_MAX_SPAN s, a day
 * included). The width is
 * a property of each counter (sw_init takes it): counters written by earlier
 * releases keep their own (window/256) until they empty (sw_rewidth).
 *
 * Memory bound: sizeof(swindow) (72 bytes) + 8 bytes per live slot, where the
 * live slots are at most min(hits counted, window/w + 2) -- for RL.WINDOW, hits
 * counted never exceed the largest limit used -- and the array's capacity is at
 * most twice that and never more than window/w + 2 (it shrinks when a quarter
 * full). Worst case 72 + 8 x 131,074 bytes (~1 MiB) for a key hit every second
 * of a 36 h window with a limit of 131,072 or more; a 1 h window with limit 100
 * takes about 1.1 KiB at most, any 1 h window below 29 KiB.
 *
 * Clock: absolute Unix ms, `now` passed in; the counter keeps the highest time
 * seen (last_ms) and evaluates at max(now, last_ms), as core/bucket.h does.
 *
 * Pure C, unit-tested in tests/unit/test_window.c. */
#ifndef MC_WINDOW_H
#define MC_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#define SW_MIN_WINDOW_MS 1ULL
#define SW_MAX_WINDOW_MS (1ULL << 42)
#define SW_MAX_TIME_MS (1ULL << 48)
#define SW_MAX_SPAN 131072ULL     /* live slots at most SW_MAX_SPAN + 2 (1 s slots up to ~36 h) */
#define SW_FINE_MS 1000ULL        /* the widest slot of a fine window up to SW_MAX_SPAN s */

typedef enum sw_status {
    SW_OK = 0,
    SW_ERR_RANGE,
    SW_ERR_FULL,    /* the hit's slot is at UINT32_MAX */
    SW_ERR_NOMEM,
    SW_ERR_CORRUPT,
} sw_status;

typedef struct sw_entry {
    uint32_t off;   /* slot number minus the counter's base */
    uint32_t count; /* hits in the slot, >= 1 */
} sw_entry;

typedef struct swindow {
    uint64_t window_ms; /* how long each hit counts */
    uint64_t slot_ms;   /* w */
    uint64_t last_ms;   /* highest clock reading seen; 0 = never */
    uint64_t total;     /* sum of the live entries (expired ones not yet swept included) */
    uint64_t base;      /* absolute slot number of offset 0 */
    uint32_t start, len, cap; /* entries e[start .. start+len-1], ascending slots */
    sw_entry *e;        /* NULL until the first hit */
} swindow;

/* The slot width of a counter for `window_ms` as releases before encver 2 made
 * it (max(1, window/256)), and the fine width described above. */
uint64_t sw_legacy_width(uint64_t window_ms);
uint64_t sw_fine_width(uint64_t window_ms);

/* Set up an empty counter. window_ms in SW_MIN..SW_MAX_WINDOW_MS, slot_ms >= 1
 * and window/slot + 2 <= SW_MAX_SPAN + 2 (true of both widths above). SW_OK or
 * SW_ERR_RANGE. Allocates nothing. */
sw_status sw_init(swindow *b, uint64_t window_ms, uint64_t slot_ms);
void sw_free(swindow *b);

/* Hits still counting at now_ms (read-only). */
uint64_t sw_count(const swindow *b, uint64_t now_ms);

/* Add n hits at now_ms (<= SW_MAX_TIME_MS); sweeps first. On error nothing
 * changes. *count (if not NULL) gets the count after. */
sw_status sw_add(swindow *b, uint64_t now_ms, uint32_t n, uint64_t *count);

/* Take up to n hits off, newest first (a refund). Returns how many. */
uint64_t sw_remove(swindow *b, uint64_t now_ms, uint64_t n);

/* When every hit counting at now_ms has left, or 0 when empty. */
uint64_t sw_empty_at(const swindow *b, uint64_t now_ms);

/* Earliest time (>= effective now) at which count + cost <= limit; UINT64_MAX
 * when cost > limit. */
uint64_t sw_fits_at(const swindow *b, uint64_t now_ms, uint64_t limit, uint64_t cost);

/* The time at which a hit taken at now_ms would stop counting. */
uint64_t sw_hit_expiry(const swindow *b, uint64_t now_ms);

size_t sw_mem_usage(const swindow *b);
sw_status sw_copy(swindow *dst, const swindow *src);

/* The live slots (expired-but-unswept included), oldest first. */
void sw_foreach_slot(const swindow *b, void (*cb)(uint64_t slot, uint32_t count, void *priv), void *priv);
size_t sw_slots(const swindow *b);

/* Restore (as lb_restore_*): sw_init, sw_restore_begin(last_ms), slots in
 * ascending order, sw_restore_end. SW_ERR_CORRUPT when a slot is zero, out of
 * order, newer than last_ms, or the span is wider than the window. On error
 * call sw_free. */
sw_status sw_restore_begin(swindow *b, uint64_t last_ms);
sw_status sw_restore_slot(swindow *b, uint64_t slot, uint32_t count);
sw_status sw_restore_end(swindow *b);

/* Rebuild `src` into `dst` (uninitialized) for another window and/or slot
 * width, carrying the hits still counting at now_ms: each slot's hits are
 * placed at the latest time they can have been taken (the end of their old slot,
 * never after last_ms), so each counts at least `new_window` ms from when it was
 * really taken and at most one new slot longer; those already gone under the new
 * window at now_ms are dropped. SW_OK, SW_ERR_RANGE or SW_ERR_NOMEM (dst freed). */
sw_status sw_rewidth(swindow *dst, const swindow *src, uint64_t new_window, uint64_t new_slot, uint64_t now_ms);

#endif
