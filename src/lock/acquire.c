/* SPDX-License-Identifier: BSD-3-Clause */
/* acquire.c -- acquiring, immediately or from the wait queue; see acquire.h. */
#include "lock/acquire.h"

#include <stdio.h>
#include <string.h>

#include "lock/acks.h"
#include "lock/fencing.h"
#include "lock/multi.h"
#include "lock/sessions.h"
#include "lock/state.h"
#include "server/clock.h"
#include "server/limitstats.h"
#include "server/waitq.h"

typedef struct lock_reply {
    int error;          /* 1: WRONGTYPE, 2: tokens exhausted, 3: PERMITS differs, 4: write inside read,
                         * 5: a reentry asking for more permits than held, 6: READ on a pool with an
                         * adjusted size */
    int granted;
    long long token;    /* fencing token, or -1 */
    long long ms;       /* granted: lease ms; not: ms until the earliest lease ends (or -1) */
    int rl_style;       /* reply in the rate limits' shape */
    long long remaining;/* permits free after this call */
    long long reset_ms; /* until every lease has ended */
    uint32_t permits;   /* error 3: the semaphore's size */
} lock_reply;

int lock_reply_permits_differ(RedisModuleCtx *ctx, uint32_t permits) {
    char buf[200];
    snprintf(buf, sizeof(buf),
             "ERR PERMITS differs from the semaphore's size (%u) while it is held; "
             "the size changes only once every permit is released",
             permits);
    return RedisModule_ReplyWithError(ctx, buf);
}

static int reply_acquire(RedisModuleCtx *ctx, const lock_reply *r) {
    if (r->error == 2)
        return RedisModule_ReplyWithError(ctx, "ERR the lock's fencing tokens are exhausted; delete the key to reset it");
    if (r->error == 3) return lock_reply_permits_differ(ctx, r->permits);
    if (r->error == 5)
        return RedisModule_ReplyWithError(ctx, "ERR the owner re-enters holding fewer permits than this TAKE asks "
                                               "for; a reentry takes no more permits (release and acquire again)");
    if (r->error == 6)
        return RedisModule_ReplyWithError(ctx, "ERR READ is for a read-write lock: this key is a semaphore pool whose "
                                               "size was changed (LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS)");
    if (r->error == 4)
        return RedisModule_ReplyWithError(ctx, "ERR the owner holds this lock for READ: a WRITE inside it would wait "
                                               "for itself; release the read hold first");
    if (r->error) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (r->rl_style) {
        rl_stat(RL_STAT_CONCURRENCY, r->granted);
        RedisModule_ReplyWithArray(ctx, 4);
        RedisModule_ReplyWithLongLong(ctx, r->granted);
        RedisModule_ReplyWithLongLong(ctx, r->remaining);
        /* refused: until the earliest lease ends, 0 when nobody holds a slot */
        RedisModule_ReplyWithLongLong(ctx, r->granted ? -1 : r->ms < 0 ? 0 : r->ms);
        return RedisModule_ReplyWithLongLong(ctx, r->reset_ms);
    }
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, r->granted);
    RedisModule_ReplyWithLongLong(ctx, r->token);
    return RedisModule_ReplyWithLongLong(ctx, r->ms);
}

/* The permits of `l` taken at now_ms, by leases still running or lock-delays
 * (lock_entry_end: ended ones not yet dropped are ignored, so this only reads):
 * how many (their weights), and the earliest and latest time one frees without
 * a release -- a running lease with a lock-delay frees at its end + the delay --
 * (*first = *last = 0 when none). */
static uint64_t live_bounds(const lockv *l, uint64_t now_ms, uint64_t *first, uint64_t *last) {
    uint64_t n = 0;
    *first = *last = 0;
    for (uint32_t i = 0; l && i < l->nholders; i++) {
        const lock_holder *h = &l->holders[i];
        uint64_t e = lock_entry_end(h, now_ms);
        if (e <= now_ms) continue;
        n += h->weight;
        if (h->count > 0 && h->expires_ms > now_ms) e += h->delay_ms; /* then its lock-delay runs */
        if (*first == 0 || e < *first) *first = e;
        if (e > *last) *last = e;
    }
    return n;
}

/* Fill `out` as the refusal of `req` at now_ms on the lock `l` (NULL: no such
 * lock), with `queued` clients waiting ahead: ms until the earliest lease ends
 * (-1 when nobody holds it), until every lease ends, and the permits a
 * newcomer could still take (those not held nor waited for). */
