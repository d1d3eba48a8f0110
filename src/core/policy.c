/* SPDX-License-Identifier: BSD-3-Clause */
/* policy.c -- checking a stored limit policy's definition (see policy.h):
 * the same ranges as RL.GCRA's and RL.WINDOW's explicit arguments, so that a
 * policy accepted by RL.POLICY_SET, or read back from an RDB, always resolves
 * into a request those commands would take. */
#include "policy.h"

#include "bucket.h"

int policy_gcra_params(const policy_def *d, gcra_params *out) {
    if (d->kind != POLICY_GCRA) return -1;
    return gcra_params_init(out, d->burst ? d->burst : d->rate, d->rate, d->period_ms * 1000);
}

policy_status policy_check(const policy_def *d) {
    if (d->kind == POLICY_GCRA) {
        if (d->rate < 1 || d->rate > POLICY_GCRA_RATE_MAX) return POLICY_ERR_RATE;
        if (d->period_ms < 1 || d->period_ms > POLICY_GCRA_PERIOD_MS_MAX) return POLICY_ERR_PERIOD;
        if (d->burst > POLICY_GCRA_BURST_MAX) return POLICY_ERR_BURST;
        gcra_params p;
        if (policy_gcra_params(d, &p) != 0) return POLICY_ERR_TOO_LARGE;
        return POLICY_OK;
    }
    if (d->kind == POLICY_WINDOW) {
        if (d->rate < 1 || d->rate > POLICY_WINDOW_LIMIT_MAX) return POLICY_ERR_RATE;
        if (d->period_ms < 1 || d->period_ms > LB_MAX_WINDOW_MS) return POLICY_ERR_PERIOD;
        if (d->burst != 0) return POLICY_ERR_BURST;
        lbucket probe;
        if (lb_init(&probe, d->period_ms) != LB_OK) return POLICY_ERR_PERIOD;
        return POLICY_OK;
    }
    return POLICY_ERR_KIND;
}
