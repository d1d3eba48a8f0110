/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_cmd.c -- a semaphore pool's size (Redisson's RSemaphore addPermits,
 * drainPermits and availablePermits):
 *
 *   LOCK.ADD_PERMITS key delta [PERMITS n]     the pool's size after
 *   LOCK.DRAIN_PERMITS key [PERMITS n]         the permits taken out of the pool
 *   LOCK.AVAILABLE_PERMITS key [PERMITS n]     the permits free now (read-only)
 *
 * Acquirers keep passing the semaphore's base size (LOCK.ACQUIRE ... PERMITS n);
 * these commands change the lock's signed adjustment instead (core/lock.h: the
 * size is n + adjustment, clamped to 0..1024), which is persisted and
 * replicated with the lock (LOCK.STATE ... ADJUST a), so an unheld semaphore
 * keeps it. `PERMITS n` is the base size as the acquirers pass it: a missing
 * key needs it (ADD, DRAIN create the key; AVAILABLE answers nil without it), a
 * held one refuses a different n (as LOCK.ACQUIRE does), an unheld one takes
 * it as its new base (as the next acquire would). Not for concurrency limits
 * (RL.CONCURRENCY: each call passes the limit) nor read-write locks used with
 * READ. Adding permits serves the waiters, first come first served. */
#include <stdio.h>

#include "lock/acquire.h"
#include "lock/state.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/waitq.h"

#define ERR_NO_POOL "ERR no such semaphore: pass PERMITS n (its size, as its acquirers pass it) to create it"
#define ERR_CONCURRENCY                                                                                           \
    "ERR this key is a concurrency limit (RL.CONCURRENCY), whose size is the limit each call passes: a pool's " \
    "size is for LOCK.ACQUIRE's semaphores"
#define ERR_READERS "ERR this key is a read-write lock used with READ: a pool's size is for semaphores"

/* Parse the optional trailing [PERMITS n] from argv[from]. 0 (*n = 0 when
 * absent), or -1 after replying an error. */
static int parse_permits(RedisModuleCtx *ctx, const char *cmd, RedisModuleString **argv, int argc, int from,
                         uint64_t *n) {
    *n = 0;
    for (int i = from; i < argc; i++) {
        if (!mc_is_word(argv[i], "PERMITS") || *n) {
            mc_reply_unknown_option(ctx, cmd, argv[i], "PERMITS n");
            return -1;
        }
        if (i + 1 >= argc) {
            mc_reply_needs_value(ctx, "PERMITS", "n");
            return -1;
        }
        if (mc_parse_u64(argv[++i], 1, LOCK_MAX_PERMITS, n)) {
            mc_reply_range(ctx, "PERMITS", 1, LOCK_MAX_PERMITS);
            return -1;
        }
    }
    return 0;
}

/* waitq_each's callback: counts queued READ requests. */
static void count_readers(void *arg, const waitq_waiter_info *w) {
    *(long long *)arg += ((const lock_req *)w->req)->shared != 0;
}

/* Whether the lock `l` at `keyname` is a read-write lock in READ use: a shared
 * holder, or a READ request waiting. */
static int used_for_read(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l) {
    for (uint32_t i = 0; i < l->nholders; i++)
        if (l->holders[i].shared) return 1;
    long long readers = 0;
    waitq_each(ctx, keyname, lock_waitq_ops(), count_readers, &readers);
    return readers > 0;
}

/* A pool command's write: the open key, its value and what it was. */
typedef struct pool_write {
    RedisModuleKey *key;
    lockv *l;
    int created;          /* l is new (the key was missing); stored only when changed */
    uint32_t old_permits; /* the base size before (to undo, or to see a change) */
    int32_t old_adjust;   /* the adjustment before */
    uint64_t now_ms;      /* the command's one clock reading */
} pool_write;

/* Open the pool at `keyname` for writing, its ended leases dropped at now_ms
 * (committed). w->l: its value, or a new one of base size n (w->created) when
 * the key is missing; an unheld one takes n as its base (undone by
 * pool_abort). 0, or -1 after replying an error (key closed). */
