/* SPDX-License-Identifier: BSD-3-Clause */
/* gcra.h -- the Generic Cell Rate Algorithm (GCRA), as redis-cell's CL.THROTTLE
 * computes it, in integer microseconds.
 *
 * Source: ATM Forum Traffic Management Specification 4.0 (the "virtual
 * scheduling" GCRA), in the form brandur/redis-cell uses (src/cell/mod.rs):
 *   emission interval T = period / count      (one request every T)
 *   delay variation tolerance DVT = T * (max_burst + 1);  limit = max_burst + 1
 *   tat = stored theoretical arrival time, or now when there is none
 *   new_tat = max(tat, now) + T * quantity
 *   allowed iff now >= new_tat - DVT; then tat := new_tat
 * A fresh key admits max_burst + 1 requests at once, then one every T. The
 * state is one absolute time, the TAT; once now >= TAT the limiter is full
 * again, so the key can expire at TAT.
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_gcra.c. */
#ifndef MC_GCRA_H
#define MC_GCRA_H

#include <stdint.h>

#define GCRA_MAX_TIME_US (1ULL << 60)    /* absolute times and sums stay below this */
#define GCRA_MAX_PERIOD_US (1ULL << 50)  /* ~35 years */

typedef struct gcra_params {
    uint64_t emission_us; /* T: microseconds per unit, >= 1 */
    uint64_t dvt_us;      /* T * capacity: how far the TAT may run ahead of now */
    uint64_t limit;       /* capacity: units that fit at once (max_burst + 1) */
} gcra_params;

typedef struct gcra_result {
    int limited;              /* 1: refused, nothing changes */
    uint64_t limit;           /* capacity */
    uint64_t remaining;       /* units that would still fit after this call */
    int64_t retry_after_us;   /* -1 when allowed, or when the quantity can never fit */
    uint64_t reset_after_us;  /* time until the limiter is full again */
    uint64_t tat_us;          /* the TAT after this call (unchanged when limited) */
} gcra_result;

/* Parameters for `capacity` units at once, refilled at `count` units per
 * `period_us` microseconds. capacity >= 1, count >= 1, 1 <= period_us <=
 * GCRA_MAX_PERIOD_US; T is rounded to the nearest microsecond, at least 1.
 * Returns 0, or -1 when an argument is zero or the products overflow. */
int gcra_params_init(gcra_params *p, uint64_t capacity, uint64_t count, uint64_t period_us);

/* Apply `quantity` units at `now_us`. `tat_us` is the stored TAT, 0 when there
 * is no state. Quantity 0 is a peek: always allowed, TAT unchanged. Returns 0,
 * or -1 when quantity * T overflows or the TAT would pass GCRA_MAX_TIME_US
 * (then *r is untouched). */
int gcra_apply(const gcra_params *p, uint64_t tat_us, uint64_t now_us, uint64_t quantity,
               gcra_result *r);

/* Give back `n` units: the TAT moves back by n * T, never below now. Returns
 * the new TAT (<= now_us means the limiter is full: the state can go). */
uint64_t gcra_refund(const gcra_params *p, uint64_t tat_us, uint64_t now_us, uint64_t n);

/* Seconds, rounded up (redis-cell's reply unit). */
static inline int64_t gcra_ceil_s(uint64_t us) {
    return (int64_t)((us + 999999) / 1000000);
}

/* Milliseconds, rounded up. */
static inline int64_t gcra_ceil_ms(uint64_t us) {
    return (int64_t)((us + 999) / 1000);
}

#endif
