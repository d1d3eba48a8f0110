/* module.c -- the entry point: RedisModule_OnLoad registers mcaptcha_cache's
 * families (captcha, rate limits, locks) with Redis, and the one INFO callback.
 * Nothing calls back into this file.
 *
 * Layers (docs/architecture.md): core/ holds the pure algorithms, server/ what
 * every family shares about living inside Redis, and captcha/, ratelimit/ and
 * lock/ one family each.
 *
 * Load options (`loadmodule mcaptcha_cache.so [OPTION value]...`):
 *   INTERNAL-COMMANDS yes|no   let clients call the internal commands (default
 *                              no: replication and AOF only; server/internal.h)
 * An unknown option or value fails the load with a log line.
 *
 * Loads on Redis 7.0 and later. APIs newer than 7.0 are looked up at run time
 * (RedisModule_GetApi) and used only when present. */
#include <jansson.h>
#include <strings.h>

#include "captcha/captcha_glue.h"
#include "core/alloc.h"
#include "lock/lock_glue.h"
#include "lock/state.h"
#include "ratelimit/ratelimit_glue.h"
#include "redismodule.h"
#include "server/clock.h"
#include "server/cluster.h"
#include "server/internal.h"
#include "server/limitstats.h"
#include "server/waitq.h"

#define MODULE_NAME "mcaptcha_cache"
#define MODULE_VERSION_STRING "0.1.0"
#define MODULE_VERSION 100 /* MMmmpp: 0.1.0 */

static void info_callback(RedisModuleInfoCtx *ctx, int for_crash_report) {
    (void)for_crash_report;
    captcha_info(ctx);
    rl_stats_info(ctx);
    lock_info(ctx);
}

static void *calloc_hook(size_t n, size_t size) {
    return RedisModule_Calloc(n, size);
}

/* "yes" -> 1, "no" -> 0 (any case), anything else -> -1. */
static int parse_yes_no(RedisModuleString *s) {
    const char *v = RedisModule_StringPtrLen(s, NULL);
    if (strcasecmp(v, "yes") == 0) return 1;
    if (strcasecmp(v, "no") == 0) return 0;
    return -1;
}

static int module_list_first; /* MODULE-LIST-FIRST */

/* Apply the load options, given as name/value pairs: INTERNAL-COMMANDS yes|no,
 * MODULE-LIST-FIRST yes|no. REDISMODULE_ERR, with a warning naming the
 * offending argument, on an unknown option, a missing value or a bad one: the
 * module then refuses to load rather than run with a setting the operator did
 * not ask for. */
static int parse_load_options(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    for (int i = 0; i < argc; i += 2) {
        const char *name = RedisModule_StringPtrLen(argv[i], NULL);
        int internal = strcasecmp(name, "INTERNAL-COMMANDS") == 0;
        if (!internal && strcasecmp(name, "MODULE-LIST-FIRST") != 0) {
            RedisModule_Log(ctx, "warning",
                            "mcaptcha_cache: unknown load option '%s' (known: INTERNAL-COMMANDS yes|no, "
                            "MODULE-LIST-FIRST yes|no)",
                            name);
            return REDISMODULE_ERR;
        }
        int v = i + 1 < argc ? parse_yes_no(argv[i + 1]) : -1;
        if (v < 0) {
            RedisModule_Log(ctx, "warning", "mcaptcha_cache: load option %s needs the value yes or no",
                            internal ? "INTERNAL-COMMANDS" : "MODULE-LIST-FIRST");
            return REDISMODULE_ERR;
        }
        if (internal) mc_internal_set_open(v);
        else module_list_first = v;
    }
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (parse_load_options(ctx, argv, argc) == REDISMODULE_ERR) return REDISMODULE_ERR;
    /* Corrupt RDB/RESTORE payloads must give an error, not a server panic. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    mc_clock_init();

    /* Every allocation, jansson's included, goes through Redis. */
    mc_set_allocator(RedisModule_Alloc, calloc_hook, RedisModule_Free);
    json_set_alloc_funcs(RedisModule_Alloc, RedisModule_Free);

    mc_cluster_init(ctx);
    if (captcha_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    waitq_init();
    if (legacy_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_state_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_RegisterInfoFunc(ctx, info_callback) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (captcha_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (module_list_register(ctx, module_list_first) == REDISMODULE_ERR) return REDISMODULE_ERR;
    RedisModule_Log(ctx, "notice", "mcaptcha_cache %s loaded (clock: %s; internal commands: %s)", MODULE_VERSION_STRING,
                    mc_clock_name(), mc_internal_open() ? "open to clients (INTERNAL-COMMANDS yes)" : "replication and AOF only");
    return REDISMODULE_OK;
}
