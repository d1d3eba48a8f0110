/* SPDX-License-Identifier: BSD-3-Clause */
/* fixed_cmd.c -- RL.FIXED: the fixed-window counter (core/fixed.h) on a plain
 * string key, in one module command where `limits`' own Redis storage runs a
 * Lua script (INCRBY, then EXPIRE on the first hit, or on every hit for the
 * elastic strategy).
 *
 * The key stays a native string holding a decimal integer, its expiry the
 * window's end: GET, TTL, PTTL, DEL and the `limits` storage read it as they
 * read limits' own counters, and RDB, AOF, DUMP/RESTORE and COPY need nothing
 * from this module. A hit replicates as SET key <count> PXAT <end>: the
 * resulting value and absolute end, not the clock-reading command, so
 * replicas and AOF replays hold the same value and expiry byte for byte.
 *
 * Rules (docs/ratelimit.md "Fixed window"):
 *   - window-ms: 1 to 2^42 (the windows' longest), cost: 0 to 2^32-1;
 *   - a key of another type: WRONGTYPE; a string that is not a decimal integer
 *     (as INCRBY reads it): an error; a count that would leave the signed
 *     64-bit range: an error; each writes nothing;
 *   - COST 0 writes nothing and replies the count and the time left as they are
 *     (0 and 0 without a key; -1 for the time of a key without expiry); as a
 *     write command it runs on primaries only (GET and PTTL read on replicas);
 *   - a key still shown after its end (Redis 7.0 in a MULTI or a script, where
 *     expiry runs on the time cached at its start) is a window that is over:
 *     the hit starts a new one (fw_live);
 *   - the count is stored as a string object the module makes, while a replica
 *     (SET) or a reload stores the same decimal as an integer object: the value,
 *     DUMP and DEBUG DIGEST-VALUE agree, OBJECT ENCODING and MEMORY USAGE may not. */
#include "core/fixed.h"
#include "core/decimal.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
#include "server/clock.h"

/* RL.FIXED <key> <window-ms> [COST n] [ELASTIC]
 * Adds `n` (default 1) to the window's count, starting a window of window-ms
 * when there is none (ELASTIC: every hit starts it again). Reply: [count,
 * reset_after_ms], the count after the hit and the milliseconds until the
 * window ends. */
static int Fixed_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    uint64_t window_ms, cost = 1;
    int elastic = 0;
    if (mc_parse_u64(argv[2], 1, LB_MAX_WINDOW_MS, &window_ms))
        return mc_reply_range(ctx, "window (milliseconds)", 1, LB_MAX_WINDOW_MS);
    for (int i = 3; i < argc; i++) {
        if (mc_is_word(argv[i], "COST")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "COST", "n");
            if (mc_parse_u64(argv[++i], 0, MAX_COST, &cost)) return mc_reply_range(ctx, "COST", 0, MAX_COST);
        } else if (mc_is_word(argv[i], "ELASTIC")) {
            elastic = 1;
        } else {
            return mc_reply_unknown_option(ctx, "RL.FIXED", argv[i], "COST n, ELASTIC");
        }
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(key);
    if (type != REDISMODULE_KEYTYPE_EMPTY && type != REDISMODULE_KEYTYPE_STRING) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    int exists = type == REDISMODULE_KEYTYPE_STRING;
    int64_t count = 0, end_ms = FW_NO_END;
    if (exists) {
        size_t len;
        const char *s = RedisModule_StringDMA(key, &len, REDISMODULE_READ);
        if (fw_parse_count(s, len, &count) != FW_OK) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx, "ERR the key's value is not an integer (a fixed window holds a count)");
        }
        mstime_t at = RedisModule_GetAbsExpire(key);
        end_ms = at == REDISMODULE_NO_EXPIRE ? FW_NO_END : (int64_t)at;
    }
    uint64_t now = mc_now_us() / 1000;
    if (cost == 0) { /* a look: nothing written */
        RedisModule_CloseKey(key);
        int live = fw_live(exists, end_ms, now);
        RedisModule_ReplyWithArray(ctx, 2);
        RedisModule_ReplyWithLongLong(ctx, live ? count : 0);
        return RedisModule_ReplyWithLongLong(ctx, !live ? 0 : end_ms == FW_NO_END ? -1
                                                             : (long long)(end_ms - (int64_t)now));
    }
    int64_t next, end;
    if (fw_hit(exists, count, end_ms, cost, window_ms, now, elastic, &next, &end) != FW_OK) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, "ERR increment would overflow the window's count");
    }
    mc_dec v = mc_dec_of(next), e = mc_dec_of(end);
    RedisModuleString *value = RedisModule_CreateString(ctx, MC_DEC_ARG(v));
    RedisModule_StringSet(key, value); /* drops the expiry: set again below */
    RedisModule_SetAbsExpire(key, (mstime_t)end);
    RedisModule_CloseKey(key);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "incrby", argv[1]);
    if (end != end_ms) RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", argv[1]);
    RedisModule_SignalModifiedKey(ctx, argv[1]); /* a write signals its key (module.c) */
    RedisModule_Replicate(ctx, "SET", "sscb", argv[1], value, "PXAT", MC_DEC_ARG(e));
    RedisModule_FreeString(ctx, value);
    RedisModule_ReplyWithArray(ctx, 2);
    RedisModule_ReplyWithLongLong(ctx, next);
    return RedisModule_ReplyWithLongLong(ctx, (long long)(end - (int64_t)now));
}

static const mc_command commands[] = {
    {"RL.FIXED", Fixed_RedisCommand, "write deny-oom fast", 1, 1, 1},
};

int ratelimit_fixed_cmd_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), ratelimit_cmdinfo);
}
