/* fencing.c -- the process-wide token floor; see fencing.h. */
#include "lock/fencing.h"

#include "core/lock.h"

#define FENCING_MARGIN_US (10ULL * 1000 * 1000) /* after a promotion: clocks may differ this much */

static uint64_t token_floor_us; /* raised on promotion */
static uint64_t max_token_seen; /* every token issued or loaded here: new ones go above */

uint64_t fencing_floor(uint64_t now_us) {
    uint64_t f = now_us > token_floor_us ? now_us : token_floor_us;
    return f > max_token_seen ? f : max_token_seen + 1;
}

void fencing_saw(uint64_t t) {
    if (t > max_token_seen && t <= LOCK_MAX_TOKEN) max_token_seen = t;
}

void fencing_promoted(uint64_t now_us) {
    token_floor_us = now_us + FENCING_MARGIN_US;
}
