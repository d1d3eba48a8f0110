/* leases.c -- lease timers, replica tracking, locks arriving by load, and the
 * promotion of a replica; see leases.h. */
#include "lock/leases.h"

#include <string.h>

#include "lock/fencing.h"
#include "server/clock.h"
#include "server/cluster.h"
#include "server/keys.h"
#include "server/waitq.h"

static RedisModuleCtx *detached; /* to create timers from callbacks that have no context */
static lease_end_fn end_leases;  /* state.c's lock_expire_leases */

typedef struct lease_timer {
    int db;
    RedisModuleString *key;
    RedisModuleString *id;
    RedisModuleTimerID timer;
    int armed;      /* never StopTimer the timer whose callback is running: Redis frees it after */
    uint64_t due_ms; /* when the armed timer fires (Unix ms) */
} lease_timer;

static RedisModuleDict *lease_timers; /* "<db>:<key>" -> lease_timer */

static void lease_timer_fired(RedisModuleCtx *ctx, void *data);

/* Drop entry `t`: stop its timer when armed (never the one whose callback runs:
 * that one is not armed), take it out of the dict, free it. */
static void forget(RedisModuleCtx *ctx, lease_timer *t) {
    if (t->armed) RedisModule_StopTimer(ctx, t->timer, NULL);
    RedisModule_DictDel(lease_timers, t->id, NULL);
    RedisModule_FreeString(NULL, t->key);
    RedisModule_FreeString(NULL, t->id);
    RedisModule_Free(t);
}

/* A timer that fires early re-arms itself. */
void lease_arm(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l, uint64_t now_ms) {
    int db = RedisModule_GetSelectedDb(ctx);
    char stackbuf[128];
    size_t idlen;
    char *idbuf = mc_db_key_buf(db, keyname, stackbuf, sizeof(stackbuf), &idlen);
    lease_timer *t = RedisModule_DictGetC(lease_timers, idbuf, idlen, NULL);
    uint64_t next = l ? lock_next_expiry(l) : 0;
    if (next == 0) {
        /* Nobody holds it: the entry goes now (a timer that is firing is not
         * armed, so stopping an armed one never frees a running callback's). */
        if (t) forget(ctx, t);
    } else if (!(t && t->armed && t->due_ms <= next)) {
        if (t == NULL) {
            t = RedisModule_Calloc(1, sizeof(*t));
            t->db = db;
            t->key = RedisModule_CreateStringFromString(NULL, keyname);
            t->id = RedisModule_CreateString(NULL, idbuf, idlen);
            RedisModule_DictSetC(lease_timers, idbuf, idlen, t);
        } else if (t->armed) {
            RedisModule_StopTimer(ctx, t->timer, NULL);
        }
        t->timer = RedisModule_CreateTimer(ctx, (mstime_t)(next > now_ms ? next - now_ms : 0), lease_timer_fired, t);
        t->armed = 1;
        t->due_ms = next;
    }
    if (idbuf != stackbuf) RedisModule_Free(idbuf);
}

static void lease_timer_fired(RedisModuleCtx *ctx, void *data) {
    lease_timer *t = data;
    t->armed = 0; /* this timer is firing */
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_READONLY))
        return; /* the primary replicates expiries; keep tracking for a promotion */
    uint64_t now_ms = mc_now_ms();
    int saved = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, t->db);
    RedisModuleString *keyname = RedisModule_CreateStringFromString(NULL, t->key);
    if (RedisModule_AvoidReplicaTraffic()) {
        /* Clients paused for writes: no writes now; try again shortly. */
        t->timer = RedisModule_CreateTimer(ctx, 10, lease_timer_fired, t);
        t->armed = 1;
        t->due_ms = now_ms + 10;
    } else {
        RedisModuleKey *key;
        lockv *l = NULL;
        if (mc_open_typed(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, LockType, &key) == 0) {
            end_leases(ctx, key, keyname, now_ms);
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) l = RedisModule_ModuleTypeGetValue(key);
            lease_arm(ctx, keyname, l, now_ms); /* may free t */
            RedisModule_CloseKey(key);
        } else {
            lease_arm(ctx, keyname, NULL, now_ms);
        }
    }
    RedisModule_FreeString(NULL, keyname);
    RedisModule_SelectDb(ctx, saved);
}

