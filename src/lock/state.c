/* SPDX-License-Identifier: BSD-3-Clause */
/* state.c -- committing a lock key's changes; see state.h. */
#include "lock/state.h"

#include "core/decimal.h"
#include "lock/leases.h"
#include "server/args.h"
#include "server/keys.h"
#include "server/replargs.h"
#include "server/waitq.h"

lock_counters lock_stats;
histogram lock_wait_hist, lock_hold_hist;

void lock_note_wait(uint64_t blocked_us, uint64_t now_us) {
    hist_record(&lock_wait_hist, now_us > blocked_us ? (now_us - blocked_us) / 1000 : 0);
}

void lock_note_hold(uint64_t granted_ms, uint64_t end_ms) {
    if (granted_ms) hist_record(&lock_hold_hist, end_ms > granted_ms ? end_ms - granted_ms : 0);
}

uint32_t lock_drop_ended(lockv *l, uint64_t now_ms) {
    for (uint32_t i = 0; i < l->nholders; i++)
        if (l->holders[i].count > 0 && l->holders[i].expires_ms <= now_ms)
            lock_note_hold(l->holders[i].granted_ms, l->holders[i].expires_ms);
    uint32_t ended;
    uint32_t changed = lock_expire(l, now_ms, &ended);
    lock_stats.expired += ended;
    return changed;
}

int lock_open(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleKey **key) {
    if (mc_open_typed(ctx, keyname, mode, LockType, key) != 0) return -1;
    if (*key && RedisModule_KeyType(*key) != REDISMODULE_KEYTYPE_EMPTY) {
        lockv *l = RedisModule_ModuleTypeGetValue(*key);
        if (l->lease) lease_seen(ctx, keyname, l); /* a renamed value is placed here (O(1)) */
    }
    return 0;
}

int lock_open_kind(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, int ephemeral, RedisModuleKey **key) {
    if (lock_open(ctx, keyname, mode, key) != 0) return -1;
    if (*key && RedisModule_KeyType(*key) != REDISMODULE_KEYTYPE_EMPTY &&
        ((lockv *)RedisModule_ModuleTypeGetValue(*key))->ephemeral != (uint32_t)(ephemeral != 0)) {
        RedisModule_CloseKey(*key);
        *key = NULL;
        return -1;
    }
    return 0;
}

/* Replicate LOCK.STATE with the lock's exact state (lock_state_args' layout).
 * A free lock and a lock with one plain holder (exclusive, one permit, no
 * lock-delay) without a pool adjustment -- the common cases -- go straight
 * into RedisModule_Replicate's format, without building an argument array:
 * permits, the holder count and small hold counts as shared strings
 * (server/replargs.h), times and tokens as stack-formatted buffers. */
static void replicate_state(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l) {
    int free_lock = l->nholders == 0 && l->adjust == 0;
    int one_plain = l->adjust == 0 && l->nholders == 1 && l->holders[0].delay_ms == 0 && !l->holders[0].shared &&
                    l->holders[0].weight == 1;
    if (!free_lock && !one_plain) {
        size_t n;
        RedisModuleString **args = lock_state_args(l, &n);
        RedisModule_Replicate(ctx, CMD_LOCK_STATE, "sv", keyname, args, n);
        mc_free_args(args, n);
        return;
    }
    mc_iarg permits = mc_iarg_of(l->permits); /* 1..LOCK_MAX_PERMITS: shared */
    mc_dec last = mc_dec_of((long long)l->last_token);
    if (free_lock) {
        if (l->ephemeral)
            RedisModule_Replicate(ctx, CMD_LOCK_STATE, "ssbsc", keyname, permits.s, MC_DEC_ARG(last), mc_shared_int(0),
                                  "EPHEMERAL");
        else RedisModule_Replicate(ctx, CMD_LOCK_STATE, "ssbs", keyname, permits.s, MC_DEC_ARG(last), mc_shared_int(0));
    } else {
        const lock_holder *h = &l->holders[0];
        mc_dec exp = mc_dec_of((long long)h->expires_ms), token = mc_dec_of((long long)h->token);
        mc_iarg count = mc_iarg_of(h->count);
        if (l->ephemeral)
            RedisModule_Replicate(ctx, CMD_LOCK_STATE, "ssbsbbsbc", keyname, permits.s, MC_DEC_ARG(last),
                                  mc_shared_int(1), h->owner, (size_t)h->owner_len, MC_DEC_ARG(exp), count.s,
                                  MC_DEC_ARG(token), "EPHEMERAL");
        else
            RedisModule_Replicate(ctx, CMD_LOCK_STATE, "ssbsbbsb", keyname, permits.s, MC_DEC_ARG(last),
                                  mc_shared_int(1), h->owner, (size_t)h->owner_len, MC_DEC_ARG(exp), count.s,
                                  MC_DEC_ARG(token));
        mc_iarg_release(&count);
    }
    mc_iarg_release(&permits);
}

void (*lock_commit_sessions_hook)(lockv *l);

void lock_commit(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, lockv *l, uint64_t now_ms) {
    RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
    if (l->sessions) lock_commit_sessions_hook(l);
    if (l->ephemeral && l->nholders == 0) {
        RedisModule_DeleteKey(key);
        RedisModule_Replicate(ctx, "DEL", "s", keyname); /* its lease entry went with the value */
        return;
    }
    replicate_state(ctx, keyname, l);
    lease_arm(ctx, keyname, l, now_ms);
}

void lock_commit_verbatim(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, lockv *l,
                          uint64_t now_ms, int ctx_flags) {
    RedisModule_SignalModifiedKey(ctx, keyname); /* a write signals its key (module.c) */
    if (l->sessions) lock_commit_sessions_hook(l);
    if (l->ephemeral && l->nholders == 0) {
        RedisModule_DeleteKey(key);
    } else if (ctx_flags & REDISMODULE_CTX_FLAGS_SLAVE) {
        lease_track(ctx, keyname, l); /* a replica ends nothing itself (its primary replicates ends) */
    } else {
        lease_arm(ctx, keyname, l, now_ms);
    }
    RedisModule_ReplicateVerbatim(ctx);
}

int lock_replayed(int ctx_flags) {
    return (ctx_flags & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) != 0;
}

uint32_t lock_expire_leases(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t now_ms) {
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) return 0;
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    uint32_t gone = lock_drop_ended(l, now_ms);
    if (gone) {
        lock_commit(ctx, key, keyname, l, now_ms);
        waitq_kick(ctx, keyname);
    }
    return gone;
}

