/* SPDX-License-Identifier: BSD-3-Clause */
/* multi.c -- multi-key locks: several exclusive locks acquired all or none in
 * one command, waited for without holding any part, released together.
 *
 *   LOCK.ACQUIRE_ALL numkeys key [key ...] owner lease-ms [WRITE] [SESSION]
 *                    [LOCKDELAY delay-ms] [WAIT timeout-ms]
 *   LOCK.RELEASE_ALL numkeys key [key ...] owner
 *   LOCK.EXTEND_ALL  numkeys key [key ...] owner lease-ms
 *
 * Why: a client that takes two locks one after the other can deadlock with one
 * that takes them in the other order, and one holding part of its set while it
 * waits for the rest keeps others out for nothing. Here a grant takes every key
 * or none, and a waiter holds nothing until all of its keys are free for it.
 *
 * The keys share one hash slot (CROSSSLOT otherwise, on a standalone server
 * too, like RL.MULTI: what works here works in Cluster), and are distinct. Each
 * key is an ordinary exclusive lock of one permit (core/lock.h): LOCK.ACQUIRE,
 * LOCK.RELEASE and LOCK.INSPECT see it as such. One grant gives every key the
 * same fencing token: the largest any of them would issue alone, max(fencing
 * floor, each key's last token + 1), so each key's tokens keep growing. Each
 * key is committed as LOCK.ACQUIRE commits it (state.c: LOCK.STATE with the
 * absolute lease end, one per key -- Redis wraps a command's writes in
 * MULTI/EXEC, so a replica or the AOF sees all of them or none -- and the
 * key's own lease timer; the leases all end at the same time). SESSION ties
 * each key's hold to the connection (sessions.c).
 *
 * Fairness, the family's rule (server/waitq.h): a key with clients queued on
 * it is busy for a newcomer. WAIT queues one waiter in every key's queue at
 * once (waitq_block_all): it is served when it heads all of them and every key
 * is free, so a queue whose head is a multi-key waiter not yet at the head of
 * its other queues waits (nobody passes it). Bad input (arity, CROSSSLOT, a
 * duplicate key, WRONGTYPE on any key, a semaphore held with several permits,
 * a semaphore pool whose size was changed by LOCK.ADD_PERMITS/DRAIN_PERMITS)
 * is refused before anything is written. */
#include <stdio.h>
#include <string.h>

#include "core/keyslot.h"
#include "lock/acquire.h"
#include "lock/fencing.h"
#include "lock/multi.h"
#include "lock/sessions.h"
#include "lock/state.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/errors.h"
#include "server/waitq.h"

#define MAX_MULTI_KEYS 16
#define ERR_NOT_OWNER_ALL "ERR the locks are not all held by this owner (nothing changed)"
#define MULTI_OPTIONS "WRITE, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms"

/* A multi-key request. `lock` comes first: LOCK.INSPECT FULL lists a waiter's
 * request as a lock_req (owner, lease, mode). */
typedef struct multi_req {
    lock_req lock;
    int nkeys;
    RedisModuleString *keys[MAX_MULTI_KEYS]; /* a waiter's are retained copies */
} multi_req;

/* The one answer of an acquire. */
typedef struct multi_reply {
    const char *error; /* a static error reply, else NULL */
    char *owned_error; /* an allocated error reply (names a key), else NULL */
    int granted;
    long long token;   /* granted: the fencing token of every key; else -1 */
    long long ms;      /* granted: the lease; else ms until every busy key's holder frees it (-1: unknown) */
} multi_reply;

/* What checking every key found, reading only. */
typedef struct multi_check {
    int busy;           /* some key is taken (by a lease or a lock-delay) */
    int owned;          /* the owner holds some key already: waiting would not help */
    uint64_t free_at;   /* Unix ms: the latest of the busy keys' earliest frees (0: none known) */
    uint64_t floor;     /* the one token a grant would issue */
} multi_check;

static int reply_multi(RedisModuleCtx *ctx, const multi_reply *r) {
    if (r->owned_error) return RedisModule_ReplyWithError(ctx, r->owned_error);
    if (r->error) return RedisModule_ReplyWithError(ctx, r->error);
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, r->granted);
    RedisModule_ReplyWithLongLong(ctx, r->token);
    return RedisModule_ReplyWithLongLong(ctx, r->ms);
}

