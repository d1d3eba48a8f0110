/* SPDX-License-Identifier: BSD-3-Clause */
/* gcra.c -- GCRA arithmetic with overflow checks; see gcra.h. */
#include "gcra.h"

int gcra_params_init(gcra_params *p, uint64_t capacity, uint64_t count, uint64_t period_us) {
    if (capacity == 0 || count == 0 || period_us == 0 || period_us > GCRA_MAX_PERIOD_US) return -1;
    uint64_t t = (period_us + count / 2) / count;
    if (t == 0) t = 1;
    uint64_t dvt;
    if (__builtin_mul_overflow(t, capacity, &dvt) || dvt > GCRA_MAX_TIME_US) return -1;
    p->emission_us = t;
    p->dvt_us = dvt;
    p->limit = capacity;
    return 0;
}

int gcra_apply(const gcra_params *p, uint64_t tat_us, uint64_t now_us, uint64_t quantity,
               gcra_result *r) {
    uint64_t increment;
    if (__builtin_mul_overflow(p->emission_us, quantity, &increment) || increment > GCRA_MAX_TIME_US)
        return -1;
    uint64_t tat = tat_us ? tat_us : now_us;
    uint64_t base = tat > now_us ? tat : now_us;
    uint64_t new_tat = base + increment;
    /* A TAT past the bound could not be persisted or replicated (the loaders
     * and RL.GCRA_SET refuse it): refuse the request instead. */
    if (new_tat > GCRA_MAX_TIME_US) return -1;
    /* allowed iff now >= new_tat - dvt, i.e. new_tat <= now + dvt */
    r->limit = p->limit;
    uint64_t ttl;
    if (new_tat > now_us + p->dvt_us) {
        r->limited = 1;
        r->retry_after_us = increment <= p->dvt_us ? (int64_t)(new_tat - now_us - p->dvt_us) : -1;
        ttl = tat > now_us ? tat - now_us : 0;
        r->tat_us = tat_us;
    } else {
        r->limited = 0;
        r->retry_after_us = -1;
        ttl = new_tat - now_us;
        r->tat_us = quantity ? new_tat : tat_us;
    }
    r->reset_after_us = ttl;
    r->remaining = p->dvt_us > ttl ? (p->dvt_us - ttl) / p->emission_us : 0;
    return 0;
}

uint64_t gcra_refund(const gcra_params *p, uint64_t tat_us, uint64_t now_us, uint64_t n) {
    if (tat_us <= now_us) return tat_us;
    uint64_t back;
    if (__builtin_mul_overflow(p->emission_us, n, &back) || back >= tat_us - now_us) return now_us;
    return tat_us - back;
}
