/* SPDX-License-Identifier: BSD-3-Clause */
/* leases.c -- lease timers, replica tracking, locks that arrive or move without
 * a command, and the promotion of a replica; see leases.h.
 *
 * A held lock value points to its lease timer (lockv.lease) and the timer
 * remembers where the value lives (db, key) and which value it is (a pointer
 * used only to recognise the value, never followed unless the value was just
 * found in the keyspace). No keyspace-event subscription: the lock type's own
 * callbacks say when a value leaves a key (unlink: deleted, expired, evicted,
 * overwritten, renamed or moved away), is freed, is copied or loaded. A value
 * that left its key while held, arrived by load or COPY, or was not found where
 * its timer expected it goes on the `pending` list; just after the command
 * (a 0 ms timer) each is looked for under its last known name, then, when it
 * moved (RENAME, MOVE: rare), by a scan of every database, and armed where it
 * is found. SWAPDB and FLUSHDB/FLUSHALL come as server events.
 *
 * Opening a key can delete it (a key whose TTL passed expires on lookup), which
 * runs the type's unlink and free callbacks, and so forget() and the pending
 * list's bookkeeping, in the middle of whatever looked. Every entry in use
 * across a lookup is held (hold/release: forget then only marks it dead), and
 * the pending list being drained is detached first (a freed value's entries are
 * only marked). */
#include "lock/leases.h"

#include <pthread.h>
#include <string.h>

#include "lock/fencing.h"
#include "server/clock.h"
#include "server/waitq.h"

static RedisModuleCtx *detached; /* to create timers from callbacks that have no context */
static lease_end_fn end_leases;  /* state.c's lock_expire_leases */
static pthread_t main_thread;    /* values freed elsewhere (async flush) are not tracked here */

typedef struct lease_timer {
    int db;
    RedisModuleString *key;
    const lockv *value; /* identity only */
    RedisModuleTimerID timer;
    int armed;   /* never StopTimer the timer whose callback is running: Redis frees it after */
    int busy;    /* holds (see hold): while > 0, forget() only marks it dead */
    int dead;    /* forgotten while held: freed by the last release */
    uint64_t due_ms; /* when the armed timer fires (Unix ms) */
    struct lease_timer *prev, *next;
} lease_timer;

static lease_timer *timers; /* every entry, armed (primary) or tracked (replica) */
static long long ntimers;

/* A held lock value to be found and armed just after the current command. */
typedef struct pending {
    int db; /* where it was last seen; -1: not known */
    RedisModuleString *key;
    const lockv *value; /* identity only; NULL once settled or freed */
    struct lease_timer *t; /* held: the value's entry, still pointed to by the value; or NULL */
    struct pending *next;
} pending;

static pending *pendings; /* waiting for the next drain */
static pending *draining; /* the list a drain is working on */
static int pending_timer_armed;

static void lease_timer_fired(RedisModuleCtx *ctx, void *data);
static void process_pending(RedisModuleCtx *ctx, void *data);

static int on_main_thread(void) {
    return pthread_equal(pthread_self(), main_thread);
}

/* Drop entry `t` (its value's lease pointer is the caller's business): stop its
 * timer when armed, unlink and free it; while it is held, only mark it dead
 * (the last release frees it). */
static void forget(lease_timer *t) {
    if (t->armed) RedisModule_StopTimer(detached, t->timer, NULL);
    t->armed = 0;
    if (t->busy) {
        t->dead = 1;
        return;
    }
    if (t->prev) t->prev->next = t->next; else timers = t->next;
    if (t->next) t->next->prev = t->prev;
    ntimers--;
    RedisModule_FreeString(NULL, t->key);
    RedisModule_Free(t);
}

/* Keep `t` allocated across something that may forget it (a key lookup that
 * expires its key, a lease-end commit). */
static void hold(lease_timer *t) {
    t->busy++;
}

/* Drop a hold; returns 1 when `t` was forgotten meanwhile (then freed by the
 * last release: do not use it after). */
static int release(lease_timer *t) {
    int dead = t->dead;
    if (--t->busy == 0 && dead) forget(t);
    return dead;
}

/* The entries (not dead) of db `db` (-1: all), each held; *n of them. Free
 * with release_all. */