/* Close the n keys of keys[] (NULLs skipped). */
static void close_all(RedisModuleKey **keys, int n) {
    for (int i = 0; i < n; i++)
        if (keys[i]) RedisModule_CloseKey(keys[i]);
}

/* Open every key of `req` as a plain lock with `mode`. 0, or -1 (all closed)
 * when one holds another type or a concurrency limit. */
static int open_all(RedisModuleCtx *ctx, const multi_req *req, int mode, RedisModuleKey **keys) {
    for (int i = 0; i < req->nkeys; i++) {
        if (lock_open_kind(ctx, req->keys[i], mode, 0, &keys[i]) != 0) {
            close_all(keys, i);
            return -1;
        }
    }
    return 0;
}

static lockv *value_of(RedisModuleKey *key) {
    return key && RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
}

/* When lock `l` (one permit) frees without a release, as seen at now_ms: the
 * latest end of its live entries, a running lease's lock-delay added (0: free). */
static uint64_t free_at(const lockv *l, uint64_t now_ms) {
    uint64_t at = 0;
    for (uint32_t i = 0; l && i < l->nholders; i++) {
        const lock_holder *h = &l->holders[i];
        uint64_t e = lock_entry_end(h, now_ms);
        if (e <= now_ms) continue;
        if (h->count > 0 && h->expires_ms > now_ms) e += h->delay_ms;
        if (e > at) at = e;
    }
    return at;
}

/* Check every open key for `req` at now_us without writing. Returns 0, or -1
 * with out's error set (answered for good: a held semaphore, tokens exhausted). */
static int check_all(RedisModuleKey **keys, const multi_req *req, uint64_t now_us, multi_check *c, multi_reply *out) {
    uint64_t now_ms = now_us / 1000;
    memset(c, 0, sizeof(*c));
    c->floor = fencing_floor(now_us);
    for (int i = 0; i < req->nkeys; i++) {
        const lockv *l = value_of(keys[i]);
        if (l == NULL) continue;
        if (l->last_token + 1 > c->floor) c->floor = l->last_token + 1;
        if (l->adjust != 0) {
            /* a semaphore pool (LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS): its size is
             * not one permit, held or not, so no exclusive grant can be made there */
            size_t len;
            const char *k = RedisModule_StringPtrLen(req->keys[i], &len);
            char buf[240];
            snprintf(buf, sizeof(buf), "ERR key '%.*s' is a semaphore pool of size %u (LOCK.ADD_PERMITS, "
                     "LOCK.DRAIN_PERMITS): LOCK.ACQUIRE_ALL takes locks of one permit", len > 64 ? 64 : (int)len, k,
                     lock_size(l));
            out->owned_error = RedisModule_Strdup(buf);
            return -1;
        }
        if (lock_taken(l, now_ms) == 0) continue;
        if (l->permits != 1) {
            size_t len;
            const char *k = RedisModule_StringPtrLen(req->keys[i], &len);
            char buf[200];
            snprintf(buf, sizeof(buf), "ERR key '%.*s' is a semaphore of %u permits, held: LOCK.ACQUIRE_ALL takes "
                     "locks of one permit", len > 64 ? 64 : (int)len, k, l->permits);
            out->owned_error = RedisModule_Strdup(buf);
            return -1;
        }
        int h = lock_find(l, req->lock.owner, req->lock.owner_len);
        if (h >= 0 && l->holders[h].expires_ms > now_ms) c->owned = 1;
        c->busy = 1;
        uint64_t at = free_at(l, now_ms);
        if (at > c->free_at) c->free_at = at;
    }
    if (c->floor > LOCK_MAX_TOKEN) { /* as core/lock.c: tokens up to LOCK_MAX_TOKEN */
        out->error = "ERR a lock's fencing tokens are exhausted; delete the key to reset it";
        return -1;
    }
    return 0;
}

/* Grant every open key (checked free) to `req` at now_us with the token
 * c->floor: each is committed, replicated and timed as LOCK.ACQUIRE's grant. */
