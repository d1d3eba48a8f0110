/* SPDX-License-Identifier: BSD-3-Clause */
/* internal.h -- who may call the internal commands.
 *
 * The internal commands (LOCK.STATE, RL.GCRA_SET, RL.WINDOW_HIT, RL.WINDOW_SET,
 * MCAPTCHA_CACHE.VISIT_AT, .CAPTCHA_SET, .CHALLENGE_SET) write whatever state they
 * are given: they are what replication and the AOF carry instead of the
 * clock-reading commands. By default they run only from the replication stream
 * (the primary's link, MULTI/EXEC included) and while the server loads its AOF.
 * A client's call -- directly, in MULTI/EXEC or from a script -- is refused,
 * unless the config internal-commands is on (server/config.h: the load argument
 * `INTERNAL-COMMANDS yes`, a redis.conf line or CONFIG SET; for migrations that
 * replay such commands). Every internal handler asks mc_internal_allowed_or_reply
 * first, before it reads any argument. */
#ifndef MC_INTERNAL_H
#define MC_INTERNAL_H

#include "redismodule.h"

/* Open the internal commands to clients (1) or not (0, the default). Called
 * by server/config.c with the internal-commands config. */
void mc_internal_set_open(int open);

/* Whether clients may call the internal commands (the config). */
int mc_internal_open(void);

/* 1 when the running internal command `name` may run here: it came from the
 * replication stream or the AOF, or the config opened it to clients.
 * Otherwise reply "ERR <name> is internal ..." and return 0 (the caller returns
 * REDISMODULE_OK and changes nothing). */
int mc_internal_allowed_or_reply(RedisModuleCtx *ctx, const char *name);

#endif
