/* module.c -- the module's entry point: registers mcaptcha_cache's types and
 * commands with Redis, and owns the clock.
 *
 * Loads on Redis 7.0 and later. APIs newer than 7.0 are looked up at run time
 * (RedisModule_GetApi) and used only when present. */
#include <jansson.h>

#include "alloc.h"
#include "module.h"

RedisModuleType *CaptchaType;
RedisModuleType *ChallengeType;
int mc_cluster_enabled;

static long long (*cached_microseconds)(void); /* 7.2+, NULL on 7.0 */

uint64_t mc_now_ms(void) {
    if (cached_microseconds) return (uint64_t)cached_microseconds() / 1000;
    long long ms = RedisModule_Milliseconds();
    return ms > 0 ? (uint64_t)ms : 0;
}

static void *calloc_hook(size_t n, size_t size) {
    return RedisModule_Calloc(n, size);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    /* Corrupt RDB/RESTORE payloads must give an error, not a server panic. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    if (RedisModule_GetApi("RedisModule_CachedMicroseconds", (void **)&cached_microseconds) !=
        REDISMODULE_OK)
        cached_microseconds = NULL;

    /* Every allocation, jansson's included, goes through Redis. */
    mc_set_allocator(RedisModule_Alloc, calloc_hook, RedisModule_Free);
    json_set_alloc_funcs(RedisModule_Alloc, RedisModule_Free);

    mc_cluster_enabled = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
    if (captcha_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (legacy_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (captcha_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    RedisModule_Log(ctx, "notice", "mcaptcha_cache %s loaded (clock: %s)", MODULE_VERSION_STRING,
                    cached_microseconds ? "CachedMicroseconds" : "Milliseconds");
    return REDISMODULE_OK;
}