static void grant_all(RedisModuleCtx *ctx, RedisModuleKey **keys, const multi_req *req, uint64_t now_us,
                      const multi_check *c, multi_reply *out) {
    uint64_t now_ms = now_us / 1000;
    lock_grant g = {.lease_ms = req->lock.lease_ms, .delay_ms = req->lock.delay_ms, .client_id = req->lock.client_id};
    for (int i = 0; i < req->nkeys; i++) {
        lock_expire_leases(ctx, keys[i], req->keys[i], now_ms);
        lockv *l = value_of(keys[i]);
        int created = l == NULL;
        if (created) l = lock_new(1);
        l->permits = 1; /* an unheld semaphore becomes a lock, as LOCK.ACQUIRE does */
        uint64_t token = 0;
        lock_acquire(l, req->lock.owner, req->lock.owner_len, now_ms, &g, c->floor, &token);
        fencing_saw(token);
        if (created) RedisModule_ModuleTypeSetValue(keys[i], LockType, l);
        lock_commit(ctx, keys[i], req->keys[i], l, now_ms);
        if (req->lock.client_id) session_add(ctx, req->lock.client_id, req->keys[i], req->lock.owner, req->lock.owner_len);
        lock_stats.grants++;
    }
    out->granted = 1;
    out->token = (long long)c->floor;
    out->ms = (long long)req->lock.lease_ms;
}

/* Fill `out` as a refusal at now_ms after check_all found c. */
static void refuse_all(const multi_check *c, uint64_t now_ms, multi_reply *out) {
    out->granted = 0;
    out->token = -1;
    out->ms = c->free_at > now_ms ? (long long)(c->free_at - now_ms) : -1;
}

/* Try `req` at now_us, every key being free of waiters ahead of it. Returns 1
 * when answered (granted, or refused for good), 0 when it must wait (out->ms:
 * until the keys could be free, -1 unknown). */
static int try_all(RedisModuleCtx *ctx, const multi_req *req, uint64_t now_us, multi_reply *out) {
    RedisModuleKey *keys[MAX_MULTI_KEYS];
    if (open_all(ctx, req, REDISMODULE_READ | REDISMODULE_WRITE, keys) != 0) {
        out->error = REDISMODULE_ERRORMSG_WRONGTYPE;
        return 1;
    }
    multi_check c;
    int done = 1;
    if (check_all(keys, req, now_us, &c, out) == 0) {
        if (!c.busy) grant_all(ctx, keys, req, now_us, &c, out);
        else {
            refuse_all(&c, now_us / 1000, out);
            done = c.owned; /* held by this owner already: waiting would not help */
        }
    }
    close_all(keys, req->nkeys);
    return done;
}

/* ==== Waiting (server/waitq.h: one waiter in every key's queue) ==== */

static void multi_req_free(void *p) {
    multi_req *req = p;
    lock_stats.waiting--;
    for (int i = 0; i < req->nkeys; i++) RedisModule_FreeString(NULL, req->keys[i]);
    RedisModule_Free(req->lock.owner);
    RedisModule_Free(req);
}

static void multi_reply_free(void *p) {
    multi_reply *r = p;
    if (r->owned_error) RedisModule_Free(r->owned_error);
    RedisModule_Free(r);
}

/* Called when the waiter heads every queue of its keys (`key` is one of them). */
static int multi_try_serve(RedisModuleCtx *ctx, RedisModuleString *key, void *reqp, uint64_t now_us, void **reply,
                           uint64_t *retry_ms) {
    (void)key;
    multi_req *req = reqp;
    multi_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    if (try_all(ctx, req, now_us, rep)) {
        if (rep->granted) lock_note_wait(req->lock.blocked_us, now_us);
        *reply = rep;
        return 1;
    }
    *retry_ms = rep->ms > 0 ? (uint64_t)rep->ms : 0; /* else: a release or a lease end kicks a queue */
    multi_reply_free(rep);
    return 0;
}

static int multi_reply_fn(RedisModuleCtx *ctx, void *reply) {
    return reply_multi(ctx, reply);
}

/* The refusal of a wait that ended: [0, -1, ms until the busy keys free (-1: unknown)]. */
static void *multi_timed_out(RedisModuleCtx *ctx, RedisModuleString *key, void *reqp, uint64_t now_us) {
    (void)key;
    multi_req *req = reqp;
    lock_stats.timeouts++;
    multi_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    *rep = (multi_reply){.token = -1, .ms = -1};
    RedisModuleKey *keys[MAX_MULTI_KEYS];
    if (open_all(ctx, req, REDISMODULE_READ, keys) != 0) return rep;
    multi_check c;
    multi_reply ignored = {0};
    if (check_all(keys, req, now_us, &c, &ignored) == 0) refuse_all(&c, now_us / 1000, rep);
    if (ignored.owned_error) RedisModule_Free(ignored.owned_error);
    close_all(keys, req->nkeys);
    return rep;
}