void lease_track(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l) {
    int db = RedisModule_GetSelectedDb(ctx);
    RedisModuleString *id = mc_db_key_id(db, keyname);
    lease_timer *t = RedisModule_DictGet(lease_timers, id, NULL);
    if (l && l->nholders && t == NULL) {
        t = RedisModule_Calloc(1, sizeof(*t));
        t->db = db;
        t->key = RedisModule_CreateStringFromString(NULL, keyname);
        t->id = id;
        RedisModule_DictSet(lease_timers, id, t);
        return;
    }
    if ((l == NULL || l->nholders == 0) && t && !t->armed) {
        RedisModule_DictDel(lease_timers, id, NULL);
        RedisModule_FreeString(NULL, t->key);
        RedisModule_FreeString(NULL, t->id);
        RedisModule_Free(t);
    }
    RedisModule_FreeString(NULL, id);
}

/* Locks that arrived by RDB load, RESTORE or COPY, waiting for their timers. */
typedef struct loaded_lock {
    int db;
    RedisModuleString *key;
    struct loaded_lock *next;
} loaded_lock;

static loaded_lock *loaded;
static int loaded_timer_armed;

static void arm_or_track(RedisModuleCtx *ctx, int db, RedisModuleString *keyname);

/* Key events (generic, expired, evicted). A key that went (deleted, expired,
 * evicted, renamed or moved away) drops its lease entry and, outside a cluster,
 * serves its wait queue at once (the head waiter may take the now-free lock);
 * a key that
 * arrived (renamed, moved or copied here) gets its lease timer armed (or, on a
 * replica, tracked) under its new name and db. */
static int arriving; /* a held lock just left by RENAME/MOVE: its "_to" event comes next */

static int on_key_event(RedisModuleCtx *ctx, int type, const char *event, RedisModuleString *keyname) {
    (void)type;
    /* The common case, and all an unrelated DEL pays: no held lock, no lock
     * waiting for its timer, nobody waiting on any key. */
    if (RedisModule_DictSize(lease_timers) == 0 && loaded == NULL && waitq_total() == 0 && !arriving)
        return REDISMODULE_OK;
    if (strcmp(event, "rename_to") == 0 || strcmp(event, "move_to") == 0 || strcmp(event, "copy_to") == 0) {
        arriving = 0;
        arm_or_track(ctx, -1, keyname);
        return REDISMODULE_OK;
    }
    if (strcmp(event, "del") != 0 && strcmp(event, "expired") != 0 && strcmp(event, "evicted") != 0 &&
        strcmp(event, "rename_from") != 0 && strcmp(event, "move_from") != 0)
        return REDISMODULE_OK;
    /* Serve the key's waiters now (cheap when nobody waits anywhere). Not in a
     * cluster: there MIGRATE deletes the key while its slot is still this
     * node's, and a waiter served then would write into a slot being moved;
     * waiters there are served at the lease end (or get TRYAGAIN). */
    if (!mc_cluster_enabled) waitq_kick(ctx, keyname);
    if (RedisModule_DictSize(lease_timers) == 0) return REDISMODULE_OK;
    char stackbuf[128];
    size_t idlen;
    char *idbuf = mc_db_key_buf(RedisModule_GetSelectedDb(ctx), keyname, stackbuf, sizeof(stackbuf), &idlen);
    lease_timer *t = RedisModule_DictGetC(lease_timers, idbuf, idlen, NULL);
    if (t) {
        forget(ctx, t);
        /* A renamed or moved key's lease continues under the name of the
         * "_to" event that follows at once. */
        if (event[0] == 'r' || event[0] == 'm') arriving = 1;
    }
    if (idbuf != stackbuf) RedisModule_Free(idbuf);
    return REDISMODULE_OK;
}

/* FLUSHDB / FLUSHALL: the entries of the flushed db(s) go (no per-key events). */
static void on_flush(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    if (sub != REDISMODULE_SUBEVENT_FLUSHDB_END) return;
    int dbnum = ((RedisModuleFlushInfo *)data)->dbnum; /* -1: every db */
    size_t n = 0, cap = 16;
    lease_timer **todo = RedisModule_Alloc(cap * sizeof(*todo));
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(lease_timers, "^", NULL, 0);
    lease_timer *t;
    while (RedisModule_DictNextC(it, NULL, (void **)&t)) {
        if (dbnum != -1 && t->db != dbnum) continue;
        if (n == cap) todo = RedisModule_Realloc(todo, (cap *= 2) * sizeof(*todo));
        todo[n++] = t;
    }
    RedisModule_DictIteratorStop(it);
    for (size_t i = 0; i < n; i++) forget(ctx, todo[i]);
    RedisModule_Free(todo);
    waitq_kick_db(ctx, dbnum); /* the flushed locks' waiters get them at once */
}

