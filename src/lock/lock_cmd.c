/* SPDX-License-Identifier: BSD-3-Clause */
/* lock_cmd.c -- leased locks done on the server: the LOCK.* commands.
 *
 *   LOCK.ACQUIRE key owner lease-ms [PERMITS n [TAKE k] | READ | WRITE] [REENTRANT] [SESSION]
 *                [LOCKDELAY delay-ms] [WAIT timeout-ms | ACKS numreplicas timeout-ms]
 *   LOCK.RELEASE key owner       LOCK.EXTEND key owner lease-ms
 *   LOCK.INSPECT key [FULL]      (inspect.c)
 *   LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS, LOCK.AVAILABLE_PERMITS   (pool_cmd.c)
 *   LOCK.STATE key ...           internal: replication and AOF
 *
 *   RL.CONCURRENCY key holder lease-ms limit [WAIT timeout-ms]
 *   RL.CONCURRENCY_RELEASE key holder      (the rate-limit family's concurrency
 *                                           limit, built on the locks)
 *
 * Grants carry a fencing token (core/lock.h, fencing.c). Waiters queue first
 * come first served without polling (acquire.c on server/waitq.c): a release, an
 * expiry or a disconnect serves the head of the queue. Leases end on time
 * (leases.c): a module timer per held lock removes ended leases when they end
 * (and replicates that), not only when the key is next touched. SESSION ties a
 * holder to its connection (sessions.c): when the connection closes, its permits
 * are released at once (the lease stays the fallback, e.g. after a failover,
 * where the new primary never sees the disconnect).
 *
 * Every change replicates the lock's whole resulting state (state.c: LOCK.STATE, absolute
 * lease ends), never the clock-reading command, so a replica or an AOF replay
 * holds exactly what the primary held. Lock keys have no TTL: an unheld lock
 * keeps its last fencing token (a few dozen bytes) until someone deletes it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lock/acquire.h"
#include "lock/fencing.h"
#include "lock/inspect.h"
#include "lock/leases.h"
#include "lock/multi.h"
#include "lock/sessions.h"
#include "lock/state.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/internal.h"
#include "server/waitq.h"

#define ERR_NOT_OWNER "ERR the lock is not held by this owner"
#define MAX_ACKS 1000
#define LOCK_ACQUIRE_OPTIONS \
    "PERMITS n, TAKE k, READ, WRITE, REENTRANT, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms, " \
    "ACKS numreplicas timeout-ms"

/* ==== Commands ==== */

/* LOCK.ACQUIRE <key> <owner> <lease ms> [PERMITS <n> [TAKE <k>] | READ | WRITE] [REENTRANT] [SESSION]
 *              [LOCKDELAY <delay ms>] [WAIT <timeout ms> | ACKS <numreplicas> <timeout ms>]
 * Reply: [1, fencing token, lease ms] when granted; [0, -1, ms until the earliest
 * lease ends (-1 if unknown)] when not. With WAIT the caller blocks, first come
 * first served, until granted or the timeout (then refused as above). SESSION is
 * refused inside scripts (EVAL/FCALL); MULTI/EXEC keeps the caller's connection.
 * LOCKDELAY: if this grant's hold ends without a release (lease end, session
 * closed), its permit stays taken by nobody for <delay ms> more (core/lock.h).
 * READ: a shared hold of a read-write lock (many readers, or one writer); WRITE
 * (the default) an exclusive one; neither goes with PERMITS n > 1. TAKE: this
 * grant takes k of the semaphore's n permits at once (all or none). ACKS: a
 * grant is answered once <numreplicas> replicas acknowledged it; else, after
 * <timeout ms>, it is taken back and the reply is NOREPLICAS (acks.c). */