static const waitq_ops multi_wait_ops = {multi_try_serve, multi_reply_fn, multi_timed_out, multi_req_free,
                                         multi_reply_free};

/* ==== Arguments ==== */

/* Parse "numkeys key [key ...]" from argv[1]; keys must be distinct and share a
 * hash slot. Returns the index of the first argument after the keys, or 0
 * after replying an error. `extra`: the fixed arguments after the keys. */
static int parse_keys(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int extra, multi_req *req) {
    uint64_t n;
    if (argc < 3 || mc_parse_u64(argv[1], 1, MAX_MULTI_KEYS, &n)) {
        if (argc < 3) RedisModule_WrongArity(ctx);
        else mc_reply_range(ctx, "numkeys", 1, MAX_MULTI_KEYS);
        return 0;
    }
    if ((uint64_t)argc < 2 + n + (uint64_t)extra) {
        RedisModule_WrongArity(ctx);
        return 0;
    }
    size_t klen;
    const char *k = RedisModule_StringPtrLen(argv[2], &klen);
    unsigned slot = keyslot_of(k, klen);
    req->nkeys = (int)n;
    for (int i = 0; i < (int)n; i++) {
        req->keys[i] = argv[2 + i];
        k = RedisModule_StringPtrLen(argv[2 + i], &klen);
        if (keyslot_of(k, klen) != slot) {
            /* one hash slot, standalone too: code that works here works in Cluster */
            RedisModule_ReplyWithError(ctx, ERR_CROSSSLOT);
            return 0;
        }
        for (int j = 0; j < i; j++) {
            if (RedisModule_StringCompare(req->keys[j], req->keys[i]) == 0) {
                RedisModule_ReplyWithError(ctx, "ERR the same key appears twice in the list");
                return 0;
            }
        }
    }
    return 2 + (int)n;
}

/* The owner argument into req. 0, or -1 after replying an error. */
static int parse_owner(RedisModuleCtx *ctx, RedisModuleString *arg, multi_req *req) {
    req->lock.owner = (char *)RedisModule_StringPtrLen(arg, &req->lock.owner_len);
    if (req->lock.owner_len == 0 || req->lock.owner_len > LOCK_MAX_OWNER_BYTES) {
        RedisModule_ReplyWithError(ctx, "ERR owner must be 1 to 256 bytes");
        return -1;
    }
    return 0;
}

/* Cluster routing and ACL checks: the keys are argv[2 .. 2 + numkeys). */
static int key_positions(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long n;
    if (argc >= 3 && RedisModule_StringToLongLong(argv[1], &n) == REDISMODULE_OK && n >= 1 &&
        n <= MAX_MULTI_KEYS && 2 + n <= argc)
        for (long long i = 0; i < n; i++) RedisModule_KeyAtPos(ctx, (int)(2 + i));
    return REDISMODULE_OK;
}

/* ==== Commands ==== */

/* LOCK.ACQUIRE_ALL <numkeys> <key> [<key> ...] <owner> <lease ms> [WRITE] [SESSION] [LOCKDELAY <delay ms>]
 *                  [WAIT <timeout ms>]
 * Every key's exclusive lock, or none. Reply: [1, fencing token (the same on
 * every key), lease ms] when granted; [0, -1, ms until the taken keys could all
 * be free (-1 when unknown: only waiters ahead)] when not -- at once when the
 * owner holds one of the keys already. WAIT: blocks, first come first served
 * on every key, holding nothing, until granted or the timeout. PERMITS, TAKE,
 * READ, REENTRANT and ACKS are refused (exclusive locks of one permit only). */