static int pool_open(RedisModuleCtx *ctx, RedisModuleString *keyname, uint64_t n, uint64_t now_ms, pool_write *w) {
    w->now_ms = now_ms;
    if (lock_open(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, &w->key) != 0) {
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return -1;
    }
    w->created = 0;
    const char *err = NULL;
    int empty = RedisModule_KeyType(w->key) == REDISMODULE_KEYTYPE_EMPTY;
    if (!empty && ((lockv *)RedisModule_ModuleTypeGetValue(w->key))->ephemeral) {
        err = ERR_CONCURRENCY;
    } else {
        lock_expire_leases(ctx, w->key, keyname, now_ms); /* readers whose leases ended are gone */
        if (empty && n == 0) err = ERR_NO_POOL;
        else if (!empty && used_for_read(ctx, keyname, RedisModule_ModuleTypeGetValue(w->key))) err = ERR_READERS;
    }
    if (err) {
        RedisModule_CloseKey(w->key);
        RedisModule_ReplyWithError(ctx, err);
        return -1;
    }
    if (RedisModule_KeyType(w->key) == REDISMODULE_KEYTYPE_EMPTY) {
        w->l = lock_new((uint32_t)n);
        w->created = 1;
        w->old_permits = (uint32_t)n;
        w->old_adjust = 0;
        return 0;
    }
    w->l = RedisModule_ModuleTypeGetValue(w->key);
    w->old_permits = w->l->permits;
    w->old_adjust = w->l->adjust;
    if (n && n != w->l->permits) {
        if (w->l->nholders > 0) {
            lock_reply_permits_differ(ctx, w->l->permits);
            RedisModule_CloseKey(w->key);
            return -1;
        }
        w->l->permits = (uint32_t)n; /* unheld: the base changes, as the next acquire would */
    }
    return 0;
}

/* Refused after pool_open: undo (a new value freed, the base size restored),
 * close the key, reply `error`. */
static int pool_abort(RedisModuleCtx *ctx, pool_write *w, const char *error) {
    if (w->created) lock_free(w->l);
    else w->l->permits = w->old_permits;
    RedisModule_CloseKey(w->key);
    return RedisModule_ReplyWithError(ctx, error);
}

/* Keep the pool's change (store a new key, commit, replicate) or drop the value
 * when nothing changed, close the key, and serve the waiters after a change.
 * Changed: what the value holds now against what it held (not what was asked:
 * a delta of 0, or a drain finding nothing free, may still normalise an
 * adjustment the clamp had left above the size), so a replica and the AOF
 * get every change. */
static void pool_close(RedisModuleCtx *ctx, RedisModuleString *keyname, pool_write *w) {
    int changed = w->created ? w->l->adjust != 0
                             : (w->l->adjust != w->old_adjust || w->l->permits != w->old_permits);
    if (w->created && !changed) {
        lock_free(w->l);
    } else if (changed) {
        if (w->created) RedisModule_ModuleTypeSetValue(w->key, LockType, w->l);
        lock_commit(ctx, w->key, keyname, w->l, w->now_ms);
    }
    RedisModule_CloseKey(w->key);
    if (changed) waitq_kick(ctx, keyname); /* permits may have come free: the head waiter first */
}

/* LOCK.ADD_PERMITS <key> <delta> [PERMITS <n>]
 * Adds <delta> permits to the pool (-1024..1024; negative: removes them, even
 * below the permits taken: holders keep theirs, and no grant is made until
 * fewer are taken than the size). Reply: the pool's size after. A size that
 * would leave 0..1024 is refused and nothing changes, and so is adding to a
 * held lock of one permit with no adjustment (it is exclusive). Waiters are
 * served. */