static void refuse(const lockv *l, const lock_req *req, uint64_t now_ms, long long queued, lock_reply *out) {
    uint64_t first, last;
    long long live = (long long)live_bounds(l, now_ms, &first, &last);
    out->error = 0;
    out->granted = 0;
    out->token = -1;
    out->rl_style = req->rl_style;
    out->ms = first ? (long long)(first - now_ms) : -1;
    out->reset_ms = last ? (long long)(last - now_ms) : 0;
    long long size = (long long)req->permits + (l ? l->adjust : 0); /* the pool's size (lock_size) */
    if (size > LOCK_MAX_PERMITS) size = LOCK_MAX_PERMITS;
    out->remaining = size - live - queued;
    if (out->remaining < 0) out->remaining = 0;
}

/* Try `req` on the open lock key. Returns 1 when answered (granted or refused for
 * good), 0 when it must wait (*out->ms = until the earliest lease ends). */
static int try_acquire(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, const lock_req *req,
                       uint64_t now_us, lock_reply *out) {
    uint64_t now_ms = now_us / 1000;
    lock_expire_leases(ctx, key, keyname, now_ms);
    lockv *l;
    int created = 0;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        l = lock_new((uint32_t)req->permits);
        l->ephemeral = (uint32_t)req->ephemeral;
        created = 1;
    } else {
        l = RedisModule_ModuleTypeGetValue(key);
        if (!req->ephemeral && l->nholders > 0 && l->permits != req->permits) {
            /* A semaphore's size is fixed while it is held (a concurrency limit
             * takes the limit of each call). */
            out->error = 3;
            out->rl_style = req->rl_style;
            out->permits = l->permits;
            return 1;
        }
        if (req->shared && l->adjust != 0) { /* no readers on a pool (core/lock.h) */
            out->error = 6;
            out->rl_style = req->rl_style;
            return 1;
        }
    }
    uint32_t old_permits = l->permits;
    l->permits = (uint32_t)req->permits;
    uint64_t token = 0;
    lock_grant g = {.lease_ms = req->lease_ms, .delay_ms = req->delay_ms, .client_id = req->client_id,
                    .reentrant = req->reentrant, .shared = req->shared, .weight = (uint32_t)req->weight};
    lock_outcome o = lock_acquire(l, req->owner, req->owner_len, now_ms, &g, fencing_floor(now_us), &token);
    out->error = 0;
    out->rl_style = req->rl_style;
    if (o == LOCK_EXHAUSTED || o == LOCK_UPGRADE || o == LOCK_MORE) {
        if (created) lock_free(l);
        else l->permits = old_permits;
        out->error = o == LOCK_EXHAUSTED ? 2 : o == LOCK_UPGRADE ? 4 : 5;
        return 1;
    }
    if (o == LOCK_GRANTED || o == LOCK_REENTERED) {
        fencing_saw(token);
        if (created) RedisModule_ModuleTypeSetValue(key, LockType, l);
        out->remaining = (long long)lock_size(l) - (long long)lock_taken(l, now_ms);
        if (out->remaining < 0) out->remaining = 0;
        uint64_t first, last;
        live_bounds(l, now_ms, &first, &last);
        out->reset_ms = last > now_ms ? (long long)(last - now_ms) : 0;
        lock_commit(ctx, key, keyname, l, now_ms);
        if (req->client_id && o == LOCK_GRANTED) session_add(ctx, req->client_id, keyname, req->owner, req->owner_len);
        lock_stats.grants++;
        out->granted = 1;
        out->token = (long long)token;
        out->ms = (long long)req->lease_ms;
        return 1;
    }
    /* Not granted: nothing changes (permits as they were). */
    refuse(created ? NULL : l, req, now_ms, 0, out);
    if (created) lock_free(l);
    else l->permits = old_permits;
    return o == LOCK_OWNED; /* held by this owner already: waiting would not help */
}

static int lock_try_serve(RedisModuleCtx *ctx, RedisModuleString *keyname, void *reqp, uint64_t now_us, void **reply,
                          uint64_t *retry_ms) {
    lock_req *req = reqp;
    lock_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    RedisModuleKey *key;
    if (lock_open_kind(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, req->ephemeral, &key) != 0) {
        rep->error = 1;
        *reply = rep;
        return 1;
    }
    int done = try_acquire(ctx, key, keyname, req, now_us, rep);
    RedisModule_CloseKey(key);
    if (done) {
        if (rep->granted) lock_note_wait(req->blocked_us, now_us);
        *reply = rep;
        return 1;
    }
    *retry_ms = rep->ms > 0 ? (uint64_t)rep->ms : 0; /* else: a release kicks the queue */
    RedisModule_Free(rep);
    return 0;
}

