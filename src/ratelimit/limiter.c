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
 * keeps its state; that expiry is replicated as PEXPIREAT.
 *
 * A stored WINDOW policy whose window changed (rl_request.adapt_window): the
 * key's hits still counting are carried into the new length (sw_rewidth: each
 * at the latest time it can have been taken, so none counts less than the new
 * window from when it was really taken), the request is evaluated on them, and
 * the first RL.WINDOW under the new length stores the carried state, admitted or
 * refused, replicated whole (RL.WINDOW_SET; DEL when nothing is carried). Peeks
 * answer on the carried view and write nothing. Explicit numbers of another
 * length are still refused (RL_ERR_WINDOW). */
#include <string.h>

#include "core/decimal.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
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
                      RedisModuleString *window_arg, RedisModuleString *limit_arg, uint64_t at_ms, uint64_t cost,
                      int width) {
    static mc_carg at; /* hits within one millisecond replicate the same time */
    RedisModuleString *ats = mc_carg_of(&at, (long long)at_ms);
    mc_iarg c = mc_iarg_of((long long)cost); /* most often 1: shared */
    RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
    if (window_arg && limit_arg) {
        RedisModule_Replicate(ctx, CMD_WINDOW_HIT_NAME, "ssssss", keyname, window_arg, limit_arg, ats, c.s,
                              mc_shared_int(width));
    } else { /* a policy's numbers, a waiter's, MCAPTCHA_CACHE.COUNT's: kept while they repeat */
        static mc_carg w, n;
        RedisModule_Replicate(ctx, CMD_WINDOW_HIT_NAME, "ssssss", keyname, mc_carg_of(&w, (long long)window_ms),
                              mc_carg_of(&n, (long long)limit), ats, c.s, mc_shared_int(width));
    }
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
    RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
    static mc_carg emission, limit; /* the same for every request of one configuration */
    mc_dec t = mc_dec_of((long long)tat);
    RedisModule_Replicate(ctx, CMD_GCRA_SET, "sbss", keyname, MC_DEC_ARG(t), mc_carg_of(&emission, (long long)p->emission_us),
                          mc_carg_of(&limit, (long long)p->limit));
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

/* The hits a window request sees at `now`, into *tmp when they are not the
 * stored value's own: an empty key (a new fine window), a stored window of
 * another length under a policy (carried over: sw_rewidth), or a window of the
 * old width that counts nothing (started over with the fine width, keeping its
 * clock mark). *carried is 1 for the second case (its write replicates the whole
 * state). Returns RL_OK or RL_ERR_WINDOW. */
static int window_view(window_value *v, const rl_request *r, uint64_t now, swindow *tmp, swindow **hits,
                       int *carried) {
    uint64_t fine = sw_fine_width(r->window_ms);
    *carried = 0;
    if (v == NULL) {
        sw_init(tmp, r->window_ms, fine); /* range checked by the parser */
        *hits = tmp;
    } else if (v->hits.window_ms != r->window_ms) {
        if (!r->adapt_window) return RL_ERR_WINDOW;
        if (sw_rewidth(tmp, &v->hits, r->window_ms, fine, now) != SW_OK) return RL_ERR_WINDOW;
        *carried = 1;
        *hits = tmp;
    } else if (v->hits.slot_ms != fine && sw_count(&v->hits, now) == 0) {
        sw_init(tmp, r->window_ms, fine);
        tmp->last_ms = v->hits.last_ms;
        *hits = tmp;
    } else {
        *hits = &v->hits;
    }
    return RL_OK;
}

void rl_replicate_window_state(RedisModuleCtx *ctx, RedisModuleString *keyname, const window_value *v) {
    size_t na;
    RedisModuleString **args = window_state_args(v, &na);
    RedisModule_Replicate(ctx, CMD_WINDOW_SET, "sv", keyname, args, na);
    RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
    mc_free_args(args, na);
}

static int eval_window(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us,
                       int apply, rl_result *out) {
    RedisModuleKey *key;
    int rc = rl_open(ctx, keyname, apply ? REDISMODULE_READ | REDISMODULE_WRITE : REDISMODULE_READ, WindowType, &key);
    if (rc != RL_OK) return rc;
    uint64_t now = now_us / 1000;
    window_value *v = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY ? NULL : RedisModule_ModuleTypeGetValue(key);
    swindow tmp, *hits;
    int carried;
    rc = window_view(v, r, now, &tmp, &hits, &carried);
    if (rc != RL_OK) {
        RedisModule_CloseKey(key);
        return rc;
    }
    uint64_t count = sw_count(hits, now);
    uint64_t fits = sw_fits_at(hits, now, r->limit, r->cost);
    uint64_t eff = hits->last_ms > now ? hits->last_ms : now;
    out->allowed = fits <= eff;
    int taken = 0;
    if (out->allowed && apply && r->cost > 0) {
        if (sw_add(hits, now, (uint32_t)r->cost, &count) != SW_OK) {
            /* A slot at 2^32 hits: refuse (nothing changed that counts). */
            out->allowed = 0;
            fits = UINT64_MAX;
        } else {
            taken = 1;
            if (v == NULL) {
                v = RedisModule_Calloc(1, sizeof(*v));
                RedisModule_ModuleTypeSetValue(key, WindowType, v);
            } else if (hits == &tmp) {
                sw_free(&v->hits);
            }
            if (hits == &tmp) v->hits = tmp; /* moved: tmp is no longer ours */
            hits = &v->hits;
            v->limit = r->limit;
            if (carried) rl_replicate_window_state(ctx, keyname, v);
            else rl_replicate_hit(ctx, keyname, r->window_ms, r->limit, r->window_arg, r->limit_arg, now, r->cost,
                                  WINDOW_WIDTH_FINE);
            expire_with_lag(ctx, key, keyname, (long long)sw_empty_at(hits, now), r->lag_ms);
        }
    }
    if (carried && apply && !taken) {
        /* The key moves to the new length at its first use under it, admitted or
         * not, so that hits still counting then are not dropped later under the
         * old length (a refused call writes only this conversion). */
        if (sw_slots(&tmp) == 0) {
            RedisModule_DeleteKey(key);
            RedisModule_Replicate(ctx, "DEL", "s", keyname);
            RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
            sw_free(&tmp);
            hits = NULL;
        } else {
            sw_free(&v->hits);
            v->hits = tmp;
            v->limit = r->limit;
            hits = &v->hits;
            rl_replicate_window_state(ctx, keyname, v);
            expire_with_lag(ctx, key, keyname, (long long)sw_empty_at(hits, now), r->lag_ms);
        }
        taken = -1; /* tmp is no longer ours */
    }
    swindow none;
    if (hits == NULL) {
        sw_init(&none, r->window_ms, sw_fine_width(r->window_ms));
        hits = &none;
    }
    uint64_t empty_at = sw_empty_at(hits, now);
    if (out->allowed && taken != 1 && r->cost > 0) {
        /* A peek or a dry run: answer as if the hits were taken now. */
        count += r->cost;
        uint64_t would = sw_hit_expiry(hits, eff);
        if (would > empty_at) empty_at = would;
    }
    out->remaining = count < r->limit ? r->limit - count : 0;
    out->retry_after_ms = out->allowed || fits == UINT64_MAX ? -1 : (int64_t)(fits - eff);
    out->reset_after_ms = empty_at > eff ? empty_at - eff : 0;
    if (taken == 0 && hits == &tmp) sw_free(&tmp);
    RedisModule_CloseKey(key);
    return RL_OK;
}

int rl_eval(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us, int apply,
            rl_result *out) {
    return r->kind == RL_GCRA ? eval_gcra(ctx, keyname, r, now_us, apply, out)
                              : eval_window(ctx, keyname, r, now_us, apply, out);
}
