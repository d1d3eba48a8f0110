/* SPDX-License-Identifier: BSD-3-Clause */
/* fencing.c -- the process-wide token floor; see fencing.h. */
#include "lock/fencing.h"

#include "core/lock.h"
#include "server/clock.h"
#include "server/config.h"

static uint64_t token_floor_us; /* raised on promotion */
static uint64_t max_token_seen; /* tokens issued or loaded here, each capped at the clock + margin when seen */

uint64_t fencing_floor(uint64_t now_us) {
    uint64_t f = now_us > token_floor_us ? now_us : token_floor_us;
    return f > max_token_seen ? f : max_token_seen + 1;
}

void fencing_saw(uint64_t t) {
    uint64_t now = mc_now_us();
    uint64_t cap = (now > token_floor_us ? now : token_floor_us) + mc_config_fencing_margin_us();
    /* The next token in sequence is always learnt: it is what this node just
     * issued from its floor (or a key's last + 1 right at it), and forgetting it
     * would let a key deleted now repeat it. Only jumps ahead are capped. */
    if (t > cap && t != max_token_seen + 1) t = cap;
    if (t > max_token_seen && t <= LOCK_MAX_TOKEN) max_token_seen = t;
}

void fencing_promoted(uint64_t now_us) {
    token_floor_us = now_us + mc_config_fencing_margin_us();
}