static int LockAcquire_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4) return RedisModule_WrongArity(ctx);
    lock_req req = {0};
    uint64_t wait_ms = 0;
    int session = 0;
    const char *owner = RedisModule_StringPtrLen(argv[2], &req.owner_len);
    if (req.owner_len == 0 || req.owner_len > LOCK_MAX_OWNER_BYTES)
        return RedisModule_ReplyWithError(ctx, "ERR owner must be 1 to 256 bytes");
    if (mc_parse_u64(argv[3], 1, LOCK_MAX_LEASE_MS, &req.lease_ms)) return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    req.permits = 1;
    int has_permits = 0, has_mode = 0, has_wait = 0;
    for (int i = 4; i < argc; i++) {
        size_t wl; /* one look at the option word, compared with each name */
        const char *w = RedisModule_StringPtrLen(argv[i], &wl);
        if (mc_word_eq(w, wl, "READ") || mc_word_eq(w, wl, "WRITE")) {
            req.shared = mc_word_eq(w, wl, "READ");
            has_mode = 1;
        } else if (mc_word_eq(w, wl, "REENTRANT")) {
            req.reentrant = 1;
        } else if (mc_word_eq(w, wl, "SESSION")) {
            session = 1;
        } else if (mc_word_eq(w, wl, "PERMITS")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "PERMITS", "n");
            if (mc_parse_u64(argv[++i], 1, LOCK_MAX_PERMITS, &req.permits)) return mc_reply_range(ctx, "PERMITS", 1, LOCK_MAX_PERMITS);
            has_permits = req.permits > 1;
        } else if (mc_word_eq(w, wl, "TAKE")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "TAKE", "k");
            if (mc_parse_u64(argv[++i], 1, LOCK_MAX_PERMITS, &req.weight)) return mc_reply_range(ctx, "TAKE", 1, LOCK_MAX_PERMITS);
        } else if (mc_word_eq(w, wl, "LOCKDELAY")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "LOCKDELAY", "delay-ms");
            if (mc_parse_u64(argv[++i], 0, LOCK_MAX_LEASE_MS, &req.delay_ms))
                return mc_reply_range(ctx, "LOCKDELAY", 0, LOCK_MAX_LEASE_MS);
        } else if (mc_word_eq(w, wl, "WAIT")) {
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "WAIT", "timeout-ms");
            if (mc_parse_u64(argv[++i], 0, 1ULL << 40, &wait_ms)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40);
            has_wait = 1;
        } else if (mc_word_eq(w, wl, "ACKS")) {
            uint64_t n;
            if (i + 2 >= argc) return mc_reply_needs_value(ctx, "ACKS", "numreplicas timeout-ms");
            if (mc_parse_u64(argv[++i], 1, MAX_ACKS, &n)) return mc_reply_range(ctx, "ACKS numreplicas", 1, MAX_ACKS);
            if (mc_parse_u64(argv[++i], 1, 1ULL << 40, &req.acks_timeout_ms))
                return mc_reply_range(ctx, "ACKS timeout", 1, 1ULL << 40);
            req.acks = (long long)n;
        } else {
            return mc_reply_unknown_option(ctx, "LOCK.ACQUIRE", argv[i], LOCK_ACQUIRE_OPTIONS);
        }
    }
    if (has_mode && has_permits)
        return RedisModule_ReplyWithError(ctx, "ERR READ and WRITE are for a read-write lock, of one permit: not "
                                               "with PERMITS n > 1");
    if (req.weight > req.permits)
        return RedisModule_ReplyWithError(ctx, "ERR TAKE k must not exceed PERMITS n (a grant could never fit)");
    if (req.acks && has_wait)
        return RedisModule_ReplyWithError(ctx, "ERR ACKS does not go with WAIT: acquire with WAIT, then call WAIT "
                                               "numreplicas timeout-ms");
    if (req.acks && !waitq_can_block(ctx))
        return RedisModule_ReplyWithError(ctx, "ERR ACKS cannot wait here (MULTI, scripts, replication or AOF "
                                               "loading): call WAIT numreplicas timeout-ms after the grant");
    if (session) {
        /* A script runs on the server's own script client, which never
         * disconnects: a session bound to it would never end. */
        if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LUA)
            return RedisModule_ReplyWithError(ctx, "ERR SESSION is not allowed in scripts (EVAL, FCALL): a script's "
                                                   "client never disconnects; call LOCK.ACQUIRE ... SESSION directly");
        req.client_id = RedisModule_GetClientId(ctx);
    }
    req.owner = (char *)owner;
    return lock_acquire_flow(ctx, argv[1], &req, wait_ms);
}

/* Release `argv[2]`'s hold on the lock at `argv[1]`: one acquisition, or all
 * of them with `all` (a concurrency slot). Returns the acquisitions still held
 * (0: the permit is free and the next waiter is served), -1 when the owner
 * held nothing, -2 after replying WRONGTYPE. */
static int release_hold(RedisModuleCtx *ctx, RedisModuleString **argv, int all) {
    RedisModuleKey *key;
    if (lock_open_kind(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, all, &key) != 0) {
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return -2;
    }
    uint64_t now_ms = mc_now_ms();
    int flags = RedisModule_GetContextFlags(ctx);
    /* The leases that ended go first (replicated as state); the release itself
     * depends on nothing else, so it replicates as called, and its replay ends
     * no lease by its own clock. */
    if (!lock_replayed(flags)) lock_expire_leases(ctx, key, argv[1], now_ms);
    size_t len;
    const char *owner = RedisModule_StringPtrLen(argv[2], &len);
    int left = -1;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        lockv *l = RedisModule_ModuleTypeGetValue(key);
        int h = lock_find(l, owner, len);
        if (h >= 0) {
            if (all) l->holders[h].count = 1;
            uint64_t granted_ms = l->holders[h].granted_ms;
            left = lock_release(l, owner, len);
            if (left == 0) lock_note_hold(granted_ms, now_ms); /* its SESSION entry goes at the commit */
            lock_commit_verbatim(ctx, key, argv[1], l, now_ms, flags);
        }
    }
    RedisModule_CloseKey(key);
    if (left == 0) waitq_kick(ctx, argv[1]);
    return left;
}