static lease_timer **hold_all(int db, size_t *n) {
    size_t cap = 16;
    lease_timer **v = RedisModule_Alloc(cap * sizeof(*v));
    *n = 0;
    for (lease_timer *t = timers; t; t = t->next) {
        if (t->dead || (db != -1 && t->db != db)) continue;
        if (*n == cap) v = RedisModule_Realloc(v, (cap *= 2) * sizeof(*v));
        hold(t);
        v[(*n)++] = t;
    }
    return v;
}

static void release_all(lease_timer **v, size_t n) {
    for (size_t i = 0; i < n; i++) release(v[i]);
    RedisModule_Free(v);
}

/* Queue `value` (held, last seen at db/key) to be found and armed after the
 * command. `t`: the value's own entry when the value may still point to it (it
 * is then held until the drain: re-armed where the value is found, forgotten
 * if the value is found nowhere); NULL when the value points to no entry. */
static void push_pending(int db, const RedisModuleString *key, const lockv *value, lease_timer *t) {
    if (detached == NULL) return;
    pending *p = RedisModule_Alloc(sizeof(*p));
    p->db = db;
    p->key = key ? RedisModule_CreateStringFromString(NULL, key) : NULL;
    p->value = value;
    p->t = t;
    if (t) hold(t);
    p->next = pendings;
    pendings = p;
    if (!pending_timer_armed) {
        pending_timer_armed = 1;
        RedisModule_CreateTimer(detached, 0, process_pending, NULL);
    }
}

/* Arm (primary) or only track (replica: arm 0) the lease timer of the held lock
 * `l` at `keyname` in the selected db. An unheld lock's entry goes, except an
 * armed timer: it stays until it fires (at the released lease's end, at the
 * latest), so that acquire-release cycles reuse it instead of stopping and
 * creating a timer each time. */
static void arm_or_track_value(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l, uint64_t now_ms, int arm) {
    lease_timer *t = l->lease;
    uint64_t next = lock_next_expiry(l);
    if (next == 0) {
        if (t && !(arm && t->armed)) {
            l->lease = NULL;
            forget(t);
        }
        return;
    }
    if (t == NULL) {
        t = RedisModule_Calloc(1, sizeof(*t));
        t->db = RedisModule_GetSelectedDb(ctx);
        t->key = RedisModule_CreateStringFromString(NULL, keyname);
        t->value = l;
        t->next = timers;
        if (timers) timers->prev = t;
        timers = t;
        ntimers++;
        l->lease = t;
    }
    if (!arm || (t->armed && t->due_ms <= next)) return; /* fires no later than needed: left alone */
    if (t->armed) RedisModule_StopTimer(ctx, t->timer, NULL);
    t->timer = RedisModule_CreateTimer(ctx, (mstime_t)(next > now_ms ? next - now_ms : 0), lease_timer_fired, t);
    t->armed = 1;
    t->due_ms = next;
}

void lease_arm(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l, uint64_t now_ms) {
    if (l) arm_or_track_value(ctx, keyname, l, now_ms, 1);
}

void lease_track(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l) {
    if (l) arm_or_track_value(ctx, keyname, l, 0, 0);
}

/* The lock value at `keyname` in db `db` when it is `value` (any lock value
 * when `value` is NULL), else NULL. Leaves db `db` selected. */
static lockv *value_at(RedisModuleCtx *ctx, int db, RedisModuleString *keyname, const lockv *value) {
    if (RedisModule_SelectDb(ctx, db) != REDISMODULE_OK) return NULL;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_OPEN_KEY_NOTOUCH);
    lockv *l = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == LockType) {
        l = RedisModule_ModuleTypeGetValue(key);
        if (value && l != value) l = NULL;
    }
    RedisModule_CloseKey(key);
    return l;
}

/* Arm or track the lock `l` found at `keyname` in the selected db; an entry it
 * still points to (its timer lost it) moves to where it was found. */
static void arm_here(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l) {
    lease_timer *t = l->lease;
    int db = RedisModule_GetSelectedDb(ctx);
    if (t && (t->db != db || RedisModule_StringCompare(t->key, keyname) != 0)) {
        RedisModule_FreeString(NULL, t->key);
        t->key = RedisModule_CreateStringFromString(NULL, keyname);
        t->db = db;
    }
    int replica = RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE;
    arm_or_track_value(ctx, keyname, l, mc_now_ms(), !replica);
}

