/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_cmd.c -- rate limits checked atomically on the server.
 *
 *   CL.THROTTLE  redis-cell compatible GCRA (seconds, 5-integer reply)
 *   RL.GCRA / RL.GCRA_PEEK        GCRA token bucket with a weighted cost (ms)
 *   RL.WINDOW / RL.WINDOW_PEEK    exact sliding window on the leaky-bucket counter (ms)
 *   RL.REFUND    give units back, never below empty (AT: those taken at that time)
 * RL.GCRA*, RL.WINDOW* take POLICY <name> in place of the limit's numbers: the
 * stored policy (policy.c) resolved into the same request, before anything runs.
 *   RL.MULTI     several limits, all or none, in one command
 * (MCAPTCHA_CACHE.COUNT, a counter on the window type, is in count_cmd.c; RL.FIXED,
 * a fixed-window counter on a string key, in fixed_cmd.c.)
 *
 * WAIT blocks on the FIFO queues of server/waitq.c, and while clients wait on a
 * key no later call (RL.GCRA, RL.WINDOW, CL.THROTTLE, RL.MULTI) is served before
 * them: it queues (WAIT) or is refused with a retry estimate. limiter.c evaluates each
 * request, ratelimit_state_cmd.c has the internal commands. Every reply of the native family is [allowed, remaining, retry_after_ms,
 * reset_after_ms]. A refused request writes nothing and replicates nothing; an
 * allowed one replicates its resulting state with absolute times (never the
 * clock-reading command), so replicas and AOF replays agree. Keys expire by
 * themselves when the limiter is full again. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/keyslot.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/errors.h"
#include "server/limitstats.h"
#include "server/waitq.h"

#define MAX_MULTI_LIMITS 16

/* Options shared by RL.GCRA and RL.WINDOW: [BURST n] [COST n] [WAIT ms] [AT unix-ms]. */
typedef struct rl_options {
    uint64_t burst;     /* 0 = not given */
    uint64_t cost;
    long long wait_ms;  /* -1 = not given */
    uint64_t at_ms;     /* 0 = use the clock */
} rl_options;

/* The options each command takes, as its syntax line names them. */
typedef struct rl_syntax {
    const char *cmd;
    int allow_burst, allow_wait, allow_at; /* BURST; WAIT; AT */
    const char *valid;
} rl_syntax;

static const rl_syntax SYN_GCRA = {"RL.GCRA", 1, 1, 1, "BURST capacity, COST n, WAIT timeout-ms, AT unix-ms"};
static const rl_syntax SYN_GCRA_PEEK = {"RL.GCRA_PEEK", 1, 0, 1, "BURST capacity, COST n, AT unix-ms"};
static const rl_syntax SYN_WINDOW = {"RL.WINDOW", 0, 1, 1, "COST n, WAIT timeout-ms, AT unix-ms"};
static const rl_syntax SYN_WINDOW_PEEK = {"RL.WINDOW_PEEK", 0, 0, 1, "COST n, AT unix-ms"};
/* With POLICY <name> the policy gives BURST: the other options stay. */
static const rl_syntax SYN_GCRA_POLICY = {"RL.GCRA", 0, 1, 1, "COST n, WAIT timeout-ms, AT unix-ms (BURST is the policy's)"};
static const rl_syntax SYN_GCRA_PEEK_POLICY = {"RL.GCRA_PEEK", 0, 0, 1, "COST n, AT unix-ms (BURST is the policy's)"};

/* Parse the options from argv[first]; on an error reply (naming an unknown
 * option, a missing value or the range) and return -1. */
