/* SPDX-License-Identifier: BSD-3-Clause */
/* limiter.c -- one rate-limit request evaluated, and applied when allowed: the
 * part every command of the family (and its wait queue) shares.
 *
 * GCRA (core/gcra.h) keeps the TAT; the sliding window counts hits on the
 * leaky-bucket counter (core/bucket.h). An applied request writes the state,
 * sets the key to expire when the limiter is full again, and replicates the
 * resulting state with absolute times (RL.GCRA_SET, RL.WINDOW_HIT), never the
 * clock-reading command. A refused request writes nothing.
 *
 * AT in the past: one rule, never admitting more than the latest time the key
 * has seen would. The window evaluates at max(AT, its latest time); GCRA at AT,
 * which only finds less room (its TAT lies ahead of every admitted request).
 * The expiry, counted in the request's time, is pushed back by how far AT lags
 * the clock (rl_request.lag_ms), so a caller that keeps sending lagging times
 * keeps its state; that expiry is replicated as PEXPIREAT. */
#include <string.h>

#include "core/decimal.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/keys.h"
#include "server/replargs.h"

int rl_reply_error(RedisModuleCtx *ctx, int code) {
    switch (code) {
    case RL_ERR_WRONGTYPE: return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    case RL_ERR_WINDOW:
        return RedisModule_ReplyWithError(ctx, "ERR the key holds a window of another length; use the same window or delete the key");
    default: return RedisModule_ReplyWithError(ctx, "ERR cost too large for this rate");
    }
}

int rl_reply_result(RedisModuleCtx *ctx, const rl_result *r) {
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, r->allowed);
    RedisModule_ReplyWithLongLong(ctx, (long long)r->remaining);
    RedisModule_ReplyWithLongLong(ctx, r->retry_after_ms);
    return RedisModule_ReplyWithLongLong(ctx, (long long)r->reset_after_ms);
}

int rl_open(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type, RedisModuleKey **key) {
    return mc_open_typed(ctx, keyname, mode, type, key) == 0 ? RL_OK : RL_ERR_WRONGTYPE;
}

/* Expire the key at `at_ms` pushed back by `lag_ms`; replicate the PEXPIREAT
 * only then (otherwise the replicated state command sets the same expiry). */
static void expire_with_lag(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, long long at_ms,
                            uint64_t lag_ms) {
    RedisModule_SetAbsExpire(key, at_ms + (long long)lag_ms);
    if (lag_ms) {
        mc_dec at = mc_dec_of(at_ms + (long long)lag_ms);
        RedisModule_Replicate(ctx, "PEXPIREAT", "sb", keyname, MC_DEC_ARG(at));
    }
}

void rl_replicate_hit(RedisModuleCtx *ctx, RedisModuleString *keyname, uint64_t window_ms, uint64_t limit,
                      uint64_t at_ms, uint64_t cost) {
    mc_dec w = mc_dec_of((long long)window_ms), n = mc_dec_of((long long)limit), at = mc_dec_of((long long)at_ms);
    mc_iarg c = mc_iarg_of((long long)cost); /* most often 1: shared */
    RedisModule_Replicate(ctx, CMD_WINDOW_HIT_NAME, "sbbbss", keyname, MC_DEC_ARG(w), MC_DEC_ARG(n), MC_DEC_ARG(at), c.s,
                          mc_shared_int(0));
    mc_iarg_release(&c);
}

void rl_store_gcra(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t tat,
                   const gcra_params *p, uint64_t lag_ms) {
    gcra_value *v = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        v = RedisModule_Alloc(sizeof(*v));
        RedisModule_ModuleTypeSetValue(key, GcraType, v);
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
    }
    v->tat_us = tat;
    v->params = *p;
    mc_dec t = mc_dec_of((long long)tat), e = mc_dec_of((long long)p->emission_us), n = mc_dec_of((long long)p->limit);
    RedisModule_Replicate(ctx, CMD_GCRA_SET, "sbbb", keyname, MC_DEC_ARG(t), MC_DEC_ARG(e), MC_DEC_ARG(n));
    expire_with_lag(ctx, key, keyname, gcra_expire_at_ms(v), lag_ms);
}