/* Arm (primary) or track (replica) the lease timer of the lock at db/key. */
static void arm_or_track(RedisModuleCtx *ctx, int db, RedisModuleString *keyname) {
    int saved = RedisModule_GetSelectedDb(ctx);
    if (db >= 0) RedisModule_SelectDb(ctx, db);
    RedisModuleKey *key;
    if (mc_open_typed(ctx, keyname, REDISMODULE_READ, LockType, &key) == 0) {
        lockv *l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
        if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) lease_track(ctx, keyname, l);
        else lease_arm(ctx, keyname, l, mc_now_ms());
        RedisModule_CloseKey(key);
    }
    RedisModule_SelectDb(ctx, saved);
}


static void arm_loaded(RedisModuleCtx *ctx, void *data) {
    (void)data;
    loaded_timer_armed = 0;
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LOADING) {
        loaded_timer_armed = 1; /* still loading: later */
        RedisModule_CreateTimer(ctx, 10, arm_loaded, NULL);
        return;
    }
    while (loaded) {
        loaded_lock *p = loaded;
        loaded = p->next;
        arm_or_track(ctx, p->db, p->key);
        RedisModule_FreeString(NULL, p->key);
        RedisModule_Free(p);
    }
}

/* The lock type's load hook: a lock value arrived without a command (RDB load,
 * RESTORE, COPY; db -1 when not known, key may be NULL). Raise the token floor
 * past its tokens and arm its lease timer soon. */
static void lock_loaded(const lockv *l, int db, const RedisModuleString *key) {
    fencing_saw(l->last_token);
    if (key == NULL || l->nholders == 0 || detached == NULL) return;
    loaded_lock *p = RedisModule_Alloc(sizeof(*p));
    p->db = db;
    p->key = RedisModule_CreateStringFromString(NULL, key);
    p->next = loaded;
    loaded = p;
    if (!loaded_timer_armed) {
        loaded_timer_armed = 1;
        RedisModule_CreateTimer(detached, 0, arm_loaded, NULL);
    }
}

static void on_role_change(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)data;
    if (sub != REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER) return;
    /* Grants the old primary made but never replicated may have used tokens up
     * to its clock: issue tokens from well beyond ours. */
    fencing_promoted(mc_now_us());
    /* The leases this node tracked as a replica now end by its own timers. */
    size_t n = 0, cap = 16;
    lease_timer **todo = RedisModule_Alloc(cap * sizeof(*todo));
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(lease_timers, "^", NULL, 0);
    lease_timer *t;
    while (RedisModule_DictNextC(it, NULL, (void **)&t)) {
        if (t->armed) continue;
        if (n == cap) todo = RedisModule_Realloc(todo, (cap *= 2) * sizeof(*todo));
        todo[n++] = t;
    }
    RedisModule_DictIteratorStop(it);
    for (size_t i = 0; i < n; i++) {
        RedisModuleString *keyname = RedisModule_CreateStringFromString(NULL, todo[i]->key);
        arm_or_track(ctx, todo[i]->db, keyname); /* may free todo[i] */
        RedisModule_FreeString(NULL, keyname);
    }
    RedisModule_Free(todo);
}

int leases_init(RedisModuleCtx *ctx, lease_end_fn on_end) {
    end_leases = on_end;
    lease_timers = RedisModule_CreateDict(NULL);
    detached = RedisModule_GetDetachedThreadSafeContext(ctx);
    lock_load_hook = lock_loaded;
    if (RedisModule_SubscribeToKeyspaceEvents(
            ctx, REDISMODULE_NOTIFY_GENERIC | REDISMODULE_NOTIFY_EXPIRED | REDISMODULE_NOTIFY_EVICTED, on_key_event) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_FlushDB, on_flush) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ReplicationRoleChanged, on_role_change);
}