static int parse_options_or_reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int first,
                                  const rl_syntax *syn, rl_options *o) {
    o->burst = 0;
    o->cost = 1;
    o->wait_ms = -1;
    o->at_ms = 0;
    for (int i = first; i < argc; i += 2) {
        enum { OPT_BURST, OPT_COST, OPT_WAIT, OPT_AT } opt;
        static const char *const names[] = {"BURST", "COST", "WAIT", "AT"};
        static const char *const values[] = {"capacity", "n", "timeout-ms", "unix-ms"};
        size_t len;
        const char *p = RedisModule_StringPtrLen(argv[i], &len);
        if (syn->allow_burst && mc_word_eq(p, len, "BURST")) opt = OPT_BURST;
        else if (mc_word_eq(p, len, "COST")) opt = OPT_COST;
        else if (syn->allow_wait && mc_word_eq(p, len, "WAIT")) opt = OPT_WAIT;
        else if (syn->allow_at && mc_word_eq(p, len, "AT")) opt = OPT_AT;
        else return mc_reply_unknown_option(ctx, syn->cmd, argv[i], syn->valid), -1;
        if (i + 1 >= argc) return mc_reply_needs_value(ctx, names[opt], values[opt]), -1;
        uint64_t v;
        switch (opt) {
        case OPT_BURST:
            if (mc_parse_u64(argv[i + 1], 1, MAX_BURST, &v)) return mc_reply_range(ctx, "BURST", 1, MAX_BURST), -1;
            o->burst = v;
            break;
        case OPT_COST:
            if (mc_parse_u64(argv[i + 1], 0, MAX_COST, &v)) return mc_reply_range(ctx, "COST", 0, MAX_COST), -1;
            o->cost = v;
            break;
        case OPT_WAIT:
            if (mc_parse_u64(argv[i + 1], 0, 1ULL << 40, &v)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40), -1;
            o->wait_ms = (long long)v;
            break;
        case OPT_AT:
            if (mc_parse_u64(argv[i + 1], 1, LB_MAX_TIME_MS, &v)) return mc_reply_range(ctx, "AT", 1, LB_MAX_TIME_MS), -1;
            o->at_ms = v;
            break;
        }
    }
    return 0;
}

/* ==== CL.THROTTLE ==== */

/* redis-cell (brandur/redis-cell) keeps a limiter as a plain string key, the
 * user's key itself, holding its TAT as a decimal integer of nanoseconds since
 * the Unix epoch (what its store writes with SET/SETEX). When the open string
 * key is exactly that -- 1 to 19 digits, no sign, no leading zero, a positive
 * value whose microseconds (rounded up) fit GCRA_MAX_TIME_US -- set *tat_us and
 * return 0; else -1 (the caller answers WRONGTYPE). Read with GET (the
 * module API names this uses exist on Valkey too). */
static int redis_cell_tat(RedisModuleCtx *ctx, RedisModuleString *keyname, uint64_t *tat_us) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    int is_string = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_STRING;
    RedisModule_CloseKey(key);
    if (!is_string) return -1;
    RedisModuleCallReply *rep = RedisModule_Call(ctx, "GET", "s", keyname);
    if (rep == NULL) return -1;
    size_t len;
    const char *p = RedisModule_CallReplyStringPtr(rep, &len);
    int ok = p != NULL && len >= 1 && len <= 19 && p[0] != '0';
    uint64_t ns = 0;
    for (size_t i = 0; ok && i < len; i++) {
        if (p[i] < '0' || p[i] > '9') ok = 0;
        else ns = ns * 10 + (uint64_t)(p[i] - '0');
    }
    RedisModule_FreeCallReply(rep);
    if (!ok || ns > (uint64_t)INT64_MAX) return -1; /* redis-cell's i64 */
    uint64_t us = ns / 1000 + (ns % 1000 != 0);
    if (us == 0 || us > GCRA_MAX_TIME_US) return -1;
    *tat_us = us;
    return 0;
}

/* CL.THROTTLE <key> <max_burst> <count per period> <period s> [<quantity>]
 * Reply: [limited 0|1, limit, remaining, retry_after_s (-1 if allowed), reset_after_s],
 * seconds rounded up. Quantity 0 peeks without writing. A key redis-cell left
 * (a string holding its TAT, redis_cell_tat) is adopted on first use: the call
 * runs on that TAT and the key becomes our GCRA state (replicated as
 * RL.GCRA_SET; DEL when its TAT has passed), even when refused or a peek; any
 * other string is WRONGTYPE. */
