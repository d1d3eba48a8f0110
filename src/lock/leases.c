/* SPDX-License-Identifier: BSD-3-Clause */
/* leases.c -- lease timers, replica tracking, locks that arrive or move without
 * a command, the promotion of a replica, and writes paused; see leases.h.
 *
 * Every held lock value has one entry (its handle: lockv.lease) that knows
 * where the value lives (db, key) and the value itself; the free callback drops
 * the entry, so the entry's value pointer is always live. No keyspace-event
 * subscription: the lock type's own callbacks say when a value leaves a key
 * (unlink: deleted, expired, evicted, overwritten, renamed or moved away), is
 * freed, is copied or loaded, and every change is O(1):
 *   - a value that left its key while held goes on the `pending` list (an
 *     intrusive list: a free takes it off in O(1)); just after the command (a
 *     0 ms timer) each is looked for under its last name in its db, then under
 *     the same name in the other databases (MOVE: O(databases)); a deleted one
 *     was freed by then and is no longer on the list;
 *   - one found nowhere was renamed: Redis 7.0's module API says nothing of a
 *     RENAME's new name without a keyspace-event subscription (which would tax
 *     every DEL). With the config lock-follow-renames on, a command filter
 *     records each RENAME (renames.h) and the value is looked for at its
 *     destination (follow_rename). Otherwise the entry goes on the `lost`
 *     list, still armed: the next lock command that opens the value by its new
 *     name places it in O(1) (lease_seen); a lost value that nothing opened
 *     before it must be written (lease end, session close) is looked for by
 *     one scan of the keyspace for every lost value at once (INFO
 *     lease_keys_scanned). A replica never scans: only a promoted one does;
 *   - SWAPDB and FLUSHDB/FLUSHALL come as server events; the start of a
 *     replica's load drops every entry (a diskless load into a temporary db
 *     frees the old values on another thread, without a flush event).
 *
 * While writes are paused (CLIENT PAUSE WRITE, FAILOVER) a lease that ends
 * cannot be written: its entry joins the `paused` list, in the order the ends
 * came, and one poll timer (not one per lease) waits for the pause to lift,
 * then handles each once, in order.
 *
 * Opening a key can delete it (a key whose TTL passed expires on lookup), which
 * runs the type's unlink and free callbacks, and so forget(), in the middle of
 * whatever looked. Every entry in use across a lookup is held (hold/release:
 * forget then only marks it dead). */
#include "lock/leases.h"

#include <pthread.h>
#include <string.h>

#include "lock/fencing.h"
#include "lock/renames.h"
#include "server/clock.h"
#include "server/events.h"
#include "server/waitq.h"

#define PAUSE_POLL_MS 10

static RedisModuleCtx *detached; /* to create timers from callbacks that have no context */
static lease_end_fn end_leases;  /* state.c's lock_expire_leases */
static pthread_t main_thread;    /* values freed elsewhere (async flush) are not tracked here */
void (*lease_value_gone_hook)(lockv *l);

enum { PLACED, PENDING, LOST };

typedef struct lease_timer {
    int db;                 /* where the value was last seen */
    RedisModuleString *key; /* its name there; NULL when not known */
    RedisModuleString *to;  /* where the RENAME that moved it away sent it, when known */
    lockv *value;           /* live while the entry is (the free callback forgets it) */
    RedisModuleTimerID timer;
    int armed;   /* never StopTimer the timer whose callback is running: Redis frees it after */
    int busy;    /* holds (see hold): while > 0, forget() only marks it dead */
    int dead;    /* forgotten while held: freed by the last release */
    int state;   /* PLACED, PENDING or LOST (on that list) */
    int paused;  /* on the paused list */
    uint64_t due_ms; /* when the armed timer fires (Unix ms) */
    struct lease_timer *prev, *next;   /* every entry */
    struct lease_timer *lprev, *lnext; /* the pending or lost list */
    struct lease_timer *pprev, *pnext; /* the paused list */
} lease_timer;

typedef struct tlist {
    lease_timer *head, *tail;
    long long n;
} tlist;

static lease_timer *timers; /* every entry, armed (primary) or tracked (replica) */
static long long ntimers;
static tlist pending, lost, paused_list;
static int pending_timer_armed, pause_timer_armed;
static long long keys_scanned, pause_wakeups, renames_followed;

static void lease_timer_fired(RedisModuleCtx *ctx, void *data);
static void process_pending(RedisModuleCtx *ctx, void *data);
static void pause_poll(RedisModuleCtx *ctx, void *data);

static int on_main_thread(void) {
    return pthread_equal(pthread_self(), main_thread);
}