static int AcquireAll_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) return key_positions(ctx, argv, argc);
    multi_req req = {0};
    int i = parse_keys(ctx, argv, argc, 2, &req);
    if (i == 0) return REDISMODULE_OK;
    if (parse_owner(ctx, argv[i], &req) != 0) return REDISMODULE_OK;
    if (mc_parse_u64(argv[i + 1], 1, LOCK_MAX_LEASE_MS, &req.lock.lease_ms))
        return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    req.lock.permits = 1;
    uint64_t wait_ms = 0;
    int session = 0;
    for (i += 2; i < argc; i++) {
        if (mc_is_word(argv[i], "WRITE")) {
            continue;
        } else if (mc_is_word(argv[i], "SESSION")) {
            session = 1;
        } else if (mc_is_word(argv[i], "LOCKDELAY")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "LOCKDELAY", "delay-ms");
            if (mc_parse_u64(argv[++i], 0, LOCK_MAX_LEASE_MS, &req.lock.delay_ms))
                return mc_reply_range(ctx, "LOCKDELAY", 0, LOCK_MAX_LEASE_MS);
        } else if (mc_is_word(argv[i], "WAIT")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "WAIT", "timeout-ms");
            if (mc_parse_u64(argv[++i], 0, 1ULL << 40, &wait_ms)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40);
        } else if (mc_is_word(argv[i], "PERMITS") || mc_is_word(argv[i], "TAKE") || mc_is_word(argv[i], "READ") ||
                   mc_is_word(argv[i], "REENTRANT") || mc_is_word(argv[i], "ACKS")) {
            return RedisModule_ReplyWithError(ctx, "ERR LOCK.ACQUIRE_ALL takes exclusive locks of one permit: "
                                                   "PERMITS, TAKE, READ, REENTRANT and ACKS are not supported");
        } else {
            return mc_reply_unknown_option(ctx, "LOCK.ACQUIRE_ALL", argv[i], MULTI_OPTIONS);
        }
    }
    if (session) {
        if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LUA)
            return RedisModule_ReplyWithError(ctx, "ERR SESSION is not allowed in scripts (EVAL, FCALL): a script's "
                                                   "client never disconnects");
        req.lock.client_id = RedisModule_GetClientId(ctx);
    }
    uint64_t now_us = mc_now_us();
    multi_reply rep = {.token = -1, .ms = -1};
    int queued = 0;
    for (int k = 0; k < req.nkeys && !queued; k++) queued = waitq_busy(ctx, req.keys[k]);
    int answered;
    if (queued) {
        /* One rule (waitq.h): nobody is served before the clients waiting on a key. */
        RedisModuleKey *keys[MAX_MULTI_KEYS];
        if (open_all(ctx, &req, REDISMODULE_READ, keys) != 0)
            return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        multi_check c;
        answered = check_all(keys, &req, now_us, &c, &rep) != 0 || c.owned;
        if (rep.error == NULL && rep.owned_error == NULL) refuse_all(&c, now_us / 1000, &rep);
        close_all(keys, req.nkeys);
    } else {
        answered = try_all(ctx, &req, now_us, &rep);
    }
    if (!answered && wait_ms > 0 && waitq_can_block(ctx)) {
        multi_req *copy = RedisModule_Alloc(sizeof(*copy));
        *copy = req;
        copy->lock.owner = RedisModule_Alloc(req.lock.owner_len);
        memcpy(copy->lock.owner, req.lock.owner, req.lock.owner_len);
        for (int k = 0; k < req.nkeys; k++) copy->keys[k] = RedisModule_CreateStringFromString(NULL, req.keys[k]);
        copy->lock.blocked_us = now_us;
        lock_stats.waits++;
        lock_stats.waiting++;
        waitq_block_all(ctx, &multi_wait_ops, copy->keys, copy->nkeys, copy, now_us / 1000, wait_ms,
                        rep.ms > 0 ? (uint64_t)rep.ms : 0);
        return REDISMODULE_OK;
    }
    int rc = reply_multi(ctx, &rep);
    if (rep.owned_error) RedisModule_Free(rep.owned_error);
    return rc;
}

/* LOCK.RELEASE_ALL <numkeys> <key> [<key> ...] <owner>
 * Releases <owner>'s hold on each key it holds (one acquisition), serving each
 * freed key's waiters. Reply: per key in order, the acquisitions <owner> still
 * holds there (0: released), or -1 when it held nothing there (that key is
 * unchanged; e.g. its lease had ended). WRONGTYPE on any key changes nothing. */