static int lock_reply_fn(RedisModuleCtx *ctx, void *reply) {
    return reply_acquire(ctx, reply);
}

/* A waiter's wait ended unserved: its refusal, with the estimates read from
 * the lock as it is (LOCK.ACQUIRE: [0, -1, ms until the earliest lease ends, or
 * -1 when nobody holds it]; RL.CONCURRENCY: its four-field refusal). */
static void *lock_timed_out(RedisModuleCtx *ctx, RedisModuleString *keyname, void *reqp, uint64_t now_us) {
    lock_req *req = reqp;
    lock_stats.timeouts++;
    lock_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    *rep = (lock_reply){.token = -1, .ms = -1, .rl_style = req->rl_style};
    RedisModuleKey *key;
    const lockv *l = NULL;
    /* the key of the waiter's own family only (a lock and a concurrency limit answer
     * each other WRONGTYPE): another kind of key gives no estimate */
    if (lock_open_kind(ctx, keyname, REDISMODULE_READ, req->ephemeral, &key) != 0) {
        refuse(NULL, req, now_us / 1000, 0, rep);
        return rep;
    }
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) l = RedisModule_ModuleTypeGetValue(key);
    refuse(l, req, now_us / 1000, waitq_length(ctx, keyname), rep);
    RedisModule_CloseKey(key);
    return rep;
}

static void lock_req_free(void *p) {
    lock_req *req = p;
    lock_stats.waiting--;
    RedisModule_Free(req->owner);
    RedisModule_Free(req);
}

static void free_reply(void *p) {
    RedisModule_Free(p);
}

static const waitq_ops lock_wait_ops = {lock_try_serve, lock_reply_fn, lock_timed_out, lock_req_free, free_reply};

/* Answer an acquire at once, or queue it (WAIT) first come first served. */
int lock_acquire_flow(RedisModuleCtx *ctx, RedisModuleString *keyname, lock_req *reqp, uint64_t wait_ms) {
    lock_req req = *reqp;
    const char *owner = req.owner;
    uint64_t now_us = mc_now_us();
    RedisModuleKey *key;
    if (lock_open_kind(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, req.ephemeral, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    int may_wait = wait_ms > 0 && waitq_can_block(ctx);
    lock_reply rep = {.token = -1, .ms = -1, .rl_style = req.rl_style};
    int answered;
    if (waitq_busy(ctx, keyname)) {
        /* One rule (waitq.h): nobody is served before the clients waiting on
         * the key -- except an owner re-entering a lock it holds already. */
        answered = 0;
        lockv *l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
        if (req.reentrant && l && lock_find(l, owner, req.owner_len) >= 0)
            answered = try_acquire(ctx, key, keyname, &req, now_us, &rep) || rep.granted;
        if (!answered) {
            l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
            refuse(l, &req, now_us / 1000, waitq_length(ctx, keyname), &rep);
        }
    } else {
        answered = try_acquire(ctx, key, keyname, &req, now_us, &rep) || rep.granted;
    }
    RedisModule_CloseKey(key);
    if (!answered && may_wait) {
        lock_req *copy = RedisModule_Alloc(sizeof(*copy));
        *copy = req;
        copy->owner = RedisModule_Alloc(req.owner_len);
        memcpy(copy->owner, owner, req.owner_len);
        copy->blocked_us = now_us;
        lock_stats.waits++;
        lock_stats.waiting++;
        waitq_block(ctx, &lock_wait_ops, keyname, copy, now_us / 1000, wait_ms, rep.ms > 0 ? (uint64_t)rep.ms : 0);
        return REDISMODULE_OK;
    }
    if (rep.granted && !rep.error && req.acks > 0)
        return lock_acks_wait(ctx, keyname, owner, req.owner_len, (uint64_t)rep.token, req.acks, req.acks_timeout_ms);
    return reply_acquire(ctx, &rep);
}

const waitq_ops *lock_waitq_ops(void) {
    return &lock_wait_ops;
}

long long lock_max_queue_length(void) {
    long long one = waitq_max_length(&lock_wait_ops), multi = waitq_max_length(lock_multi_waitq_ops());
    return one > multi ? one : multi; /* a queue headed by a multi-key waiter (multi.c) counts too */
}