static int ClThrottle_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5 && argc != 6) return RedisModule_WrongArity(ctx);
    uint64_t burst, count, period, quantity = 1;
    if (mc_parse_u64(argv[2], 0, MAX_BURST, &burst)) return mc_reply_range(ctx, "max_burst", 0, MAX_BURST);
    if (mc_parse_u64(argv[3], 1, 1ULL << 40, &count)) return mc_reply_range(ctx, "count per period", 1, 1ULL << 40);
    if (mc_parse_u64(argv[4], 1, GCRA_MAX_PERIOD_US / 1000000, &period))
        return mc_reply_range(ctx, "period (seconds)", 1, GCRA_MAX_PERIOD_US / 1000000);
    if (argc == 6 && mc_parse_u64(argv[5], 0, MAX_COST, &quantity)) return mc_reply_range(ctx, "quantity", 0, MAX_COST);
    rl_request r = {.kind = RL_GCRA, .cost = quantity};
    if (gcra_params_init(&r.gcra, burst + 1, count, period * 1000000) != 0)
        return RedisModule_ReplyWithError(ctx, "ERR max_burst * period / count is too large");
    uint64_t now_us = mc_now_us();
    RedisModuleKey *key;
    uint64_t tat = 0;
    int adopted = 0; /* a redis-cell key: a string holding its TAT */
    int rc = rl_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, GcraType, &key);
    if (rc == RL_ERR_WRONGTYPE) {
        if (redis_cell_tat(ctx, argv[1], &tat) != 0) return rl_reply_error(ctx, rc);
        key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
        /* The string goes first, on replicas too (RL.GCRA_SET refuses a key of another type). */
        RedisModule_DeleteKey(key);
        RedisModule_Replicate(ctx, "DEL", "s", argv[1]);
        RedisModule_SignalModifiedKey(ctx, argv[1]); /* a write signals its key (module.c) */
        adopted = 1;
    } else if (rc != RL_OK) {
        return rl_reply_error(ctx, rc);
    } else if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        tat = ((gcra_value *)RedisModule_ModuleTypeGetValue(key))->tat_us;
    }
    gcra_result g;
    if (gcra_apply(&r.gcra, tat, now_us, quantity, &g) != 0) {
        RedisModule_CloseKey(key);
        return rl_reply_error(ctx, RL_ERR_OVERFLOW);
    }
    if (quantity > 0 && waitq_busy(ctx, argv[1]) && !(g.limited && g.retry_after_us < 0)) {
        /* One rule (waitq.h): not before the clients waiting on the key. */
        int64_t retry = g.limited ? g.retry_after_us : 0;
        int64_t queue_us = (int64_t)waitq_next_try_ms(ctx, argv[1], now_us / 1000) * 1000;
        if (queue_us > retry) retry = queue_us;
        g.retry_after_us = retry > 0 ? retry : 1;
        g.limited = 1;
    }
    if (!g.limited && quantity > 0) {
        rl_store_gcra(ctx, key, argv[1], g.tat_us, &r.gcra, 0);
    } else if (adopted && tat > now_us) {
        rl_store_gcra(ctx, key, argv[1], tat, &r.gcra, 0); /* the same TAT, now our type */
    } /* else adopted with a TAT passed: the limiter is full, as with no key (deleted above) */
    RedisModule_CloseKey(key);
    rl_stat(RL_STAT_THROTTLE, !g.limited);
    RedisModule_ReplyWithArray(ctx, 5);
    RedisModule_ReplyWithLongLong(ctx, g.limited);
    RedisModule_ReplyWithLongLong(ctx, (long long)g.limit);
    RedisModule_ReplyWithLongLong(ctx, (long long)g.remaining);
    RedisModule_ReplyWithLongLong(ctx, g.retry_after_us < 0 ? -1 : gcra_ceil_s((uint64_t)g.retry_after_us));
    return RedisModule_ReplyWithLongLong(ctx, gcra_ceil_s(g.reset_after_us));
}

/* ==== Waiting for capacity (the WAIT option), on waitq.c ==== */

typedef struct wait_reply {
    int error;        /* RL_OK or an RL_ERR_* code */
    int stat;         /* RL_STAT_* of the command */
    rl_result result;
} wait_reply;

static int stat_of(const rl_request *r) {
    return r->kind == RL_GCRA ? RL_STAT_GCRA : RL_STAT_WINDOW;
}

static int wait_try_serve(RedisModuleCtx *ctx, RedisModuleString *key, void *req, uint64_t now_us, void **reply,
                          uint64_t *retry_ms) {
    rl_request *r = req;
    wait_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    rep->stat = stat_of(r);
    rep->error = rl_eval(ctx, key, r, now_us, 1, &rep->result);
    if (rep->error == RL_OK && !rep->result.allowed && rep->result.retry_after_ms >= 0) {
        *retry_ms = rep->result.retry_after_ms > 0 ? (uint64_t)rep->result.retry_after_ms : 1;
        RedisModule_Free(rep);
        return 0;
    }
    *reply = rep;
    return 1;
}

static int wait_reply_fn(RedisModuleCtx *ctx, void *reply) {
    wait_reply *rep = reply;
    if (rep->error != RL_OK) return rl_reply_error(ctx, rep->error);
    rl_stat(rep->stat, rep->result.allowed);
    return rl_reply_result(ctx, &rep->result);
}