static int ReleaseAll_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) return key_positions(ctx, argv, argc);
    multi_req req = {0};
    int i = parse_keys(ctx, argv, argc, 1, &req);
    if (i == 0) return REDISMODULE_OK;
    if (argc != i + 1) return RedisModule_WrongArity(ctx);
    if (parse_owner(ctx, argv[i], &req) != 0) return REDISMODULE_OK;
    RedisModuleKey *keys[MAX_MULTI_KEYS];
    if (open_all(ctx, &req, REDISMODULE_READ | REDISMODULE_WRITE, keys) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    uint64_t now_ms = mc_now_ms();
    int left[MAX_MULTI_KEYS];
    for (int k = 0; k < req.nkeys; k++) {
        lock_expire_leases(ctx, keys[k], req.keys[k], now_ms);
        lockv *l = value_of(keys[k]);
        int h = l ? lock_find(l, req.lock.owner, req.lock.owner_len) : -1;
        left[k] = -1;
        if (h < 0) continue;
        uint64_t client_id = l->holders[h].client_id, granted_ms = l->holders[h].granted_ms;
        left[k] = lock_release(l, req.lock.owner, req.lock.owner_len);
        if (left[k] == 0) lock_note_hold(granted_ms, now_ms);
        if (left[k] == 0 && client_id) session_drop(ctx, client_id, req.keys[k], req.lock.owner, req.lock.owner_len);
        /* the state, not the command: its replay needs no clock and no lease end of its own */
        lock_commit(ctx, keys[k], req.keys[k], l, now_ms);
    }
    close_all(keys, req.nkeys);
    RedisModule_ReplyWithArray(ctx, req.nkeys);
    for (int k = 0; k < req.nkeys; k++) {
        if (left[k] == 0) waitq_kick(ctx, req.keys[k]);
        RedisModule_ReplyWithLongLong(ctx, left[k]);
    }
    return REDISMODULE_OK;
}

/* LOCK.EXTEND_ALL <numkeys> <key> [<key> ...] <owner> <lease ms>
 * Renews <owner>'s lease on every key to end <lease ms> from now, all or none.
 * Reply: the lease in ms; an error, changing nothing, when <owner> does not
 * hold every key. */
static int ExtendAll_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_IsKeysPositionRequest(ctx)) return key_positions(ctx, argv, argc);
    multi_req req = {0};
    int i = parse_keys(ctx, argv, argc, 2, &req);
    if (i == 0) return REDISMODULE_OK;
    if (argc != i + 2) return RedisModule_WrongArity(ctx);
    if (parse_owner(ctx, argv[i], &req) != 0) return REDISMODULE_OK;
    uint64_t lease;
    if (mc_parse_u64(argv[i + 1], 1, LOCK_MAX_LEASE_MS, &lease))
        return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    RedisModuleKey *keys[MAX_MULTI_KEYS];
    if (open_all(ctx, &req, REDISMODULE_READ | REDISMODULE_WRITE, keys) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    uint64_t now_ms = mc_now_ms();
    int all = 1;
    for (int k = 0; k < req.nkeys && all; k++) {
        const lockv *l = value_of(keys[k]);
        int h = l ? lock_find(l, req.lock.owner, req.lock.owner_len) : -1;
        all = h >= 0 && l->holders[h].expires_ms > now_ms;
    }
    if (all) {
        for (int k = 0; k < req.nkeys; k++) {
            lock_expire_leases(ctx, keys[k], req.keys[k], now_ms);
            lockv *l = value_of(keys[k]);
            lock_extend(l, req.lock.owner, req.lock.owner_len, now_ms, lease);
            lock_commit(ctx, keys[k], req.keys[k], l, now_ms);
        }
    }
    close_all(keys, req.nkeys);
    if (!all) return RedisModule_ReplyWithError(ctx, ERR_NOT_OWNER_ALL);
    return RedisModule_ReplyWithLongLong(ctx, (long long)lease);
}

/* ==== Registration ==== */

static const mc_command commands[] = {
    {"LOCK.ACQUIRE_ALL", AcquireAll_RedisCommand, "write deny-oom getkeys-api", 2, -1, 1},
    {"LOCK.RELEASE_ALL", ReleaseAll_RedisCommand, "write getkeys-api", 2, -1, 1},
    {"LOCK.EXTEND_ALL", ExtendAll_RedisCommand, "write deny-oom getkeys-api", 2, -1, 1},
};

const waitq_ops *lock_multi_waitq_ops(void) {
    return &multi_wait_ops;
}

int lock_multi_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), lock_cmdinfo);
}