/* LOCK.RELEASE <key> <owner>
 * Reply: the acquisitions <owner> still holds (0: released; the next waiter is
 * served). Anyone else gets an error and changes nothing. */
static int LockRelease_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    int left = release_hold(ctx, argv, 0);
    if (left == -2) return REDISMODULE_OK;
    if (left == -1) return RedisModule_ReplyWithError(ctx, ERR_NOT_OWNER);
    return RedisModule_ReplyWithLongLong(ctx, left);
}

/* LOCK.EXTEND <key> <owner> <lease ms>
 * Renews <owner>'s lease to end <lease ms> from now. Reply: the lease in ms.
 * Anyone else gets an error and changes nothing. */
static int LockExtend_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    uint64_t lease;
    if (mc_parse_u64(argv[3], 1, LOCK_MAX_LEASE_MS, &lease)) return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    RedisModuleKey *key;
    if (lock_open_kind(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, 0, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    uint64_t now_ms = mc_now_ms();
    lock_expire_leases(ctx, key, argv[1], now_ms);
    size_t len;
    const char *owner = RedisModule_StringPtrLen(argv[2], &len);
    lockv *l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
    if (l == NULL || lock_extend(l, owner, len, now_ms, lease) != 0) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, ERR_NOT_OWNER);
    }
    lock_commit(ctx, key, argv[1], l, now_ms);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, (long long)lease);
}

/* LOCK.STATE <key> <permits> <last token> <nholders> [<owner> <lease end unix ms> <count> <token>]...
 *            [DELAY <holder index> <delay ms>]... [SHARED <holder index>]... [TAKE <holder index> <k>]...
 *            [ADJUST <a>] [EPHEMERAL]
 * Internal (replication, AOF; server/internal.h): replaces <key>'s value with exactly this
 * lock state, keeping the key's TTL (as the lock command it replicates did on the primary). */
static int LockState_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (!mc_internal_allowed_or_reply(ctx, CMD_LOCK_STATE)) return REDISMODULE_OK;
    if (argc < 5) return RedisModule_WrongArity(ctx);
    const char *err;
    lockv *l = lock_from_args(argv + 2, argc - 2, &err);
    if (l == NULL) {
        char buf[256];
        snprintf(buf, sizeof(buf), "ERR invalid lock state: %s", err);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    RedisModuleKey *key;
    if (lock_open(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) {
        lock_free(l);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    /* Setting a value drops the key's TTL; LOCK.STATE updates a lock in place,
     * as the command it stands for did on the primary: keep the TTL. */
    mstime_t expire_at = RedisModule_GetAbsExpire(key);
    RedisModule_ModuleTypeSetValue(key, LockType, l);
    if (expire_at != REDISMODULE_NO_EXPIRE) RedisModule_SetAbsExpire(key, expire_at);
    fencing_saw(l->last_token);
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE)
        lease_track(ctx, argv[1], l); /* a replica ends nothing itself, but remembers for a promotion */
    else
        lease_arm(ctx, argv[1], l, mc_now_ms());
    RedisModule_CloseKey(key);
    RedisModule_SignalModifiedKey(ctx, argv[1]); /* a write signals its key (module.c) */
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* ==== The concurrency limit of the rate-limit family ==== */

/* RL.CONCURRENCY <key> <holder> <lease ms> <limit> [WAIT <timeout ms>]
 * At most <limit> holders at once; each slot is freed by RL.CONCURRENCY_RELEASE
 * or when its lease ends (a crashed holder cannot keep it). Reply: [allowed,
 * remaining, retry_after_ms (-1 when allowed; else until the earliest lease
 * ends), reset_after_ms (until every lease has ended)]. The key is deleted once
 * nobody holds it. */
static int Concurrency_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    lock_req req = {.ephemeral = 1, .rl_style = 1};
    uint64_t wait_ms = 0;
    req.owner = (char *)RedisModule_StringPtrLen(argv[2], &req.owner_len);
    if (req.owner_len == 0 || req.owner_len > LOCK_MAX_OWNER_BYTES)
        return RedisModule_ReplyWithError(ctx, "ERR holder must be 1 to 256 bytes");
    if (mc_parse_u64(argv[3], 1, LOCK_MAX_LEASE_MS, &req.lease_ms))
        return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    if (mc_parse_u64(argv[4], 1, LOCK_MAX_PERMITS, &req.permits)) return mc_reply_range(ctx, "limit", 1, LOCK_MAX_PERMITS);
    for (int i = 5; i < argc; i++) {
        if (!mc_is_word(argv[i], "WAIT")) return mc_reply_unknown_option(ctx, "RL.CONCURRENCY", argv[i], "WAIT timeout-ms");
        if (i + 1 >= argc) return mc_reply_needs_value(ctx, "WAIT", "timeout-ms");
        if (mc_parse_u64(argv[++i], 0, 1ULL << 40, &wait_ms)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40);
    }
    return lock_acquire_flow(ctx, argv[1], &req, wait_ms);
}

/* RL.CONCURRENCY_RELEASE <key> <holder>
 * Frees <holder>'s slot. Reply: 1, or 0 when it held none (e.g. its lease had
 * ended). The longest waiter gets the slot. */
static int ConcurrencyRelease_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    int left = release_hold(ctx, argv, 1);
    if (left == -2) return REDISMODULE_OK;
    return RedisModule_ReplyWithLongLong(ctx, left == 0 ? 1 : 0);
}