/* Refuse `res` (evaluated as if nobody waited) because of the clients queued
 * ahead: retry when it could fit, and not before the queue is next tried (at
 * least 1 ms: waiters take what frees first). One that can never fit keeps -1. */
static void refuse_behind_queue(rl_result *res, uint64_t queue_next_ms) {
    int never = !res->allowed && res->retry_after_ms < 0;
    res->allowed = 0;
    if (never) return;
    int64_t retry = res->retry_after_ms > 0 ? res->retry_after_ms : 1;
    if ((int64_t)queue_next_ms > retry) retry = (int64_t)queue_next_ms;
    res->retry_after_ms = retry;
}

/* A waiter's wait ended unserved at now_us: refused, whatever a newcomer would
 * get now, with when it could fit (read only). */
static void *wait_timed_out(RedisModuleCtx *ctx, RedisModuleString *key, void *req, uint64_t now_us) {
    rl_request *r = req;
    wait_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    rep->stat = stat_of(r);
    rep->error = rl_eval(ctx, key, r, now_us, 0, &rep->result);
    if (rep->error == RL_OK) refuse_behind_queue(&rep->result, waitq_next_try_ms(ctx, key, now_us / 1000));
    return rep;
}

static void free_plain(void *p) {
    RedisModule_Free(p);
}

static const waitq_ops rl_wait_ops = {wait_try_serve, wait_reply_fn, wait_timed_out, free_plain, free_plain};

/* Block the caller on `key` with a copy of `r`, until now_ms + wait_ms at most. */
static void wait_for_capacity(RedisModuleCtx *ctx, RedisModuleString *key, const rl_request *r, uint64_t now_ms,
                              uint64_t wait_ms, uint64_t retry_ms) {
    rl_request *copy = RedisModule_Alloc(sizeof(*copy));
    *copy = *r;
    copy->limit_arg = copy->window_arg = NULL; /* the command's argv does not outlive it */
    waitq_block(ctx, &rl_wait_ops, key, copy, now_ms, wait_ms, retry_ms);
}

/* ==== Native commands ==== */

/* Run one request from a command: answer at once, or block with WAIT. While
 * clients wait on the key nobody is served before them (waitq.h): a waiting
 * caller queues at the tail, another is refused. */
static int run_request(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, const rl_options *o,
                       int stat) {
    uint64_t clock_us = mc_now_us(); /* waits run on the clock, whatever AT says */
    uint64_t now_us = o->at_ms ? o->at_ms * 1000 : clock_us;
    rl_request at_r = *r; /* an AT in the past keeps the key that much longer (rl_request.lag_ms) */
    at_r.lag_ms = o->at_ms && o->at_ms < clock_us / 1000 ? clock_us / 1000 - o->at_ms : 0;
    int may_wait = o->wait_ms > 0 && waitq_can_block(ctx);
    if (waitq_busy(ctx, keyname)) {
        rl_result probe;
        int rc = rl_eval(ctx, keyname, r, now_us, 0, &probe);
        if (rc != RL_OK) return rl_reply_error(ctx, rc);
        int never = !probe.allowed && probe.retry_after_ms < 0;
        if (may_wait && !never) {
            wait_for_capacity(ctx, keyname, r, clock_us / 1000, (uint64_t)o->wait_ms, 0);
            return REDISMODULE_OK;
        }
        refuse_behind_queue(&probe, waitq_next_try_ms(ctx, keyname, clock_us / 1000));
        rl_stat(stat, 0);
        return rl_reply_result(ctx, &probe);
    }
    rl_result res;
    int rc = rl_eval(ctx, keyname, &at_r, now_us, 1, &res);
    if (rc != RL_OK) return rl_reply_error(ctx, rc);
    if (!res.allowed && may_wait && res.retry_after_ms >= 0) {
        wait_for_capacity(ctx, keyname, r, clock_us / 1000, (uint64_t)o->wait_ms,
                          res.retry_after_ms > 0 ? (uint64_t)res.retry_after_ms : 1);
        return REDISMODULE_OK;
    }
    rl_stat(stat, res.allowed);
    return rl_reply_result(ctx, &res);
}

/* Answer what the write would, at AT when given (else the clock), writing nothing. */
static int peek_request(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, const rl_options *o) {
    rl_result res;
    int rc = rl_eval(ctx, keyname, r, o->at_ms ? o->at_ms * 1000 : mc_now_us(), 0, &res);
    return rc == RL_OK ? rl_reply_result(ctx, &res) : rl_reply_error(ctx, rc);
}

