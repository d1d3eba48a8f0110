/* SPDX-License-Identifier: BSD-3-Clause */
/* limitstats.c -- the limiter decision counters; see limitstats.h. */
#include "server/limitstats.h"

#include <stdio.h>

static long long stats[RL_STAT_COUNT][2]; /* [cmd][refused, allowed] */

void rl_stat(int which, int allowed) {
    stats[which][allowed ? 1 : 0]++;
}

void rl_stats_info(RedisModuleInfoCtx *ctx) {
    static const char *names[RL_STAT_COUNT] = {"cl_throttle", "rl_gcra", "rl_window", "rl_multi", "rl_concurrency"};
    RedisModule_InfoAddSection(ctx, "ratelimit");
    char field[64];
    for (int i = 0; i < RL_STAT_COUNT; i++) {
        snprintf(field, sizeof(field), "%s_allowed", names[i]);
        RedisModule_InfoAddFieldLongLong(ctx, field, stats[i][1]);
        snprintf(field, sizeof(field), "%s_refused", names[i]);
        RedisModule_InfoAddFieldLongLong(ctx, field, stats[i][0]);
    }
}