/* ==== Registration ==== */

static const mc_command commands[] = {
    {"LOCK.ACQUIRE", LockAcquire_RedisCommand, "write deny-oom", 1, 1, 1},
    {"LOCK.RELEASE", LockRelease_RedisCommand, "write fast", 1, 1, 1},
    {"LOCK.EXTEND", LockExtend_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"LOCK.INSPECT", lock_inspect_command, "readonly fast", 1, 1, 1},
    {CMD_LOCK_STATE, LockState_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.CONCURRENCY", Concurrency_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.CONCURRENCY_RELEASE", ConcurrencyRelease_RedisCommand, "write fast", 1, 1, 1},
};

/* ==== INFO ==== */

void lock_info(RedisModuleInfoCtx *ctx) {
    RedisModule_InfoAddSection(ctx, "locks");
    RedisModule_InfoAddFieldLongLong(ctx, "grants", lock_stats.grants);
    RedisModule_InfoAddFieldLongLong(ctx, "waits", lock_stats.waits);
    RedisModule_InfoAddFieldLongLong(ctx, "timeouts", lock_stats.timeouts);
    RedisModule_InfoAddFieldLongLong(ctx, "leases_expired_while_held", lock_stats.expired);
    RedisModule_InfoAddFieldLongLong(ctx, "waiters", lock_stats.waiting);
    RedisModule_InfoAddFieldLongLong(ctx, "max_queue_length", lock_max_queue_length());
    leases_stats ls;
    leases_counters(&ls);
    RedisModule_InfoAddFieldLongLong(ctx, "lease_timers", ls.tracked);
    RedisModule_InfoAddFieldLongLong(ctx, "leases_moved_pending", ls.pending + ls.lost);
    RedisModule_InfoAddFieldLongLong(ctx, "lease_keys_scanned", ls.keys_scanned);
    RedisModule_InfoAddFieldLongLong(ctx, "lease_renames_followed", ls.renames_followed);
    RedisModule_InfoAddFieldLongLong(ctx, "leases_paused", ls.paused);
    RedisModule_InfoAddFieldLongLong(ctx, "lease_pause_wakeups", ls.pause_wakeups);
    RedisModule_InfoAddFieldLongLong(ctx, "session_entries", sessions_entries());
    const struct {
        const char *name;
        const histogram *h;
    } hists[] = {{"wait", &lock_wait_hist}, {"hold", &lock_hold_hist}};
    for (size_t i = 0; i < sizeof(hists) / sizeof(hists[0]); i++) {
        char field[32];
        snprintf(field, sizeof(field), "%s_samples", hists[i].name);
        RedisModule_InfoAddFieldULongLong(ctx, field, hists[i].h->total);
        snprintf(field, sizeof(field), "%s_ms_p50", hists[i].name);
        RedisModule_InfoAddFieldULongLong(ctx, field, hist_percentile(hists[i].h, 500));
        snprintf(field, sizeof(field), "%s_ms_p99", hists[i].name);
        RedisModule_InfoAddFieldULongLong(ctx, field, hist_percentile(hists[i].h, 990));
        snprintf(field, sizeof(field), "%s_ms_max", hists[i].name);
        RedisModule_InfoAddFieldULongLong(ctx, field, hists[i].h->max);
    }
}

int lock_cmd_register(RedisModuleCtx *ctx) {
    fencing_promoted(mc_now_us()); /* a start may follow an unpersisted promotion (fencing.h) */
    if (leases_init(ctx, lock_expire_leases) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (sessions_init(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_pool_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_multi_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR; /* LOCK.*_ALL (multi.c) */
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), lock_cmdinfo);
}
