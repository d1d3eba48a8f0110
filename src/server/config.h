/* SPDX-License-Identifier: BSD-3-Clause */
/* config.h -- the module's configs: `CONFIG GET/SET mcaptcha_cache.<name>`, a
 * `mcaptcha_cache.<name> <value>` line in redis.conf (or MODULE LOADEX ... CONFIG),
 * and `loadmodule mcaptcha_cache.so <name> <value> ...` arguments (the name in
 * any case: INTERNAL-COMMANDS yes works as before).
 *
 *   max-captcha-config-bytes    16384  64..16777216     ADD_CAPTCHA's JSON, bytes
 *   max-challenge-json-bytes     4096  64..1048576      ADD_CHALLENGE's JSON, bytes
 *   max-challenge-string-bytes    512  1..1048576       ADD_CHALLENGE's challenge string, bytes
 *   fencing-margin-ms           10000  0..86400000      tokens after a start or promotion begin
 *                                                       this far beyond the clock (lock/fencing.h)
 *   internal-commands              no  yes|no           clients may call the internal commands
 *                                                       (server/internal.h); protected: CONFIG SET
 *                                                       needs enable-protected-configs yes|local
 *   module-list-first              no  yes|no           MODULE LIST shows mcaptcha_cache first
 *                                                       (captcha/module_list.c)
 *   lock-follow-renames            no  yes|no           a command filter records RENAMEs, so that
 *                                                       a renamed held lock is placed without a
 *                                                       scan of the keyspace (lock/renames.h); it
 *                                                       costs every command ~100 instructions
 *
 * A loadmodule argument becomes the config's registered default; a redis.conf
 * line or MODULE LOADEX's CONFIG, applied by RedisModule_LoadConfigs, wins over
 * it. An unknown name, a missing or bad value fails the load with a log line;
 * CONFIG SET refuses a value out of range (the server's own message, naming the
 * range) and changes nothing.
 *
 * The captcha limits are handed to the pure core (captcha_set_limits); the
 * families read the rest through the getters below. */
#ifndef MC_CONFIG_H
#define MC_CONFIG_H

#include <stdint.h>

#include "redismodule.h"

#define MC_FENCING_MARGIN_MS_DEFAULT 10000 /* clocks of two nodes may differ this much */

/* Parse the load arguments, register every config and load the values of the
 * config file (RedisModule_LoadConfigs). Called first in OnLoad, so that the
 * families start with the final values. REDISMODULE_OK or REDISMODULE_ERR
 * (logged). */
int mc_config_register(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* fencing-margin-ms, in microseconds. */
uint64_t mc_config_fencing_margin_us(void);

/* module-list-first. */
int mc_config_module_list_first(void);

/* lock-follow-renames. */
int mc_config_lock_follow_renames(void);

/* The lock family's handler of a lock-follow-renames change (as below). */
void mc_config_on_lock_follow_renames(int (*apply)(int on));

/* The captcha family's handler of a module-list-first change (CONFIG SET after
 * the load): REDISMODULE_OK, or REDISMODULE_ERR to refuse the new value. */
void mc_config_on_module_list_first(int (*apply)(int on));

#endif