/* The limit arguments argv[2..3]: <rate> <period ms>, or POLICY <name> (a GCRA
 * policy, policy.c: its numbers, BURST included, as if given here). */
static int parse_gcra_or_reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int peek, rl_request *r,
                               rl_options *o) {
    uint64_t rate, period;
    const rl_syntax *syn = peek ? &SYN_GCRA_PEEK : &SYN_GCRA;
    if (mc_is_word(argv[2], "POLICY")) {
        policy_def d;
        if (rl_policy_resolve_or_reply(ctx, argv[3], POLICY_GCRA, syn->cmd, &d) != 0) return -1;
        if (parse_options_or_reply(ctx, argv, argc, 4, peek ? &SYN_GCRA_PEEK_POLICY : &SYN_GCRA_POLICY, o) != 0)
            return -1;
        rate = d.rate;
        period = d.period_ms;
        o->burst = d.burst;
    } else {
        if (mc_parse_u64(argv[2], 1, 1ULL << 40, &rate)) return mc_reply_range(ctx, "rate", 1, 1ULL << 40), -1;
        if (mc_parse_u64(argv[3], 1, GCRA_MAX_PERIOD_US / 1000, &period))
            return mc_reply_range(ctx, "period (milliseconds)", 1, GCRA_MAX_PERIOD_US / 1000), -1;
        if (parse_options_or_reply(ctx, argv, argc, 4, syn, o) != 0) return -1;
    }
    r->kind = RL_GCRA;
    r->cost = o->cost;
    if (gcra_params_init(&r->gcra, o->burst ? o->burst : rate, rate, period * 1000) != 0)
        return RedisModule_ReplyWithError(ctx, "ERR burst * period / rate is too large"), -1;
    return 0;
}

/* RL.GCRA <key> <rate> <period ms> [BURST <capacity>] [COST <n>] [WAIT <timeout ms>] [AT <unix ms>]
 * RL.GCRA <key> POLICY <name> [COST <n>] [WAIT <timeout ms>] [AT <unix ms>]
 * GCRA token bucket: <rate> units per <period ms>, at most <capacity> (default
 * <rate>) at once, or a GCRA policy's numbers. Reply: [allowed, remaining, retry_after_ms, reset_after_ms]. */
static int Gcra_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    rl_request r = {0};
    rl_options o;
    if (parse_gcra_or_reply(ctx, argv, argc, 0, &r, &o) != 0) return REDISMODULE_OK;
    return run_request(ctx, argv[1], &r, &o, RL_STAT_GCRA);
}

/* RL.GCRA_PEEK <key> <rate> <period ms> [BURST <capacity>] [COST <n>] [AT <unix ms>]
 * RL.GCRA_PEEK <key> POLICY <name> [COST <n>] [AT <unix ms>]
 * What RL.GCRA (with the same AT) would answer, changing nothing (runs on replicas). */
static int GcraPeek_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    rl_request r = {0};
    rl_options o;
    if (parse_gcra_or_reply(ctx, argv, argc, 1, &r, &o) != 0) return REDISMODULE_OK;
    return peek_request(ctx, argv[1], &r, &o);
}

/* The limit arguments argv[2..3]: <limit> <window ms>, or POLICY <name> (a
 * WINDOW policy, policy.c). */
static int parse_window_or_reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int peek, rl_request *r,
                                 rl_options *o) {
    uint64_t limit, window;
    const rl_syntax *syn = peek ? &SYN_WINDOW_PEEK : &SYN_WINDOW;
    if (mc_is_word(argv[2], "POLICY")) {
        policy_def d;
        if (rl_policy_resolve_or_reply(ctx, argv[3], POLICY_WINDOW, syn->cmd, &d) != 0) return -1;
        limit = d.rate;
        window = d.period_ms;
    } else {
        if (mc_parse_u64(argv[2], 1, UINT32_MAX, &limit)) return mc_reply_range(ctx, "limit", 1, UINT32_MAX), -1;
        if (mc_parse_u64(argv[3], 1, LB_MAX_WINDOW_MS, &window))
            return mc_reply_range(ctx, "window (milliseconds)", 1, LB_MAX_WINDOW_MS), -1;
    }
    if (parse_options_or_reply(ctx, argv, argc, 4, syn, o) != 0) return -1;
    lbucket probe;
    if (lb_init(&probe, window) != LB_OK) return RedisModule_ReplyWithError(ctx, "ERR window out of range"), -1;
    r->adapt_window = mc_is_word(argv[2], "POLICY"); /* a policy's window may have changed (rl_request) */
    r->kind = RL_WINDOW;
    r->limit = limit;
    r->window_ms = window;
    if (!r->adapt_window) { /* replicated as they came (rl_request) */
        r->limit_arg = argv[2];
        r->window_arg = argv[3];
    }
    r->cost = o->cost;
    return 0;
}