static int eval_gcra(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us,
                     int apply, rl_result *out) {
    RedisModuleKey *key;
    int rc = rl_open(ctx, keyname, apply ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ, GcraType, &key);
    if (rc != RL_OK) return rc;
    uint64_t tat = 0;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) tat = ((gcra_value *)RedisModule_ModuleTypeGetValue(key))->tat_us;
    gcra_result g;
    if (gcra_apply(&r->gcra, tat, now_us, r->cost, &g) != 0) {
        RedisModule_CloseKey(key);
        return RL_ERR_OVERFLOW;
    }
    out->allowed = !g.limited;
    out->remaining = g.remaining;
    out->retry_after_ms = g.retry_after_us < 0 ? -1 : gcra_ceil_ms((uint64_t)g.retry_after_us);
    out->reset_after_ms = (uint64_t)gcra_ceil_ms(g.reset_after_us);
    if (apply && !g.limited && r->cost > 0) rl_store_gcra(ctx, key, keyname, g.tat_us, &r->gcra, r->lag_ms);
    RedisModule_CloseKey(key);
    return RL_OK;
}

static int eval_window(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us,
                       int apply, rl_result *out) {
    RedisModuleKey *key;
    int rc = rl_open(ctx, keyname, apply ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ, WindowType, &key);
    if (rc != RL_OK) return rc;
    uint64_t now = now_us / 1000;
    window_value fresh, *v = &fresh;
    int empty = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY;
    if (empty) {
        memset(&fresh, 0, sizeof(fresh));
        lb_init(&fresh.hits, r->window_ms); /* range checked by the parser */
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
        if (v->hits.window_ms != r->window_ms) {
            RedisModule_CloseKey(key);
            return RL_ERR_WINDOW;
        }
    }
    uint64_t count = lb_count(&v->hits, now);
    uint64_t fits = lb_fits_at(&v->hits, now, r->limit, r->cost);
    uint64_t eff = v->hits.last_ms > now ? v->hits.last_ms : now;
    out->allowed = fits <= eff;
    if (out->allowed && apply && r->cost > 0) {
        if (empty) {
            v = RedisModule_Calloc(1, sizeof(*v));
            lb_init(&v->hits, r->window_ms);
            RedisModule_ModuleTypeSetValue(key, WindowType, v);
        }
        v->limit = r->limit;
        if (lb_add(&v->hits, now, (uint32_t)r->cost, &count) != LB_OK) {
            /* A slot at 2^32 hits: refuse (nothing changed). */
            out->allowed = 0;
            fits = UINT64_MAX;
        } else {
            rl_replicate_hit(ctx, keyname, r->window_ms, r->limit, now, r->cost);
            expire_with_lag(ctx, key, keyname, (long long)lb_empty_at(&v->hits, now), r->lag_ms);
        }
    }
    uint64_t empty_at = lb_empty_at(&v->hits, now);
    if (out->allowed && !(apply && r->cost > 0) && r->cost > 0) {
        /* A peek or a dry run: answer as if the hits were taken now. */
        count += r->cost;
        uint64_t w = v->hits.slot_ms;
        uint64_t would = (eff / w + 1) * w + v->hits.window_ms;
        if (would > empty_at) empty_at = would;
    }
    out->remaining = count < r->limit ? r->limit - count : 0;
    out->retry_after_ms = out->allowed || fits == UINT64_MAX ? -1 : (int64_t)(fits - eff);
    out->reset_after_ms = empty_at > eff ? empty_at - eff : 0;
    if (empty) lb_free(&fresh.hits);
    RedisModule_CloseKey(key);
    return RL_OK;
}

int rl_eval(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us, int apply,
            rl_result *out) {
    return r->kind == RL_GCRA ? eval_gcra(ctx, keyname, r, now_us, apply, out)
                              : eval_window(ctx, keyname, r, now_us, apply, out);
}