/* The state lists (pending, lost) link through lprev/lnext. */
static void state_add(tlist *L, lease_timer *t) {
    t->lprev = L->tail;
    t->lnext = NULL;
    if (L->tail) L->tail->lnext = t; else L->head = t;
    L->tail = t;
    L->n++;
}

static void state_del(tlist *L, lease_timer *t) {
    if (t->lprev) t->lprev->lnext = t->lnext; else L->head = t->lnext;
    if (t->lnext) t->lnext->lprev = t->lprev; else L->tail = t->lprev;
    t->lprev = t->lnext = NULL;
    L->n--;
}

/* Move `t` to state `s` (off its old list, onto the new one). */
static void set_state(lease_timer *t, int s) {
    if (t->state == s) return;
    if (t->state == PENDING) state_del(&pending, t);
    else if (t->state == LOST) state_del(&lost, t);
    t->state = s;
    if (s == PENDING) state_add(&pending, t);
    else if (s == LOST) state_add(&lost, t);
}

static void paused_del(lease_timer *t) {
    if (!t->paused) return;
    if (t->pprev) t->pprev->pnext = t->pnext; else paused_list.head = t->pnext;
    if (t->pnext) t->pnext->pprev = t->pprev; else paused_list.tail = t->pprev;
    t->pprev = t->pnext = NULL;
    t->paused = 0;
    paused_list.n--;
}

/* Drop entry `t` and clear its value's pointer to it: stop its timer when
 * armed, take it off its lists, free it; while it is held, only mark it dead
 * (the last release frees it). `value_ok`: the value may be touched (not when
 * it is being freed on another thread). */
static void forget_entry(lease_timer *t, int value_ok) {
    if (t->armed) RedisModule_StopTimer(detached, t->timer, NULL);
    t->armed = 0;
    set_state(t, PLACED);
    paused_del(t);
    if (t->value && value_ok && t->value->lease == t) t->value->lease = NULL;
    t->value = NULL;
    if (t->busy) {
        t->dead = 1;
        return;
    }
    if (t->prev) t->prev->next = t->next; else timers = t->next;
    if (t->next) t->next->prev = t->prev;
    ntimers--;
    if (t->key) RedisModule_FreeString(NULL, t->key);
    if (t->to) RedisModule_FreeString(NULL, t->to);
    RedisModule_Free(t);
}

static void forget(lease_timer *t) {
    forget_entry(t, 1);
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

/* The entry of `l`, made when it has none (at db `db`, name `key`, may be NULL). */
static lease_timer *entry_of(lockv *l, int db, const RedisModuleString *key) {
    lease_timer *t = l->lease;
    if (t) return t;
    t = RedisModule_Calloc(1, sizeof(*t));
    t->db = db;
    t->key = key ? RedisModule_CreateStringFromString(NULL, key) : NULL;
    t->value = l;
    t->state = PLACED;
    t->next = timers;
    if (timers) timers->prev = t;
    timers = t;
    ntimers++;
    l->lease = t;
    return t;
}

/* Forget where `t`'s value was renamed to. */
static void drop_to(lease_timer *t) {
    if (t->to) RedisModule_FreeString(NULL, t->to);
    t->to = NULL;
}

/* Note that `t`'s value is at (db, key). */
static void set_place(lease_timer *t, int db, const RedisModuleString *key) {
    if (t->key == NULL || t->db != db || RedisModule_StringCompare(t->key, (RedisModuleString *)key) != 0) {
        RedisModuleString *old = t->key; /* `key` may be it: copy first */
        t->key = RedisModule_CreateStringFromString(NULL, key);
        t->db = db;
        if (old) RedisModule_FreeString(NULL, old);
    }
    drop_to(t);
    set_state(t, PLACED);
}

static void arm_pending_timer(void) {
    if (pending_timer_armed || detached == NULL) return;
    pending_timer_armed = 1;
    RedisModule_CreateTimer(detached, 0, process_pending, NULL);
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
        if (t && !(arm && t->armed)) forget(t);
        return;
    }
    int db = RedisModule_GetSelectedDb(ctx);
    if (t == NULL) t = entry_of(l, db, keyname);
    else if (t->state != PLACED || t->key == NULL) set_place(t, db, keyname);
    if (!arm || (t->armed && t->due_ms <= next)) return; /* fires no later than needed: left alone */
    if (t->armed) RedisModule_StopTimer(ctx, t->timer, NULL);
    paused_del(t);
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

static int is_replica(RedisModuleCtx *ctx) {
    return (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
}

/* Place `l`, found at `keyname` in the selected db, and arm or track it. */
static void arm_here(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l) {
    lease_timer *t = l->lease;
    if (t) set_place(t, RedisModule_GetSelectedDb(ctx), keyname);
    arm_or_track_value(ctx, keyname, l, mc_now_ms(), !is_replica(ctx));
}

void lease_seen(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l) {
    lease_timer *t = l->lease;
    if (t == NULL || (t->state == PLACED && t->key)) return;
    arm_here(ctx, keyname, l);
}

/* The lock value at `keyname` in db `db` when it is `value`, else NULL.
 * Leaves db `db` selected. */
static lockv *value_at(RedisModuleCtx *ctx, int db, RedisModuleString *keyname, const lockv *value) {
    if (RedisModule_SelectDb(ctx, db) != REDISMODULE_OK) return NULL;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ | REDISMODULE_OPEN_KEY_NOTOUCH);
    lockv *l = NULL;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == LockType) {
        l = RedisModule_ModuleTypeGetValue(key);
        if (l != value) l = NULL;
    }
    RedisModule_CloseKey(key);
    return l;
}

