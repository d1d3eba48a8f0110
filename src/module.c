/* SPDX-License-Identifier: BSD-3-Clause */
/* module.c -- the entry point: RedisModule_OnLoad registers mcaptcha_cache's
 * families (captcha, rate limits, locks) with Redis, and the one INFO callback.
 * Nothing calls back into this file.
 *
 * Layers (docs/architecture.md): core/ holds the pure algorithms, server/ what
 * every family shares about living inside Redis, and captcha/, ratelimit/ and
 * lock/ one family each.
 *
 * Configs (server/config.h): `CONFIG GET/SET mcaptcha_cache.<name>`, redis.conf
 * lines, and load arguments (`loadmodule mcaptcha_cache.so [name value]...`,
 * e.g. INTERNAL-COMMANDS yes). An unknown option or value fails the load with a
 * log line.
 *
 * Loads on Redis 7.0 and later. APIs newer than 7.0 are looked up at run time
 * (RedisModule_GetApi) and used only when present. */
#include <jansson.h>

#include "captcha/captcha_glue.h"
#include "core/alloc.h"
#include "lock/lock_glue.h"
#include "ratelimit/ratelimit_glue.h"
#include "redismodule.h"
#include "server/clock.h"
#include "server/cluster.h"
#include "server/config.h"
#include "server/internal.h"
#include "server/limitstats.h"
#include "server/replargs.h"
#include "server/waitq.h"

#define MODULE_NAME "mcaptcha_cache"
#define MODULE_VERSION_STRING "0.2.0" /* as VERSION (tests/integration/server/test_versions.py) */
#define MODULE_VERSION 200 /* MMmmpp: 0.2.0 */

static void info_callback(RedisModuleInfoCtx *ctx, int for_crash_report) {
    (void)for_crash_report;
    captcha_info(ctx);
    rl_stats_info(ctx);
    rl_policy_info(ctx); /* a field of the ratelimit section rl_stats_info opened */
    lock_info(ctx);
}

static void *calloc_hook(size_t n, size_t size) {
    return RedisModule_Calloc(n, size);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    /* First: the families start with the configs' final values (e.g. the
     * fencing margin of the start, lock_cmd_register). */
    if (mc_config_register(ctx, argv, argc) == REDISMODULE_ERR) return REDISMODULE_ERR;
    /* Corrupt RDB/RESTORE payloads must give an error, not a server panic. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    mc_clock_init();
    mc_shared_ints_init();

    /* Every allocation, jansson's included, goes through Redis. */
    mc_set_allocator(RedisModule_Alloc, calloc_hook, RedisModule_Free);
    json_set_alloc_funcs(RedisModule_Alloc, RedisModule_Free);

    mc_cluster_init(ctx);
    if (captcha_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    waitq_init(ctx);
    if (legacy_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_state_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_policy_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_RegisterInfoFunc(ctx, info_callback) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (captcha_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (module_list_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    RedisModule_Log(ctx, "notice", "mcaptcha_cache %s loaded (clock: %s; internal commands: %s)", MODULE_VERSION_STRING,
                    mc_clock_name(), mc_internal_open() ? "open to clients (internal-commands yes)" : "replication and AOF only");
    return REDISMODULE_OK;
}