static int LockAddPermits_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    long long delta;
    if (RedisModule_StringToLongLong(argv[2], &delta) != REDISMODULE_OK || delta < -LOCK_MAX_PERMITS ||
        delta > LOCK_MAX_PERMITS)
        return RedisModule_ReplyWithError(ctx, "ERR delta must be an integer from -1024 to 1024");
    uint64_t n;
    if (parse_permits(ctx, "LOCK.ADD_PERMITS", argv, argc, 3, &n) != 0) return REDISMODULE_OK;
    pool_write w;
    if (pool_open(ctx, argv[1], n, mc_now_ms(), &w) != 0) return REDISMODULE_OK;
    lockv *l = w.l;
    if (!w.created && delta > 0 && l->permits == 1 && l->adjust == 0 && lock_live_holders(l, w.now_ms) > 0) {
        /* a held lock of one permit (LOCK.ACQUIRE, LOCK.ACQUIRE_ALL) is exclusive:
         * a second permit would let another owner in beside its holder */
        return pool_abort(ctx, &w, "ERR this key is a lock of one permit, held: adding permits would let another "
                                   "owner in beside its holder; add them once it is released");
    }
    uint32_t old_size = lock_size(l);
    if (lock_add_permits(l, delta) != 0) {
        char buf[200];
        snprintf(buf, sizeof(buf),
                 "ERR the pool's size would be %lld (%u %+lld): it must stay from 0 to 1024; nothing changed",
                 (long long)old_size + delta, old_size, delta);
        return pool_abort(ctx, &w, buf);
    }
    long long size = lock_size(l);
    pool_close(ctx, argv[1], &w);
    return RedisModule_ReplyWithLongLong(ctx, size);
}

/* LOCK.DRAIN_PERMITS <key> [PERMITS <n>]
 * Takes every permit free now out of the pool (the size drops to the permits
 * taken), owned by nobody, until LOCK.ADD_PERMITS gives them back. Reply: how
 * many. */
static int LockDrainPermits_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    uint64_t n;
    if (parse_permits(ctx, "LOCK.DRAIN_PERMITS", argv, argc, 2, &n) != 0) return REDISMODULE_OK;
    pool_write w;
    if (pool_open(ctx, argv[1], n, mc_now_ms(), &w) != 0) return REDISMODULE_OK;
    uint32_t drained = lock_drain(w.l, w.now_ms);
    pool_close(ctx, argv[1], &w);
    return RedisModule_ReplyWithLongLong(ctx, drained);
}

/* LOCK.AVAILABLE_PERMITS <key> [PERMITS <n>]
 * Reply: the permits free now (the pool's size minus the permits taken by
 * holders and lock-delays, never below 0; queued requests do not count, though
 * a newcomer is not served before them), or nil for a missing key without
 * PERMITS n (with it: n). Read-only (runs on replicas). */
static int LockAvailablePermits_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 2) return RedisModule_WrongArity(ctx);
    uint64_t n;
    if (parse_permits(ctx, "LOCK.AVAILABLE_PERMITS", argv, argc, 2, &n) != 0) return REDISMODULE_OK;
    RedisModuleKey *key;
    if (lock_open(ctx, argv[1], REDISMODULE_READ, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return n ? RedisModule_ReplyWithLongLong(ctx, (long long)n) : RedisModule_ReplyWithNull(ctx);
    }
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    const char *err = l->ephemeral ? ERR_CONCURRENCY : used_for_read(ctx, argv[1], l) ? ERR_READERS : NULL;
    uint64_t now_ms = mc_now_ms();
    int differs = !err && n && n != l->permits;
    if (differs && lock_live_holders(l, now_ms) > 0) {
        lock_reply_permits_differ(ctx, l->permits);
        RedisModule_CloseKey(key);
        return REDISMODULE_OK;
    }
    long long avail = 0;
    if (!err) {
        /* unheld with another base: as the next acquire would see it (read only) */
        lockv probe = *l;
        if (differs) probe.permits = (uint32_t)n;
        avail = lock_available(&probe, now_ms);
    }
    RedisModule_CloseKey(key);
    return err ? RedisModule_ReplyWithError(ctx, err) : RedisModule_ReplyWithLongLong(ctx, avail);
}

static const mc_command commands[] = {
    {"LOCK.ADD_PERMITS", LockAddPermits_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"LOCK.DRAIN_PERMITS", LockDrainPermits_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"LOCK.AVAILABLE_PERMITS", LockAvailablePermits_RedisCommand, "readonly fast", 1, 1, 1},
};

int lock_pool_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), lock_cmdinfo);
}
