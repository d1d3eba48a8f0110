/* SPDX-License-Identifier: BSD-3-Clause */
/* busfake.c -- a TEST-ONLY Redis module (never shipped) that sends arbitrary
 * cluster bus messages as if mcaptcha_cache sent them, for
 * tests/integration/ratelimit/test_policy_cluster.py: the policy sync of
 * src/ratelimit/policy_sync.c must drop malformed messages whole and never
 * crash.
 *
 * Redis and Valkey tag a module's bus messages with an id made of the first 9
 * characters of the module's name, so this module's name, mcaptcha_busfake,
 * shares mcaptcha_cache's id ("mcaptcha_") and can be loaded beside it.
 *
 *   BUSFAKE.SEND <type 0-255> <payload>     broadcast to every other node; OK
 *
 * SPDX-License-Identifier: BSD-3-Clause */
#include <stdlib.h>

#include "redismodule.h"

static int Send_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long type;
    if (RedisModule_StringToLongLong(argv[1], &type) != REDISMODULE_OK || type < 0 || type > 255)
        return RedisModule_ReplyWithError(ctx, "ERR type must be 0 to 255");
    size_t len;
    const char *p = RedisModule_StringPtrLen(argv[2], &len);
    if (RedisModule_SendClusterMessage(ctx, NULL, (uint8_t)type, p, (uint32_t)len) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR not sent (cluster mode?)");
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "mcaptcha_busfake", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "busfake.send", Send_RedisCommand, "readonly", 0, 0, 0) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