/* `t`'s value, not under its last name in any db, was renamed: look for it in
 * its db at the destination its RENAME recorded (renames.h), then at every
 * recorded destination of its last name, newest first (a RENAME queued in a
 * MULTI). 1 when found and placed. `t` is held. */
static int follow_rename(RedisModuleCtx *ctx, lease_timer *t) {
    RedisModuleString *to = t->to;
    t->to = NULL;
    lockv *l = to ? value_at(ctx, t->db, to, t->value) : NULL;
    if (l && !t->dead) arm_here(ctx, to, l);
    if (to) RedisModule_FreeString(NULL, to);
    int pos = 0;
    const RedisModuleString *name;
    while (!l && !t->dead && t->key && (name = renames_next(t->key, &pos)) != NULL) {
        l = value_at(ctx, t->db, (RedisModuleString *)name, t->value);
        if (l && !t->dead) arm_here(ctx, (RedisModuleString *)name, l);
    }
    if (!l || t->dead) return 0;
    renames_followed++;
    return 1;
}

/* Look for every pending value under its last name, then under that name in
 * the other databases (MOVE), then where a recorded RENAME sent it; one found
 * nowhere is lost. O(pending x (databases + RENAME_HINTS)), never the keyspace. */
static void drain_pending(RedisModuleCtx *ctx) {
    int saved = RedisModule_GetSelectedDb(ctx);
    lease_timer *t;
    while ((t = pending.head) != NULL) {
        set_state(t, LOST); /* until found */
        if (t->key == NULL) continue;
        hold(t);
        int found = 0;
        for (int i = -1; !found && !t->dead; i++) {
            int db = i < 0 ? t->db : i;
            if (i == t->db) continue;
            if (RedisModule_SelectDb(ctx, db) != REDISMODULE_OK) break;
            /* (the lookup may expire keys: their callbacks may mark t dead) */
            lockv *l = t->dead ? NULL : value_at(ctx, db, t->key, t->value);
            if (l && !t->dead) {
                found = 1;
                arm_here(ctx, t->key, l);
            }
        }
        if (!found && !t->dead) follow_rename(ctx, t);
        release(t);
    }
    RedisModule_SelectDb(ctx, saved);
}

/* Scan callback: place the lost values found in this db. RM_Scan hands over
 * the stored values without an expiry lookup. */
static void scan_for_lost(RedisModuleCtx *ctx, RedisModuleString *keyname, RedisModuleKey *key, void *privdata) {
    (void)privdata;
    keys_scanned++;
    if (key == NULL || RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_MODULE ||
        RedisModule_ModuleTypeGetType(key) != LockType)
        return;
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    lease_timer *t = l->lease;
    if (t && t->state == LOST) arm_here(ctx, keyname, l);
}

/* Find every lost value: one scan of the keyspace for all of them, stopping
 * once none is left. What is found nowhere is not in the keyspace: dropped. */