static void lease_timer_fired(RedisModuleCtx *ctx, void *data) {
    lease_timer *t = data;
    t->armed = 0; /* this timer is firing */
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_READONLY))
        return; /* the primary replicates expiries; keep tracking for a promotion */
    uint64_t now_ms = mc_now_ms();
    if (RedisModule_AvoidReplicaTraffic()) {
        /* Clients paused for writes: no writes now; try again shortly. */
        t->timer = RedisModule_CreateTimer(ctx, 10, lease_timer_fired, t);
        t->armed = 1;
        t->due_ms = now_ms + 10;
        return;
    }
    int saved = RedisModule_GetSelectedDb(ctx);
    hold(t);
    RedisModule_SelectDb(ctx, t->db);
    /* (the lookup may expire the key: its callbacks then mark t dead) */
    RedisModuleKey *key = RedisModule_OpenKey(ctx, t->key, REDISMODULE_READ | REDISMODULE_WRITE);
    int here = !t->dead && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE &&
               RedisModule_ModuleTypeGetType(key) == LockType && RedisModule_ModuleTypeGetValue(key) == t->value;
    if (here) {
        end_leases(ctx, key, t->key, now_ms); /* commits, re-arms or forgets through lease_arm */
        /* Nothing ended (it fired early) or something is still held: arm for the next end. */
        if (!t->dead && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE &&
            RedisModule_ModuleTypeGetValue(key) == t->value)
            lease_arm(ctx, t->key, RedisModule_ModuleTypeGetValue(key), now_ms);
    }
    RedisModule_CloseKey(key);
    if (!here && !t->dead) {
        /* Not where it was, or hidden by a lookup that did not delete it (an
         * expired key while clients are paused): find it by a scan. The value
         * may still point to t, so t stays (held by the pending entry): re-armed
         * where the value is found, forgotten if it is found nowhere. */
        push_pending(t->db, t->key, t->value, t);
    }
    release(t);
    RedisModule_SelectDb(ctx, saved);
}

/* Scan callback: arm the values of the list being drained found in this db
 * (RM_Scan hands over the stored values without an expiry lookup). */
static void scan_for_pending(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleKey *key, void *privdata) {
    int *left = privdata;
    if (key == NULL || RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_MODULE ||
        RedisModule_ModuleTypeGetType(key) != LockType)
        return;
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    for (pending *p = draining; p; p = p->next) {
        if (p->value == l) {
            p->value = NULL;
            (*left)--;
            arm_here(ctx, keyname, l);
        }
    }
}

/* Find and arm every pending value: under its last known name first, then by a
 * scan of every database for those that moved. What is found nowhere was freed.
 * Each round works on a detached list (a lookup that expires a key may queue
 * new entries, and a freed value's entries are only marked). */
static void drain_pending(RedisModuleCtx *ctx) {
    int saved = RedisModule_GetSelectedDb(ctx);
    while (pendings) {
        draining = pendings;
        pendings = NULL;
        for (pending *p = draining; p; p = p->next) {
            if (p->value == NULL || p->key == NULL || p->db < 0) continue;
            lockv *l = value_at(ctx, p->db, p->key, p->value);
            if (l && p->value) {
                p->value = NULL;
                arm_here(ctx, p->key, l);
            }
        }
        int left = 0;
        for (pending *p = draining; p; p = p->next) left += p->value != NULL;
        for (int db = 0; left > 0 && RedisModule_SelectDb(ctx, db) == REDISMODULE_OK; db++) {
            RedisModuleScanCursor *c = RedisModule_ScanCursorCreate();
            while (left > 0 && RedisModule_Scan(ctx, c, scan_for_pending, &left)) {
            }
            RedisModule_ScanCursorDestroy(c);
        }
        while (draining) {
            pending *p = draining;
            draining = p->next;
            if (p->t) {
                /* found nowhere (not even unexpired by a scan): the value is gone */
                if (p->value && !p->t->dead) forget(p->t);
                release(p->t);
            }
            if (p->key) RedisModule_FreeString(NULL, p->key);
            RedisModule_Free(p);
        }
    }
    RedisModule_SelectDb(ctx, saved);
}

static void process_pending(RedisModuleCtx *ctx, void *data) {
    (void)data;
    pending_timer_armed = 0;
    if (RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_LOADING | REDISMODULE_CTX_FLAGS_ASYNC_LOADING)) {
        pending_timer_armed = 1; /* still loading (also a replica's swapdb load): later */
        RedisModule_CreateTimer(ctx, 10, process_pending, NULL);
        return;
    }
    drain_pending(ctx);
}

/* Lock type callbacks (lock_glue.h hooks). */

