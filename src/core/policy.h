/* SPDX-License-Identifier: BSD-3-Clause */
/* policy.h -- a stored limit policy's definition (RL.POLICY_SET) and the one
 * check every way in uses: the command, the RDB aux loader, and the commands
 * that resolve `POLICY name` into explicit numbers.
 *
 * A GCRA policy holds what RL.GCRA takes as arguments (rate, period-ms, BURST
 * capacity), a WINDOW policy what RL.WINDOW takes (limit, window-ms), with the
 * same ranges, so a call with `POLICY name` is the explicit call with these
 * numbers.
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_policy.c. */
#ifndef MC_POLICY_H
#define MC_POLICY_H

#include <stdint.h>

#include "gcra.h"

#define POLICY_NAME_MAX 256           /* bytes, binary-safe; at least 1 */
#define POLICY_COUNT_MAX 65536        /* policies per node */
#define POLICY_GCRA_RATE_MAX (1ULL << 40)
#define POLICY_GCRA_BURST_MAX ((1ULL << 40) - 1)
#define POLICY_GCRA_PERIOD_MS_MAX (GCRA_MAX_PERIOD_US / 1000)
#define POLICY_WINDOW_LIMIT_MAX 4294967295ULL

typedef enum policy_kind { POLICY_GCRA = 1, POLICY_WINDOW = 2 } policy_kind;

typedef struct policy_def {
    policy_kind kind;
    uint64_t rate;      /* GCRA: units per period; WINDOW: units within the window */
    uint64_t period_ms; /* GCRA: the period; WINDOW: the window */
    uint64_t burst;     /* GCRA: BURST capacity, 0 when not given (the rate); WINDOW: 0 */
} policy_def;

typedef enum policy_status {
    POLICY_OK = 0,
    POLICY_ERR_KIND,      /* neither GCRA nor WINDOW */
    POLICY_ERR_RATE,      /* GCRA rate or WINDOW limit out of range */
    POLICY_ERR_PERIOD,    /* GCRA period-ms or WINDOW window-ms out of range */
    POLICY_ERR_BURST,     /* GCRA BURST out of range, or a WINDOW with a burst */
    POLICY_ERR_TOO_LARGE, /* GCRA: burst * period / rate overflows */
} policy_status;

/* Whether `d` is a definition RL.GCRA / RL.WINDOW would accept as explicit
 * arguments: POLICY_OK or the first field out of range. */
policy_status policy_check(const policy_def *d);

/* The GCRA parameters of a valid GCRA policy, as RL.GCRA computes them from
 * explicit arguments (capacity: the burst, else the rate). 0, or -1. */
int policy_gcra_params(const policy_def *d, gcra_params *out);

#endif