/* RL.WINDOW <key> <limit> <window ms> [COST <n>] [WAIT <timeout ms>] [AT <unix ms>]
 * RL.WINDOW <key> POLICY <name> [COST <n>] [WAIT <timeout ms>] [AT <unix ms>]
 * Sliding window: at most <limit> units within any <window ms>; each counts for
 * the window, at most one slot (min(window/256, 1 s)) longer. Reply: [allowed, remaining,
 * retry_after_ms, reset_after_ms]. */
static int Window_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    rl_request r = {0};
    rl_options o;
    if (parse_window_or_reply(ctx, argv, argc, 0, &r, &o) != 0) return REDISMODULE_OK;
    return run_request(ctx, argv[1], &r, &o, RL_STAT_WINDOW);
}

/* RL.WINDOW_PEEK <key> <limit> <window ms> [COST <n>] [AT <unix ms>]
 * RL.WINDOW_PEEK <key> POLICY <name> [COST <n>] [AT <unix ms>]
 * What RL.WINDOW (with the same AT) would answer, changing nothing (runs on replicas). */
static int WindowPeek_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    rl_request r = {0};
    rl_options o;
    if (parse_window_or_reply(ctx, argv, argc, 1, &r, &o) != 0) return REDISMODULE_OK;
    return peek_request(ctx, argv[1], &r, &o);
}

/* RL.REFUND <key> <n> [AT <unix ms>]
 * Gives back up to <n> units (the newest first), never below empty. Reply: the
 * number given back. Wakes clients waiting on the key. With AT, the units are
 * those taken at that time: what would have come back by itself since is not
 * given again -- GCRA gives back n emission intervals less the time from AT to
 * the clock (nothing once that reaches zero); a window gives back nothing when
 * AT is a whole window (and slot) behind the clock, since hits taken then have
 * left, and otherwise as without AT. The resulting state is what replicates. */
static int Refund_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    uint64_t n, at_ms = 0;
    if (mc_parse_u64(argv[2], 1, MAX_COST, &n)) return mc_reply_range(ctx, "n", 1, MAX_COST);
    for (int i = 3; i < argc; i += 2) {
        if (!mc_is_word(argv[i], "AT")) return mc_reply_unknown_option(ctx, "RL.REFUND", argv[i], "AT unix-ms");
        if (i + 1 >= argc) return mc_reply_needs_value(ctx, "AT", "unix-ms");
        if (mc_parse_u64(argv[i + 1], 1, LB_MAX_TIME_MS, &at_ms)) return mc_reply_range(ctx, "AT", 1, LB_MAX_TIME_MS);
    }
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int kt = RedisModule_KeyType(key);
    RedisModuleType *t = kt == REDISMODULE_KEYTYPE_MODULE ? RedisModule_ModuleTypeGetType(key) : NULL;
    if (kt == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithLongLong(ctx, 0);
    }
    if (t != GcraType && t != WindowType) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    uint64_t now_us = mc_now_us(), given = 0;
    int now_empty = 0, changed = 0;
    if (t == GcraType) {
        gcra_value *v = RedisModule_ModuleTypeGetValue(key);
        uint64_t before = v->tat_us > now_us ? v->tat_us : now_us;
        uint64_t after = gcra_refund_at(&v->params, v->tat_us, now_us, n, at_ms * 1000);
        given = (before - (after > now_us ? after : now_us) + v->params.emission_us - 1) / v->params.emission_us;
        if (given > n) given = n;
        now_empty = after <= now_us;
        changed = after != v->tat_us;
        if (!now_empty && changed) rl_store_gcra(ctx, key, argv[1], after, &v->params, 0);
    } else {
        window_value *v = RedisModule_ModuleTypeGetValue(key);
        uint64_t now = now_us / 1000;
        if (at_ms && at_ms + v->hits.window_ms + v->hits.slot_ms <= now) n = 0; /* hits taken then have left */
        given = n ? sw_remove(&v->hits, now, n) : 0;
        now_empty = sw_count(&v->hits, now) == 0;
        changed = given > 0;
        if (!now_empty && changed) {
            RedisModule_SetAbsExpire(key, (long long)sw_empty_at(&v->hits, now));
            rl_replicate_window_state(ctx, argv[1], v);
        }
    }
    if (now_empty) {
        RedisModule_DeleteKey(key);
        RedisModule_Replicate(ctx, "DEL", "s", argv[1]);
        RedisModule_SignalModifiedKey(ctx, argv[1]); /* a write signals its key (module.c) */
    }
    RedisModule_CloseKey(key);
    if (given) waitq_kick(ctx, argv[1]);
    return RedisModule_ReplyWithLongLong(ctx, (long long)given);
}

