/* SPDX-License-Identifier: BSD-3-Clause */
/* other_module.c -- a TEST-ONLY module (never shipped): another module loaded
 * beside mcaptcha_cache, so that MODULE LIST holds two entries in an order the
 * server picks (tests/integration/captcha/test_module_list.py). It registers one
 * command, <name>.PING, that replies PONG. Built twice (tests/modules/Makefile):
 * as "othermod" and, with -DOTHERMOD_NAME='"othermodb"', as "othermodb", so that
 * three modules can be loaded at once.
 * SPDX-License-Identifier: BSD-3-Clause */
#include "redismodule.h"

#ifndef OTHERMOD_NAME
#define OTHERMOD_NAME "othermod"
#endif

static int Ping_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    return RedisModule_ReplyWithSimpleString(ctx, "PONG");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, OTHERMOD_NAME, 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, OTHERMOD_NAME ".ping", Ping_RedisCommand, "readonly fast", 0, 0, 0);
}
