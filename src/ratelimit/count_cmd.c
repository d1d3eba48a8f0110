/* SPDX-License-Identifier: BSD-3-Clause */
/* count_cmd.c -- MCAPTCHA_CACHE.COUNT <counter-name> <leak-rate s>: a bare
 * leaky-bucket counter, from an earlier revision of the original mCaptcha cache
 * module's README ("Every counter has a name and a leak-rate in seconds. If
 * counter exists, then count is incremented. Otherwise, it is created.").
 *
 * The counter is a sliding-window key (mcap-wndw, ratelimit_glue.h) on the same
 * leaky-bucket core as the captchas (core/bucket.h): each increment counts for
 * leak-rate seconds (at most leak-rate/256 longer) and then leaves. So it has
 * the window's durability: RDB, AOF rewrite (RL.WINDOW_SET), DUMP/RESTORE/COPY,
 * and every increment replicates as RL.WINDOW_HIT with the absolute time it used,
 * never the clock-reading command. Unlike the captcha commands, the key is the
 * counter name itself.
 *
 * Rules (docs/captcha.md, docs/protocol.md "Where this module extends the original"):
 *   - leak-rate: an integer from 1 to COUNT_MAX_LEAK_S seconds (the window type's
 *     longest window, 2^42 ms, in whole seconds); anything else is a range error;
 *   - a counter exists with another leak-rate (a window of another length, also
 *     one made by RL.WINDOW): an error naming both, nothing written;
 *   - a key of another type: WRONGTYPE;
 *   - the key expires by itself when the last increment has left (count 0);
 *   - a new counter stores the window's limit as 4294967295 (a counter has no
 *     limit; the field is the window type's "limit last used"), an existing key
 *     keeps its own. An increment is taken unconditionally, whatever that limit. */
#include <stdio.h>

#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
#include "server/clock.h"

#define COUNT_MAX_LEAK_S (LB_MAX_WINDOW_MS / 1000) /* 4398046511 s, about 139 years */
#define COUNT_NEW_LIMIT UINT32_MAX

/* "10 s", or "1500 ms" for a window (made by RL.WINDOW) of no whole number of seconds. */
static void format_leak_rate(char *buf, size_t len, uint64_t window_ms) {
    if (window_ms % 1000 == 0) snprintf(buf, len, "%llu s", (unsigned long long)(window_ms / 1000));
    else snprintf(buf, len, "%llu ms", (unsigned long long)window_ms);
}

/* MCAPTCHA_CACHE.COUNT <counter-name> <leak-rate s>
 * Adds one to the counter (creating it); the increment leaves leak-rate seconds
 * later. Reply: the count after the increment. */
static int Count_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    uint64_t rate_s;
    if (mc_parse_u64(argv[2], 1, COUNT_MAX_LEAK_S, &rate_s))
        return mc_reply_range(ctx, "leak-rate (seconds)", 1, COUNT_MAX_LEAK_S);
    uint64_t window_ms = rate_s * 1000;
    RedisModuleKey *key;
    if (rl_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, WindowType, &key) != RL_OK)
        return rl_reply_error(ctx, RL_ERR_WRONGTYPE);
    uint64_t now = mc_now_us() / 1000, count, have_ms;
    /* A new counter stores no real limit; an existing key keeps its own. */
    lb_status st = window_hit(key, window_ms, WINDOW_WIDTH_LEGACY, COUNT_NEW_LIMIT, 1, now, 1, &count, &have_ms);
    if (st == LB_ERR_RANGE) {
        char have[48], asked[48], buf[200];
        format_leak_rate(have, sizeof(have), have_ms);
        format_leak_rate(asked, sizeof(asked), window_ms);
        RedisModule_CloseKey(key);
        snprintf(buf, sizeof(buf),
                 "ERR the counter's leak-rate is %s, not %s; use the same leak-rate or delete the key", have, asked);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    if (st != LB_OK) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, st == LB_ERR_FULL
                                                   ? "ERR counter limit reached (4294967295 increments in one time slot)"
                                                   : "ERR out of memory");
    }
    /* The same state on replicas and in the AOF: the hit at the time used here,
     * with the limit the key holds. */
    window_value *v = RedisModule_ModuleTypeGetValue(key);
    rl_replicate_hit(ctx, argv[1], window_ms, v->limit, NULL, NULL, now, 1, WINDOW_WIDTH_LEGACY);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, (long long)count);
}

static const mc_command commands[] = {
    {"MCAPTCHA_CACHE.COUNT", Count_RedisCommand, "write deny-oom fast", 1, 1, 1},
};

int ratelimit_count_cmd_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), ratelimit_cmdinfo);
}
