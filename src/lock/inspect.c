/* SPDX-License-Identifier: BSD-3-Clause */
/* inspect.c -- LOCK.INSPECT: the read-only view of a lock, semaphore, read-write
 * lock or concurrency limit, short (the holders' leases) or FULL (every holder
 * with its mode, lock-delay and hold time, and every waiter in queue order with
 * its request and how long it has waited). Runs on replicas; changes nothing. */
#include "lock/inspect.h"

#include "lock/acquire.h"
#include "lock/multi.h"
#include "lock/state.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/waitq.h"

/* The mode of a holder or a request: "read" or "write" on a lock of one
 * permit, "permit" on a semaphore (a pool with an adjusted size included) or a
 * concurrency limit. */
static const char *mode_name(int shared, uint64_t permits, int32_t adjust) {
    return permits > 1 || adjust != 0 ? "permit" : shared ? "read" : "write";
}

static void reply_field_ll(RedisModuleCtx *ctx, const char *name, long long v) {
    RedisModule_ReplyWithSimpleString(ctx, name);
    RedisModule_ReplyWithLongLong(ctx, v);
}

static void reply_field_str(RedisModuleCtx *ctx, const char *name, const char *v) {
    RedisModule_ReplyWithSimpleString(ctx, name);
    RedisModule_ReplyWithSimpleString(ctx, v);
}

/* One holder of `l` (live or lock-delay) as a flat field/value array. */
static void reply_holder(RedisModuleCtx *ctx, const lockv *l, const lock_holder *h, uint64_t now_ms, uint64_t end) {
    int delayed = h->expires_ms <= now_ms || h->count == 0; /* ended into its lock-delay */
    RedisModule_ReplyWithArray(ctx, 20);
    RedisModule_ReplyWithSimpleString(ctx, "owner");
    RedisModule_ReplyWithStringBuffer(ctx, h->owner, h->owner_len);
    reply_field_str(ctx, "mode", mode_name(h->shared, l->permits, l->adjust));
    reply_field_ll(ctx, "weight", h->weight);
    reply_field_str(ctx, "state", delayed ? "lock-delay" : "held");
    reply_field_ll(ctx, "ms_left", (long long)(end - now_ms));
    reply_field_ll(ctx, "token", (long long)h->token);
    reply_field_ll(ctx, "count", delayed ? 0 : h->count);
    reply_field_ll(ctx, "held_ms", h->granted_ms && !delayed && now_ms >= h->granted_ms
                                       ? (long long)(now_ms - h->granted_ms) : -1);
    reply_field_ll(ctx, "lock_delay_ms", (long long)h->delay_ms);
    reply_field_ll(ctx, "session", h->client_id != 0);
}

typedef struct waiters_reply {
    RedisModuleCtx *ctx;
    uint64_t now_ms;
} waiters_reply;

/* One waiter (waitq_each's callback) as a flat field/value array. */
static void reply_waiter(void *arg, const waitq_waiter_info *w) {
    const waiters_reply *wr = arg;
    RedisModuleCtx *ctx = wr->ctx;
    const lock_req *req = w->req;
    RedisModule_ReplyWithArray(ctx, 16);
    RedisModule_ReplyWithSimpleString(ctx, "owner");
    RedisModule_ReplyWithStringBuffer(ctx, req->owner, req->owner_len);
    /* a multi-key waiter (LOCK.ACQUIRE_ALL, multi.c) is listed in each of its keys' queues */
    reply_field_str(ctx, "mode", w->nkeys > 1 ? "multi" : mode_name(req->shared, req->permits, 0));
    reply_field_ll(ctx, "permits", (long long)req->permits);
    reply_field_ll(ctx, "weight", req->weight ? (long long)req->weight : 1);
    reply_field_ll(ctx, "lease_ms", (long long)req->lease_ms);
    reply_field_ll(ctx, "waited_ms", wr->now_ms > w->blocked_ms ? (long long)(wr->now_ms - w->blocked_ms) : 0);
    reply_field_ll(ctx, "timeout_ms", w->deadline_ms > wr->now_ms ? (long long)(w->deadline_ms - wr->now_ms) : 0);
    reply_field_ll(ctx, "client_id", (long long)w->client_id);
}