/* RL.MULTI <cost>|<cost1,cost2,...> <numlimits> <key> GCRA|WINDOW <limit> <period ms> [<key> ...]...
 * Takes <cost> from every limit, or costi from limit i (a comma-separated list,
 * one cost per limit in order: the arguments keep their places, so key specs and
 * cluster routing are unchanged), or from none: GCRA is <limit> units per <period
 * ms> with capacity <limit>; WINDOW is at most <limit> within <period ms>. Keys
 * must share a hash slot, standalone too (else CROSSSLOT, nothing written).
 * Reply: [allowed, index of the first limit that refused (1-based; 0 when
 * allowed), retry_after_ms (the longest wait among the refusing limits; -1 when
 * allowed or never possible), remaining (the smallest)]. */
/* RL.MULTI's cost argument: one integer, or up to `max` integers separated by
 * commas (each 0 to UINT32_MAX, no spaces, no sign, no leading zero, no empty
 * item), into costs[].
 * Returns how many, -1 when an item is not such an integer, 0 when there are
 * more than `max` (the caller then names the count). */
static int parse_costs(RedisModuleString *arg, uint64_t *costs, int max) {
    size_t len;
    const char *s = RedisModule_StringPtrLen(arg, &len);
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ',') continue;
        if (n == max) return 0;
        if (i == start || i - start > 10 || (s[start] == '0' && i - start > 1)) return -1; /* as mc_parse_u64 */
        uint64_t v = 0;
        for (size_t j = start; j < i; j++) {
            if (s[j] < '0' || s[j] > '9') return -1;
            v = v * 10 + (uint64_t)(s[j] - '0');
        }
        if (v > UINT32_MAX) return -1;
        costs[n++] = v;
        start = i + 1;
    }
    return n;
}