static void find_lost(RedisModuleCtx *ctx) {
    drain_pending(ctx);
    if (lost.n == 0) return;
    int saved = RedisModule_GetSelectedDb(ctx);
    for (int db = 0; lost.n > 0 && RedisModule_SelectDb(ctx, db) == REDISMODULE_OK; db++) {
        RedisModuleScanCursor *c = RedisModule_ScanCursorCreate();
        while (lost.n > 0 && RedisModule_Scan(ctx, c, scan_for_lost, NULL)) {
        }
        RedisModule_ScanCursorDestroy(c);
    }
    RedisModule_SelectDb(ctx, saved);
    while (lost.head) forget(lost.head);
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

int lease_where(RedisModuleCtx *ctx, lockv *l, int *db, RedisModuleString **key) {
    lease_timer *t = l->lease;
    if (t == NULL) return -1;
    if (t->state != PLACED || t->key == NULL) {
        hold(t);
        drain_pending(ctx);
        if (!t->dead && t->state == LOST) find_lost(ctx);
        if (release(t)) return -1;
        if (t->state != PLACED || t->key == NULL) return -1;
    }
    *db = t->db;
    *key = t->key;
    return 0;
}

/* Park `t` (its lease ended while writes are paused) until the pause lifts. */
static void park(RedisModuleCtx *ctx, lease_timer *t) {
    if (!t->paused) {
        t->pprev = paused_list.tail;
        t->pnext = NULL;
        if (paused_list.tail) paused_list.tail->pnext = t; else paused_list.head = t;
        paused_list.tail = t;
        paused_list.n++;
        t->paused = 1;
    }
    if (!pause_timer_armed) {
        pause_timer_armed = 1;
        RedisModule_CreateTimer(ctx, PAUSE_POLL_MS, pause_poll, NULL);
    }
}

/* End the ended leases of `t`'s value (writes allowed, `t` held). */
static void end_now(RedisModuleCtx *ctx, lease_timer *t) {
    uint64_t now_ms = mc_now_ms();
    int saved = RedisModule_GetSelectedDb(ctx);
    if (t->state != PLACED || t->key == NULL) {
        drain_pending(ctx);
        if (!t->dead && t->state == LOST) find_lost(ctx);
        if (t->dead || t->state != PLACED || t->key == NULL) return;
    }
    RedisModule_SelectDb(ctx, t->db);
    /* (the lookup may expire the key: its callbacks then mark t dead) */
    RedisModuleKey *key = RedisModule_OpenKey(ctx, t->key, REDISMODULE_READ | REDISMODULE_WRITE);
    int here = !t->dead && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE &&
               RedisModule_ModuleTypeGetType(key) == LockType && RedisModule_ModuleTypeGetValue(key) == t->value;
    if (here) {
        RedisModuleString *name = RedisModule_CreateStringFromString(NULL, t->key);
        end_leases(ctx, key, name, now_ms); /* commits, re-arms or forgets through lease_arm */
        /* Nothing ended (it fired early) or something is still held: arm for the next end. */
        if (!t->dead && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE &&
            RedisModule_ModuleTypeGetValue(key) == t->value)
            lease_arm(ctx, name, RedisModule_ModuleTypeGetValue(key), now_ms);
        RedisModule_FreeString(NULL, name);
    }
    RedisModule_CloseKey(key);
    if (!here && !t->dead) {
        /* Not where it was, or hidden by a lookup that did not delete it (an
         * expired key while clients are paused): look for it again after. */
        set_state(t, PENDING);
        arm_pending_timer();
    }
    RedisModule_SelectDb(ctx, saved);
}

static void lease_timer_fired(RedisModuleCtx *ctx, void *data) {
    lease_timer *t = data;
    t->armed = 0; /* this timer is firing */
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_READONLY))
        return; /* the primary replicates expiries; keep tracking for a promotion */
    if (RedisModule_AvoidReplicaTraffic()) {
        park(ctx, t); /* clients paused for writes: handled once the pause lifts */
        return;
    }
    hold(t);
    end_now(ctx, t);
    release(t);
}

/* The one timer while leases wait for paused writes: once the pause lifts,
 * each parked entry is handled once, in the order its lease ended. */
static void pause_poll(RedisModuleCtx *ctx, void *data) {
    (void)data;
    pause_timer_armed = 0;
    pause_wakeups++;
    if (paused_list.head == NULL) return;
    if (RedisModule_AvoidReplicaTraffic()) {
        pause_timer_armed = 1;
        RedisModule_CreateTimer(ctx, PAUSE_POLL_MS, pause_poll, NULL);
        return;
    }
    if (RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_SLAVE | REDISMODULE_CTX_FLAGS_READONLY)) {
        while (paused_list.head) paused_del(paused_list.head); /* demoted: its new primary ends them */
        return;
    }
    lease_timer *t;
    while ((t = paused_list.head) != NULL) {
        paused_del(t);
        if (t->armed) continue; /* re-armed meanwhile (a command changed the lock) */
        hold(t);
        end_now(ctx, t);
        release(t);
        if (RedisModule_AvoidReplicaTraffic()) break; /* paused again: the rest wait */
    }
    if (paused_list.head) park(ctx, paused_list.head);
}

