/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_state_cmd.c -- the rate-limit family's internal commands: what
 * replication and the AOF carry instead of the clock-reading commands, each
 * naming an exact state or an exact time.
 *
 *   RL.GCRA_SET <key> <tat unix us> <emission us> <limit>
 *   RL.WINDOW_HIT <key> <window ms> <limit> <unix ms> <cost> <0>
 *   RL.WINDOW_SET <key> <window ms> <limit> <last unix ms> <nslots> [<slot> <count>]...
 *
 * Each replaces or updates the key exactly and replicates itself verbatim. Clients
 * are refused unless the module was loaded with INTERNAL-COMMANDS yes
 * (server/internal.h). */
#include <stdio.h>

#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
#include "server/internal.h"

/* RL.GCRA_SET <key> <tat unix us> <emission us> <limit>
 * Replaces <key> with this GCRA state, expiring at the TAT. */
static int GcraSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (!mc_internal_allowed_or_reply(ctx, CMD_GCRA_SET)) return REDISMODULE_OK;
    if (argc != 5) return RedisModule_WrongArity(ctx);
    uint64_t tat, t, limit;
    gcra_params p;
    if (mc_parse_u64(argv[2], 1, GCRA_MAX_TIME_US, &tat)) return mc_reply_range(ctx, "tat", 1, GCRA_MAX_TIME_US);
    if (mc_parse_u64(argv[3], 1, GCRA_MAX_PERIOD_US, &t)) return mc_reply_range(ctx, "emission interval", 1, GCRA_MAX_PERIOD_US);
    if (mc_parse_u64(argv[4], 1, MAX_BURST + 1, &limit) || gcra_params_init(&p, limit, 1, t) != 0)
        return mc_reply_range(ctx, "limit", 1, MAX_BURST + 1);
    RedisModuleKey *key;
    if (rl_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, GcraType, &key) != RL_OK)
        return rl_reply_error(ctx, RL_ERR_WRONGTYPE);
    gcra_value *v = RedisModule_Alloc(sizeof(*v));
    v->tat_us = tat;
    v->params = p;
    RedisModule_ModuleTypeSetValue(key, GcraType, v);
    RedisModule_SetAbsExpire(key, gcra_expire_at_ms(v));
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* RL.WINDOW_HIT <key> <window ms> <limit> <unix ms> <cost> <0>
 * Adds <cost> hits at <unix ms> unconditionally (what an allowed RL.WINDOW did). */
static int WindowHit_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (!mc_internal_allowed_or_reply(ctx, CMD_WINDOW_HIT_NAME)) return REDISMODULE_OK;
    if (argc != 7) return RedisModule_WrongArity(ctx);
    uint64_t window, limit, at, cost, zero;
    lbucket probe;
    if (mc_parse_u64(argv[2], 1, LB_MAX_WINDOW_MS, &window) || lb_init(&probe, window) != LB_OK)
        return mc_reply_range(ctx, "window", 1, LB_MAX_WINDOW_MS);
    if (mc_parse_u64(argv[3], 1, UINT32_MAX, &limit)) return mc_reply_range(ctx, "limit", 1, UINT32_MAX);
    if (mc_parse_u64(argv[4], 1, LB_MAX_TIME_MS, &at)) return mc_reply_range(ctx, "time", 1, LB_MAX_TIME_MS);
    if (mc_parse_u64(argv[5], 1, UINT32_MAX, &cost)) return mc_reply_range(ctx, "cost", 1, UINT32_MAX);
    if (mc_parse_u64(argv[6], 0, 0, &zero)) return RedisModule_ReplyWithError(ctx, "ERR reserved must be 0");
    RedisModuleKey *key;
    if (rl_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, WindowType, &key) != RL_OK)
        return rl_reply_error(ctx, RL_ERR_WRONGTYPE);
    uint64_t count, have_ms;
    lb_status st = window_hit(key, window, limit, 0, at, (uint32_t)cost, &count, &have_ms);
    RedisModule_CloseKey(key);
    if (st == LB_ERR_RANGE) return rl_reply_error(ctx, RL_ERR_WINDOW);
    if (st != LB_OK) return RedisModule_ReplyWithError(ctx, "ERR the window's time slot is full");
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, (long long)count);
}

/* RL.WINDOW_SET <key> <window ms> <limit> <last unix ms> <nslots> [<slot> <count>]...
 * Replaces <key> with exactly this window state (AOF rewrite, refunds). */
static int WindowSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (!mc_internal_allowed_or_reply(ctx, CMD_WINDOW_SET)) return REDISMODULE_OK;
    if (argc < 6) return RedisModule_WrongArity(ctx);
    const char *err;
    window_value *v = window_from_args(argv + 2, argc - 2, &err);
    if (v == NULL) {
        char buf[300];
        snprintf(buf, sizeof(buf), "ERR invalid window state: %s", err);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    RedisModuleKey *key;
    if (rl_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, WindowType, &key) != RL_OK) {
        window_value_free(v);
        return rl_reply_error(ctx, RL_ERR_WRONGTYPE);
    }
    uint64_t empty_at = lb_empty_at(&v->hits, v->hits.last_ms);
    RedisModule_ModuleTypeSetValue(key, WindowType, v);
    RedisModule_SetAbsExpire(key, (long long)(empty_at ? empty_at : v->hits.last_ms));
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static const mc_command commands[] = {
    {CMD_GCRA_SET, GcraSet_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {CMD_WINDOW_HIT_NAME, WindowHit_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {CMD_WINDOW_SET, WindowSet_RedisCommand, "write deny-oom", 1, 1, 1},
};

int ratelimit_state_cmd_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), ratelimit_cmdinfo);
}