static int Multi_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) {
        /* Keys sit every 4 arguments from argv[3]: key specs cannot say that to
         * Redis 7.0's cluster routing and ACL checks, so they ask us. */
        long long n;
        if (argc >= 3 && RedisModule_StringToLongLong(argv[2], &n) == REDISMODULE_OK && n >= 1 &&
            n <= MAX_MULTI_LIMITS && argc == 3 + 4 * n)
            for (long long i = 0; i < n; i++) RedisModule_KeyAtPos(ctx, (int)(3 + 4 * i));
        return REDISMODULE_OK;
    }
    if (argc < 7) return RedisModule_WrongArity(ctx);
    uint64_t n, costs[MAX_MULTI_LIMITS];
    if (mc_parse_u64(argv[2], 1, MAX_MULTI_LIMITS, &n)) return mc_reply_range(ctx, "numlimits", 1, MAX_MULTI_LIMITS);
    if ((uint64_t)argc != 3 + 4 * n) return RedisModule_WrongArity(ctx);
    int ncosts = parse_costs(argv[1], costs, (int)n);
    if (ncosts == -1) return mc_reply_range(ctx, "cost", 0, UINT32_MAX);
    if (ncosts != 1 && ncosts != (int)n)
        return RedisModule_ReplyWithError(ctx, "ERR cost must be one integer, or one per limit separated by commas "
                                               "(as many as numlimits)");
    for (int i = ncosts; i < (int)n; i++) costs[i] = costs[0];
    /* One hash slot, standalone too (where Redis checks nothing): code that
     * works here works in Cluster, and gets the error Cluster gives. */
    size_t klen;
    const char *k = RedisModule_StringPtrLen(argv[3], &klen);
    unsigned slot = keyslot_of(k, klen);
    for (uint64_t i = 1; i < n; i++) {
        k = RedisModule_StringPtrLen(argv[3 + 4 * i], &klen);
        if (keyslot_of(k, klen) != slot) return RedisModule_ReplyWithError(ctx, ERR_CROSSSLOT);
    }
    rl_request reqs[MAX_MULTI_LIMITS];
    RedisModuleString *keys[MAX_MULTI_LIMITS];
    for (uint64_t i = 0; i < n; i++) {
        RedisModuleString **a = argv + 3 + 4 * i;
        keys[i] = a[0];
        for (uint64_t j = 0; j < i; j++)
            if (RedisModule_StringCompare(keys[j], keys[i]) == 0)
                return RedisModule_ReplyWithError(ctx, "ERR the same key appears in two limits");
        uint64_t limit, period;
        if (mc_parse_u64(a[2], 1, UINT32_MAX, &limit)) return mc_reply_range(ctx, "limit", 1, UINT32_MAX);
        rl_request *r = &reqs[i];
        memset(r, 0, sizeof(*r));
        r->cost = costs[i];
        if (mc_is_word(a[1], "GCRA")) {
            if (mc_parse_u64(a[3], 1, GCRA_MAX_PERIOD_US / 1000, &period) ||
                gcra_params_init(&r->gcra, limit, limit, period * 1000) != 0)
                return mc_reply_range(ctx, "period (milliseconds)", 1, GCRA_MAX_PERIOD_US / 1000);
            r->kind = RL_GCRA;
        } else if (mc_is_word(a[1], "WINDOW")) {
            lbucket probe;
            if (mc_parse_u64(a[3], 1, LB_MAX_WINDOW_MS, &period) || lb_init(&probe, period) != LB_OK)
                return mc_reply_range(ctx, "window (milliseconds)", 1, LB_MAX_WINDOW_MS);
            r->kind = RL_WINDOW;
            r->limit = limit;
            r->window_ms = period;
        } else {
            return RedisModule_ReplyWithError(ctx, "ERR limit type must be GCRA or WINDOW");
        }
    }
    uint64_t now_us = mc_now_us();
    /* Phase 1: every limit must allow; nothing is written yet. */
    int refused = 0;
    int64_t retry = -1;
    int never = 0;
    uint64_t remaining = UINT64_MAX;
    rl_result res;
    for (uint64_t i = 0; i < n; i++) {
        int rc = rl_eval(ctx, keys[i], &reqs[i], now_us, 0, &res);
        if (rc != RL_OK) return rl_reply_error(ctx, rc);
        if (costs[i] > 0 && waitq_busy(ctx, keys[i])) /* one rule (waitq.h): not before the waiters */
            refuse_behind_queue(&res, waitq_next_try_ms(ctx, keys[i], now_us / 1000));
        if (!res.allowed) {
            if (!refused) refused = (int)i + 1;
            if (res.retry_after_ms < 0) never = 1;
            if (res.retry_after_ms > retry) retry = res.retry_after_ms;
        }
        if (res.remaining < remaining) remaining = res.remaining;
    }
    /* Phase 2: take from all (same time, same state: each is allowed again). */
    if (!refused) {
        for (uint64_t i = 0; i < n; i++) rl_eval(ctx, keys[i], &reqs[i], now_us, 1, &res);
    }
    rl_stat(RL_STAT_MULTI, !refused);
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, !refused);
    RedisModule_ReplyWithLongLong(ctx, refused);
    RedisModule_ReplyWithLongLong(ctx, refused && !never ? retry : -1);
    return RedisModule_ReplyWithLongLong(ctx, (long long)remaining);
}

/* ==== Registration ==== */

static const mc_command commands[] = {
    {"CL.THROTTLE", ClThrottle_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"RL.GCRA", Gcra_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.GCRA_PEEK", GcraPeek_RedisCommand, "readonly fast", 1, 1, 1},
    {"RL.WINDOW", Window_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.WINDOW_PEEK", WindowPeek_RedisCommand, "readonly fast", 1, 1, 1},
    {"RL.REFUND", Refund_RedisCommand, "write fast", 1, 1, 1},
    {"RL.MULTI", Multi_RedisCommand, "write deny-oom getkeys-api", 3, -1, 4},
};

int ratelimit_cmd_register(RedisModuleCtx *ctx) {
    if (mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), ratelimit_cmdinfo) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (ratelimit_count_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR; /* MCAPTCHA_CACHE.COUNT */
    return ratelimit_fixed_cmd_register(ctx);                                       /* RL.FIXED (fixed_cmd.c) */
}