/* Lock type callbacks (lock_glue.h hooks). */

/* A value arrived without a command (RDB load, RESTORE, COPY): raise the token
 * floor past its tokens and arm its lease timer after the command. */
static void lock_loaded(const lockv *lc, int db, const RedisModuleString *key) {
    lockv *l = (lockv *)lc;
    fencing_saw(l->last_token);
    if (!l->nholders || detached == NULL) return;
    lease_timer *t = entry_of(l, key ? db : 0, key);
    set_state(t, key ? PENDING : LOST);
    arm_pending_timer();
}

/* `l` left `key` of db `db`: its entry waits for the end of the command (renamed
 * or moved: found there; deleted: freed by then). */
static void lock_unlinked(lockv *l, int db, const RedisModuleString *key) {
    if (detached == NULL) return;
    lease_timer *t = l->lease;
    if (t == NULL) {
        if (!l->nholders) return;
        t = entry_of(l, db, key);
    }
    /* The last name it left. Unchanged names keep their string: a lookup of
     * t->key that expires the key runs this while Redis still uses that very
     * string (it retains it only after the lookup). */
    if (key && (t->key == NULL || t->db != db || RedisModule_StringCompare(t->key, (RedisModuleString *)key) != 0)) {
        RedisModuleString *old = t->key;
        t->key = RedisModule_CreateStringFromString(NULL, key);
        t->db = db;
        if (old) RedisModule_FreeString(NULL, old);
    }
    /* A RENAME running now recorded its destination last (renames.h). */
    const RedisModuleString *to = key ? renames_latest(key) : NULL;
    drop_to(t);
    if (to) t->to = RedisModule_CreateStringFromString(NULL, to);
    set_state(t, PENDING);
    arm_pending_timer();
}

/* `l` is being freed. On the main thread its entry goes; a free elsewhere (an
 * asynchronous flush) follows a flush event that did that. */
static void lock_freed(lockv *l) {
    if (!on_main_thread()) return;
    if (lease_value_gone_hook) lease_value_gone_hook(l);
    if (l->lease) forget(l->lease);
}

/* Drop every entry of db `db` (-1: all) without touching a value beyond its
 * pointers to the entry and its sessions (values about to be freed elsewhere). */
static void forget_db(int db) {
    lease_timer *t = timers, *next;
    for (; t; t = next) {
        next = t->next;
        if (t->dead || (db != -1 && t->db != db)) continue;
        if (t->value && lease_value_gone_hook) lease_value_gone_hook(t->value);
        forget(t);
        /* forget may free t only: next stays valid (no callback runs here) */
    }
}

/* FLUSHDB / FLUSHALL (also before a replica's full sync and DEBUG RELOAD).
 * Before: settle the pending values (and, before an asynchronous FLUSHDB, the
 * lost ones: they may live in another db). A synchronous flush frees the
 * values on this thread, each through lock_freed, which drops its entry. An
 * asynchronous one frees them on a background thread, which never reads a
 * value's lease pointer: their entries are dropped now. After: serve the
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
    if (fi->dbnum != -1 && lost.n > 0) find_lost(ctx);
    forget_db(fi->dbnum);
}

/* A replica starts loading its primary's data: a diskless load into a
 * temporary db frees the old values later on another thread, with no flush
 * event. Drop every entry now (the values are still alive); the loaded values
 * get new ones. */
static void on_loading(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)ctx;
    (void)e;
    (void)data;
    if (sub == REDISMODULE_SUBEVENT_LOADING_REPL_START) forget_db(-1);
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

void leases_counters(leases_stats *out) {
    out->tracked = ntimers;
    out->pending = pending.n;
    out->lost = lost.n;
    out->paused = paused_list.n;
    out->keys_scanned = keys_scanned;
    out->pause_wakeups = pause_wakeups;
    out->renames_followed = renames_followed;
}

int leases_init(RedisModuleCtx *ctx, lease_end_fn on_end) {
    end_leases = on_end;
    main_thread = pthread_self();
    detached = RedisModule_GetDetachedThreadSafeContext(ctx);
    lock_load_hook = lock_loaded;
    lock_unlink_hook = lock_unlinked;
    lock_free_hook = lock_freed;
    if (RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_FlushDB, on_flush) == REDISMODULE_ERR ||
        RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_SwapDB, on_swapdb) == REDISMODULE_ERR ||
        mc_on_loading(ctx, on_loading) == REDISMODULE_ERR || renames_init(ctx) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ReplicationRoleChanged, on_role_change);
}