/* The FULL view of the lock `l` at `keyname` (see inspect.h). */
static void reply_full(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l, uint64_t now_ms) {
    RedisModule_ReplyWithArray(ctx, 16);
    reply_field_ll(ctx, "permits", l->permits);
    reply_field_ll(ctx, "adjustment", l->adjust);
    reply_field_ll(ctx, "size", lock_size(l));
    reply_field_ll(ctx, "available", lock_available(l, now_ms));
    reply_field_ll(ctx, "last_token", (long long)l->last_token);
    reply_field_str(ctx, "kind", l->ephemeral ? "concurrency" : l->permits > 1 || l->adjust ? "semaphore" : "lock");
    RedisModule_ReplyWithSimpleString(ctx, "holders");
    RedisModule_ReplyWithArray(ctx, lock_live_holders(l, now_ms));
    for (uint32_t i = 0; i < l->nholders; i++) {
        uint64_t end = lock_entry_end(&l->holders[i], now_ms);
        if (end > now_ms) reply_holder(ctx, l, &l->holders[i], now_ms, end);
    }
    RedisModule_ReplyWithSimpleString(ctx, "waiters");
    const waitq_ops *ops[] = {lock_waitq_ops(), lock_multi_waitq_ops()};
    RedisModule_ReplyWithArray(ctx, waitq_each_of(ctx, keyname, ops, 2, NULL, NULL));
    waiters_reply wr = {ctx, now_ms};
    waitq_each_of(ctx, keyname, ops, 2, reply_waiter, &wr);
}

/* LOCK.INSPECT <key> [FULL]
 * Reply: [permits, last fencing token, waiters, [[owner, lease ms left, token,
 * count], ...], adjustment, size] for the leases still running and the
 * lock-delays (count 0, ms until the delay ends: the owner's hold ended without
 * a release), then the semaphore pool's adjustment and size (permits +
 * adjustment, clamped); nil when there is no such lock and nobody waits on
 * the key (with waiters but no value: a lock of one permit nobody holds, last
 * token 0). FULL: see inspect.h.
 * Read-only (runs on replicas). */
int lock_inspect_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2 && argc != 3) return RedisModule_WrongArity(ctx);
    int full = argc == 3;
    if (full && !mc_is_word(argv[2], "FULL"))
        return mc_reply_unknown_option(ctx, "LOCK.INSPECT", argv[2], "FULL");
    RedisModuleKey *key;
    if (lock_open(ctx, argv[1], REDISMODULE_READ, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    lockv *l, *none = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        /* No value, but clients may wait here: a multi-key waiter heading this
         * key's queue keeps it busy while it waits for its other keys. Show them,
         * as a lock of one permit that nobody holds. */
        const waitq_ops *ops[] = {lock_waitq_ops(), lock_multi_waitq_ops()};
        if (waitq_each_of(ctx, argv[1], ops, 2, NULL, NULL) == 0) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithNull(ctx);
        }
        l = none = lock_new(1);
    } else {
        l = RedisModule_ModuleTypeGetValue(key);
    }
    uint64_t now_ms = mc_now_ms();
    if (full) {
        reply_full(ctx, argv[1], l, now_ms);
        if (none) lock_free(none);
        RedisModule_CloseKey(key);
        return REDISMODULE_OK;
    }
    RedisModule_ReplyWithArray(ctx, 6);
    RedisModule_ReplyWithLongLong(ctx, l->permits);
    RedisModule_ReplyWithLongLong(ctx, (long long)l->last_token);
    RedisModule_ReplyWithLongLong(ctx, waitq_length(ctx, argv[1]));
    RedisModule_ReplyWithArray(ctx, lock_live_holders(l, now_ms));
    for (uint32_t i = 0; i < l->nholders; i++) {
        lock_holder *h = &l->holders[i];
        uint64_t end = lock_entry_end(h, now_ms);
        if (end <= now_ms) continue;
        RedisModule_ReplyWithArray(ctx, 4);
        RedisModule_ReplyWithStringBuffer(ctx, h->owner, h->owner_len);
        RedisModule_ReplyWithLongLong(ctx, (long long)(end - now_ms));
        RedisModule_ReplyWithLongLong(ctx, (long long)h->token);
        RedisModule_ReplyWithLongLong(ctx, h->expires_ms > now_ms ? h->count : 0);
    }
    RedisModule_ReplyWithLongLong(ctx, l->adjust);
    RedisModule_ReplyWithLongLong(ctx, lock_size(l));
    if (none) lock_free(none);
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}
