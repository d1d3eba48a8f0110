/* SPDX-License-Identifier: BSD-3-Clause */
/* limitstats.h -- allowed/refused counters of every limiter command, whichever
 * family runs it (RL.CONCURRENCY is built on the lock family), shown in INFO's
 * `ratelimit` section as <command>_allowed and <command>_refused. */
#ifndef MC_LIMITSTATS_H
#define MC_LIMITSTATS_H

#include "redismodule.h"

enum { RL_STAT_THROTTLE, RL_STAT_GCRA, RL_STAT_WINDOW, RL_STAT_MULTI, RL_STAT_CONCURRENCY, RL_STAT_COUNT };

/* Count one decision of command `which` (RL_STAT_*). */
void rl_stat(int which, int allowed);

/* Add the `ratelimit` INFO section. */
void rl_stats_info(RedisModuleInfoCtx *ctx);

#endif