/* A value arrived without a command (RDB load, RESTORE, COPY): raise the token
 * floor past its tokens and arm its lease timer after the command. */
static void lock_loaded(const lockv *l, int db, const RedisModuleString *key) {
    fencing_saw(l->last_token);
    if (l->nholders) push_pending(key ? db : -1, key, l, NULL);
}

/* `l` left `key` of db `db`: its timer goes; a held value is found again after
 * the command (renamed or moved: armed there; deleted: freed by then). */
static void lock_unlinked(lockv *l, int db, const RedisModuleString *key) {
    if (l->lease) {
        lease_timer *t = l->lease;
        l->lease = NULL;
        forget(t);
    }
    if (l->nholders) push_pending(db, key, l, NULL);
}

/* `l` is being freed. On the main thread its timer and pending entries go; a
 * free elsewhere (an asynchronous flush) follows a flush event that did that. */
static void lock_freed(lockv *l) {
    if (!on_main_thread()) return;
    if (l->lease) {
        lease_timer *t = l->lease;
        l->lease = NULL;
        forget(t);
    }
    /* only marked: a drain may be walking either list right now */
    for (pending *p = pendings; p; p = p->next)
        if (p->value == l) p->value = NULL;
    for (pending *p = draining; p; p = p->next)
        if (p->value == l) p->value = NULL;
}

/* FLUSHDB / FLUSHALL (also before a replica's full sync and DEBUG RELOAD).
 * Before: settle the pending values. A synchronous flush frees the values on
 * this thread, each through lock_freed, which drops its entry. An asynchronous
 * one frees them on a background thread, which never reads a value's lease
 * pointer: their entries are dropped now, without touching the values (no key
 * lookup either: one could expire a key in the middle). After: serve the
 * waiters there (their keys are gone). */
static void on_flush(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    RedisModuleFlushInfo *fi = data;
    if (sub == REDISMODULE_SUBEVENT_FLUSHDB_END) {
        waitq_kick_db(ctx, fi->dbnum);
        return;
    }
    drain_pending(ctx);
    if (fi->sync) return;
    size_t n;
    lease_timer **v = hold_all(fi->dbnum, &n);
    for (size_t i = 0; i < n; i++) forget(v[i]);
    release_all(v, n);
}

/* SWAPDB: the entries follow their values. */
static void on_swapdb(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)sub;
    RedisModuleSwapDbInfo *si = data;
    for (lease_timer *t = timers; t; t = t->next) {
        if (t->db == si->dbnum_first) t->db = si->dbnum_second;
        else if (t->db == si->dbnum_second) t->db = si->dbnum_first;
    }
    for (pending *p = pendings; p; p = p->next) {
        if (p->db == si->dbnum_first) p->db = si->dbnum_second;
        else if (p->db == si->dbnum_second) p->db = si->dbnum_first;
    }
    /* Waiters stay on their db index (as BLPOP's do), whose keys are now the
     * other db's: serve both dbs' queues, whose head waiters may fit now. */
    waitq_kick_db(ctx, si->dbnum_first);
    waitq_kick_db(ctx, si->dbnum_second);
}

static void on_role_change(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)data;
    if (sub != REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER) return;
    /* Grants the old primary made but never replicated may have used tokens up
     * to its clock: issue tokens from well beyond ours. */
    fencing_promoted(mc_now_us());
    /* The leases this node tracked as a replica now end by its own timers: each
     * fires at once and does the work (no key lookup here: the timer callback
     * holds its entry across one, and waits while clients are paused). */
    uint64_t now_ms = mc_now_ms();
    for (lease_timer *t = timers; t; t = t->next) {
        if (t->armed || t->dead) continue;
        t->timer = RedisModule_CreateTimer(ctx, 0, lease_timer_fired, t);
        t->armed = 1;
        t->due_ms = now_ms;
    }
}

long long leases_tracked(void) {
    return ntimers;
}

int leases_init(RedisModuleCtx *ctx, lease_end_fn on_end) {
    end_leases = on_end;
    main_thread = pthread_self();
    detached = RedisModule_GetDetachedThreadSafeContext(ctx);
    lock_load_hook = lock_loaded;
    lock_unlink_hook = lock_unlinked;
    lock_free_hook = lock_freed;
    if (RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_FlushDB, on_flush) == REDISMODULE_ERR ||
        RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_SwapDB, on_swapdb) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ReplicationRoleChanged, on_role_change);
}
