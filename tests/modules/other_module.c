/* SPDX-License-Identifier: BSD-3-Clause */
/* other_module.c -- a TEST-ONLY module (never shipped): another module loaded
 * beside mcaptcha_cache, so that MODULE LIST holds two entries in an order the
 * server picks (tests/integration/captcha/test_module_list.py). It registers one
 * command, OTHERMOD.PING, that replies PONG. */
#include "redismodule.h"

static int Ping_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    return RedisModule_ReplyWithSimpleString(ctx, "PONG");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "othermod", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "othermod.ping", Ping_RedisCommand, "readonly fast", 0, 0, 0);
}
