/* lock_cmd.c -- leased locks done on the server: the LOCK.* commands.
 *
 *   LOCK.ACQUIRE key owner lease-ms [PERMITS n] [REENTRANT] [SESSION] [WAIT timeout-ms]
 *   LOCK.RELEASE key owner       LOCK.EXTEND key owner lease-ms      LOCK.INSPECT key
 *   LOCK.STATE key ...           internal: replication and AOF
 *
 * Grants carry a fencing token (lock.h). Waiters queue first come first served
 * without polling (waitq.c): a release, an expiry or a disconnect serves the head
 * of the queue. Leases end on time: a module timer per held lock removes ended
 * leases when they end (and replicates that), not only when the key is next
 * touched. SESSION ties a holder to its connection: when the connection closes,
 * its permits are released at once (the lease stays the fallback, e.g. after a
 * failover, where the new primary never sees the disconnect).
 *
 * Every change replicates the lock's whole resulting state (LOCK.STATE, absolute
 * lease ends), never the clock-reading command, so a replica or an AOF replay
 * holds exactly what the primary held. Lock keys have no TTL: an unheld lock
 * keeps its last fencing token (a few dozen bytes) until someone deletes it. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "args.h"
#include "errors.h"
#include "ratelimit.h"
#include "lock_glue.h"
#include "waitq.h"

#define FENCING_MARGIN_US (10ULL * 1000 * 1000) /* after a promotion: clocks may differ this much */
#define ERR_NOT_OWNER "ERR the lock is not held by this owner"

static uint64_t token_floor_us;  /* raised on promotion */
static uint64_t max_token_seen;  /* every token issued or loaded here: new ones go above */
static RedisModuleCtx *detached; /* to create timers from callbacks that have no context */
static struct {
    long long grants, waits, timeouts, expired, waiting;
} lstats;

/* ==== Helpers ==== */

/* The smallest token a new grant may take: above the clock (so tokens grow
 * across restarts and deleted keys), above every token this process has seen
 * (the clock has millisecond resolution on Redis 7.0), and above the margin set
 * on promotion. */
static uint64_t token_floor(uint64_t now_us) {
    uint64_t f = now_us > token_floor_us ? now_us : token_floor_us;
    return f > max_token_seen ? f : max_token_seen + 1;
}

static void saw_token(uint64_t t) {
    if (t > max_token_seen && t <= LOCK_MAX_TOKEN) max_token_seen = t;
}

/* Open a lock key, checking its type. 0, or -1 when it holds another type. */
static int open_lock(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleKey **key) {
    return mc_open_typed(ctx, keyname, mode, LockType, key);
}

static void replicate_state(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l) {
    size_t n;
    RedisModuleString **args = lock_state_args(l, &n);
    RedisModule_Replicate(ctx, CMD_LOCK_STATE, "sv", keyname, args, n);
    captcha_free_args(args, n);
}

/* ==== Lease timers: leases end on time ==== */

static void arm_lease_timer(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l, uint64_t now_ms);

/* After a change to the lock at `key` (open for writing): an ephemeral lock (a
 * concurrency limit) that nobody holds is deleted, so idle limits cost no
 * memory; any other is kept with its last fencing token. Replicates the result
 * and (re)arms the lease timer. `l` may be freed: do not use it after. */
static void commit_state(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, lockv *l,
                         uint64_t now_ms) {
    if (l->ephemeral && l->nholders == 0) {
        RedisModule_DeleteKey(key);
        RedisModule_Replicate(ctx, "DEL", "s", keyname);
        arm_lease_timer(ctx, keyname, NULL, now_ms);
        return;
    }
    replicate_state(ctx, keyname, l);
    arm_lease_timer(ctx, keyname, l, now_ms);
}

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

/* (Re)arm the lease timer of a lock for its earliest lease end. A timer that
 * will fire no later than needed is left alone (it re-arms itself when it
 * fires early), so grants and releases do not churn timers. */
static void arm_lease_timer(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l, uint64_t now_ms) {
    int db = RedisModule_GetSelectedDb(ctx);
    char stackbuf[128];
    size_t idlen;
    char *idbuf = mc_db_key_buf(db, keyname, stackbuf, sizeof(stackbuf), &idlen);
    lease_timer *t = RedisModule_DictGetC(lease_timers, idbuf, idlen, NULL);
    uint64_t next = l ? lock_next_expiry(l) : 0;
    if (next == 0) {
        /* Nobody holds it: an armed timer finds that out when it fires. */
        if (t && !t->armed) {
            RedisModule_DictDelC(lease_timers, idbuf, idlen, NULL);
            RedisModule_FreeString(NULL, t->key);
            RedisModule_FreeString(NULL, t->id);
            RedisModule_Free(t);
        }
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

/* Drop the ended leases of the lock at `key` (open for writing), replicate and
 * serve waiters when something ended. Returns how many ended. */
static uint32_t expire_leases(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t now_ms) {
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) return 0;
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    uint32_t gone = lock_expire(l, now_ms);
    if (gone) {
        lstats.expired += gone;
        commit_state(ctx, key, keyname, l, now_ms);
        waitq_kick(ctx, keyname);
    }
    return gone;
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
        if (open_lock(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, &key) == 0) {
            expire_leases(ctx, key, keyname, now_ms);
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) l = RedisModule_ModuleTypeGetValue(key);
            arm_lease_timer(ctx, keyname, l, now_ms); /* may free t */
            RedisModule_CloseKey(key);
        } else {
            arm_lease_timer(ctx, keyname, NULL, now_ms);
        }
    }
    RedisModule_FreeString(NULL, keyname);
    RedisModule_SelectDb(ctx, saved);
}

/* On a replica: remember a held lock's key (timer not armed) so that a
 * promotion can arm it; forget it when nobody holds the lock. */
static void track_lock(RedisModuleCtx *ctx, RedisModuleString *keyname, const lockv *l) {
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

/* A key was deleted, expired or evicted: forget a lease-timer entry that is
 * not armed (a replica's tracking entry; a primary's armed timer cleans up
 * itself when it fires). */
static int on_key_gone(RedisModuleCtx *ctx, int type, const char *event, RedisModuleString *keyname) {
    (void)type;
    (void)event;
    if (RedisModule_DictSize(lease_timers) == 0) return REDISMODULE_OK;
    char stackbuf[128];
    size_t idlen;
    char *idbuf = mc_db_key_buf(RedisModule_GetSelectedDb(ctx), keyname, stackbuf, sizeof(stackbuf), &idlen);
    lease_timer *t = RedisModule_DictGetC(lease_timers, idbuf, idlen, NULL);
    if (t && !t->armed) {
        RedisModule_DictDelC(lease_timers, idbuf, idlen, NULL);
        RedisModule_FreeString(NULL, t->key);
        RedisModule_FreeString(NULL, t->id);
        RedisModule_Free(t);
    }
    if (idbuf != stackbuf) RedisModule_Free(idbuf);
    return REDISMODULE_OK;
}

/* Arm (primary) or track (replica) the lease timer of the lock at db/key. */
static void arm_or_track(RedisModuleCtx *ctx, int db, RedisModuleString *keyname) {
    int saved = RedisModule_GetSelectedDb(ctx);
    if (db >= 0) RedisModule_SelectDb(ctx, db);
    RedisModuleKey *key;
    if (open_lock(ctx, keyname, REDISMODULE_READ, &key) == 0) {
        lockv *l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
        if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) track_lock(ctx, keyname, l);
        else arm_lease_timer(ctx, keyname, l, mc_now_ms());
        RedisModule_CloseKey(key);
    }
    RedisModule_SelectDb(ctx, saved);
}

/* Locks that arrived by RDB load, RESTORE or COPY, waiting for their timers. */
typedef struct loaded_lock {
    int db;
    RedisModuleString *key;
    struct loaded_lock *next;
} loaded_lock;

static loaded_lock *loaded;
static int loaded_timer_armed;

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

void lock_loaded(const lockv *l, int db, const RedisModuleString *key) {
    saw_token(l->last_token);
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

/* ==== Sessions: release on disconnect ==== */

typedef struct session_lock {
    int db;
    RedisModuleString *key;
    RedisModuleString *owner;
    struct session_lock *next;
} session_lock;

static RedisModuleDict *sessions;    /* client id (8 bytes) -> session_lock list */
static uint64_t *closed_ids;         /* disconnected clients whose locks to release */
static size_t nclosed, closed_cap;
static int release_timer_armed;

/* Find the entry of (db, key, owner) in a client's list; *prevp gets its predecessor. */
static session_lock *session_find(session_lock *s, int db, RedisModuleString *keyname, const char *owner,
                                  size_t len, session_lock **prevp) {
    session_lock *prev = NULL;
    for (; s; prev = s, s = s->next) {
        size_t olen;
        const char *o = RedisModule_StringPtrLen(s->owner, &olen);
        if (s->db == db && olen == len && memcmp(o, owner, len) == 0 && RedisModule_StringCompare(s->key, keyname) == 0)
            break;
    }
    if (prevp) *prevp = prev;
    return s;
}

static void session_add(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
                        size_t len) {
    int db = RedisModule_GetSelectedDb(ctx);
    session_lock *head = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    if (session_find(head, db, keyname, owner, len, NULL)) return; /* known already */
    session_lock *s = RedisModule_Alloc(sizeof(*s));
    s->db = db;
    s->key = RedisModule_CreateStringFromString(NULL, keyname);
    s->owner = RedisModule_CreateString(NULL, owner, len);
    s->next = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    RedisModule_DictReplaceC(sessions, &client_id, sizeof(client_id), s);
}

/* The holder of a session permit released it: forget the entry. */
static void session_drop(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
                         size_t len) {
    session_lock *head = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    session_lock *prev, *s = session_find(head, RedisModule_GetSelectedDb(ctx), keyname, owner, len, &prev);
    if (s == NULL) return;
    if (prev) prev->next = s->next;
    else if (s->next) RedisModule_DictReplaceC(sessions, &client_id, sizeof(client_id), s->next);
    else RedisModule_DictDelC(sessions, &client_id, sizeof(client_id), NULL);
    RedisModule_FreeString(NULL, s->key);
    RedisModule_FreeString(NULL, s->owner);
    RedisModule_Free(s);
}

static void session_list_free(session_lock *s) {
    while (s) {
        session_lock *next = s->next;
        RedisModule_FreeString(NULL, s->key);
        RedisModule_FreeString(NULL, s->owner);
        RedisModule_Free(s);
        s = next;
    }
}

static void release_closed_sessions(RedisModuleCtx *ctx, void *data) {
    (void)data;
    release_timer_armed = 0;
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) {
        /* The primary releases; just forget these clients' entries. */
        for (size_t i = 0; i < nclosed; i++) {
            session_lock *list = NULL;
            RedisModule_DictDelC(sessions, &closed_ids[i], sizeof(closed_ids[i]), &list);
            session_list_free(list);
        }
        nclosed = 0;
        return;
    }
    if (RedisModule_AvoidReplicaTraffic()) {
        release_timer_armed = 1;
        RedisModule_CreateTimer(ctx, 10, release_closed_sessions, NULL);
        return;
    }
    int saved = RedisModule_GetSelectedDb(ctx);
    uint64_t now_ms = mc_now_ms();
    for (size_t i = 0; i < nclosed; i++) {
        uint64_t id = closed_ids[i];
        session_lock *list = NULL;
        RedisModule_DictDelC(sessions, &id, sizeof(id), &list);
        for (session_lock *s = list; s; s = s->next) {
            RedisModule_SelectDb(ctx, s->db);
            RedisModuleKey *key;
            if (open_lock(ctx, s->key, REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) continue;
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
                lockv *l = RedisModule_ModuleTypeGetValue(key);
                size_t olen;
                const char *owner = RedisModule_StringPtrLen(s->owner, &olen);
                int h = lock_find(l, owner, olen);
                if (h >= 0 && l->holders[h].client_id == id) {
                    l->holders[h].count = 1;
                    lock_release(l, owner, olen);
                    lock_expire(l, now_ms);
                    commit_state(ctx, key, s->key, l, now_ms);
                    waitq_kick(ctx, s->key);
                }
            }
            RedisModule_CloseKey(key);
        }
        session_list_free(list);
    }
    nclosed = 0;
    RedisModule_SelectDb(ctx, saved);
}

static void on_client_change(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    if (sub != REDISMODULE_SUBEVENT_CLIENT_CHANGE_DISCONNECTED) return;
    RedisModuleClientInfo *ci = data;
    uint64_t id = ci->id;
    if (RedisModule_DictGetC(sessions, &id, sizeof(id), NULL) == NULL) return;
    /* The dying client's context: no writes here; release from a timer. */
    if (nclosed == closed_cap) {
        closed_cap = closed_cap ? closed_cap * 2 : 16;
        closed_ids = RedisModule_Realloc(closed_ids, closed_cap * sizeof(*closed_ids));
    }
    closed_ids[nclosed++] = id;
    if (!release_timer_armed) {
        release_timer_armed = 1;
        RedisModule_CreateTimer(ctx, 0, release_closed_sessions, NULL);
    }
}

static void on_role_change(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)data;
    if (sub != REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER) return;
    /* Grants the old primary made but never replicated may have used tokens up
     * to its clock: issue tokens from well beyond ours. */
    token_floor_us = mc_now_us() + FENCING_MARGIN_US;
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

/* ==== Acquire (immediately or from the wait queue) ==== */

typedef struct lock_req {
    int ephemeral;      /* RL.CONCURRENCY: the key goes once nobody holds it */
    int rl_style;       /* RL.CONCURRENCY: reply [allowed, remaining, retry_after_ms, reset_after_ms] */
    char *owner;
    size_t owner_len;
    uint64_t lease_ms;
    uint64_t permits;
    int reentrant;
    uint64_t client_id; /* SESSION: the requesting connection, else 0 */
} lock_req;

typedef struct lock_reply {
    int error;          /* 1: WRONGTYPE, 2: tokens exhausted */
    int granted;
    long long token;    /* fencing token, or -1 */
    long long ms;       /* granted: lease ms; not: ms until the earliest lease ends (or -1) */
    int rl_style;       /* reply in the rate limits' shape */
    long long remaining;/* permits free after this call */
    long long reset_ms; /* until every lease has ended */
} lock_reply;

static int reply_acquire(RedisModuleCtx *ctx, const lock_reply *r) {
    if (r->error == 2)
        return RedisModule_ReplyWithError(ctx, "ERR the lock's fencing tokens are exhausted; delete the key to reset it");
    if (r->error) return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (r->rl_style) {
        rl_stat(RL_STAT_CONCURRENCY, r->granted);
        RedisModule_ReplyWithArray(ctx, 4);
        RedisModule_ReplyWithLongLong(ctx, r->granted);
        RedisModule_ReplyWithLongLong(ctx, r->remaining);
        RedisModule_ReplyWithLongLong(ctx, r->granted ? -1 : r->ms);
        return RedisModule_ReplyWithLongLong(ctx, r->reset_ms);
    }
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, r->granted);
    RedisModule_ReplyWithLongLong(ctx, r->token);
    return RedisModule_ReplyWithLongLong(ctx, r->ms);
}

/* The latest lease end (Unix ms), 0 when nobody holds the lock. */
static uint64_t latest_expiry(const lockv *l) {
    uint64_t e = 0;
    for (uint32_t i = 0; i < l->nholders; i++)
        if (l->holders[i].expires_ms > e) e = l->holders[i].expires_ms;
    return e;
}

/* Try `req` on the open lock key. Returns 1 when answered (granted or refused for
 * good), 0 when it must wait (*out->ms = until the earliest lease ends). */
static int try_acquire(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, const lock_req *req,
                       uint64_t now_us, lock_reply *out) {
    uint64_t now_ms = now_us / 1000;
    expire_leases(ctx, key, keyname, now_ms);
    lockv *l;
    int created = 0;
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        l = lock_new((uint32_t)req->permits);
        l->ephemeral = (uint32_t)req->ephemeral;
        created = 1;
    } else {
        l = RedisModule_ModuleTypeGetValue(key);
    }
    uint32_t old_permits = l->permits;
    l->permits = (uint32_t)req->permits;
    uint64_t token = 0;
    lock_outcome o = lock_acquire(l, req->owner, req->owner_len, now_ms, req->lease_ms, req->reentrant,
                                  req->client_id, token_floor(now_us), &token);
    out->error = 0;
    out->rl_style = req->rl_style;
    if (o == LOCK_EXHAUSTED) {
        if (created) lock_free(l);
        else l->permits = old_permits;
        out->error = 2;
        return 1;
    }
    if (o == LOCK_GRANTED || o == LOCK_REENTERED) {
        saw_token(token);
        if (created) RedisModule_ModuleTypeSetValue(key, LockType, l);
        out->remaining = (long long)l->permits - (long long)lock_live_holders(l, now_ms);
        if (out->remaining < 0) out->remaining = 0;
        out->reset_ms = (long long)(latest_expiry(l) - now_ms);
        commit_state(ctx, key, keyname, l, now_ms);
        if (req->client_id && o == LOCK_GRANTED) session_add(ctx, req->client_id, keyname, req->owner, req->owner_len);
        lstats.grants++;
        out->granted = 1;
        out->token = (long long)token;
        out->ms = (long long)req->lease_ms;
        return 1;
    }
    /* Not granted: nothing changes (permits as they were). */
    uint64_t next = created ? 0 : lock_next_expiry(l);
    uint64_t last = created ? 0 : latest_expiry(l);
    if (created) lock_free(l);
    else l->permits = old_permits;
    out->granted = 0;
    out->token = -1;
    out->remaining = 0;
    out->reset_ms = last > now_ms ? (long long)(last - now_ms) : 0;
    out->ms = next > now_ms ? (long long)(next - now_ms) : -1;
    return o == LOCK_OWNED; /* held by this owner already: waiting would not help */
}

static int lock_try_serve(RedisModuleCtx *ctx, RedisModuleString *keyname, void *reqp, uint64_t now_us, void **reply,
                          uint64_t *retry_ms) {
    lock_req *req = reqp;
    lock_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
    RedisModuleKey *key;
    if (open_lock(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) {
        rep->error = 1;
        *reply = rep;
        return 1;
    }
    int done = try_acquire(ctx, key, keyname, req, now_us, rep);
    RedisModule_CloseKey(key);
    if (done) {
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

static int lock_timeout_reply(RedisModuleCtx *ctx, RedisModuleString *key, void *reqp) {
    (void)key;
    lock_req *req = reqp;
    lstats.timeouts++;
    lock_reply r = {.token = -1, .ms = -1, .rl_style = req->rl_style};
    return reply_acquire(ctx, &r);
}

static void lock_req_free(void *p) {
    lock_req *req = p;
    lstats.waiting--;
    RedisModule_Free(req->owner);
    RedisModule_Free(req);
}

static void free_reply(void *p) {
    RedisModule_Free(p);
}

static const waitq_ops lock_wait_ops = {lock_try_serve, lock_reply_fn, lock_timeout_reply, lock_req_free, free_reply};

/* ==== Commands ==== */

/* Answer an acquire at once, or queue it (WAIT) first come first served. */
static int acquire_flow(RedisModuleCtx *ctx, RedisModuleString *keyname, lock_req *reqp, uint64_t wait_ms) {
    lock_req req = *reqp;
    const char *owner = req.owner;
    uint64_t now_us = mc_now_us();
    RedisModuleKey *key;
    if (open_lock(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    int may_wait = wait_ms > 0 && waitq_can_block(ctx);
    lock_reply rep = {.token = -1, .ms = -1, .rl_style = req.rl_style};
    int answered;
    if (waitq_busy(ctx, keyname)) {
        /* First come, first served: nobody jumps the queue (a reentrant owner
         * that holds the lock already is not jumping it). */
        answered = 0;
        if (req.reentrant && RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY &&
            lock_find(RedisModule_ModuleTypeGetValue(key), owner, req.owner_len) >= 0)
            answered = try_acquire(ctx, key, keyname, &req, now_us, &rep) || rep.granted;
        if (!answered) rep = (lock_reply){.token = -1, .ms = -1, .rl_style = req.rl_style};
    } else {
        answered = try_acquire(ctx, key, keyname, &req, now_us, &rep) || rep.granted;
    }
    RedisModule_CloseKey(key);
    if (!answered && may_wait) {
        lock_req *copy = RedisModule_Alloc(sizeof(*copy));
        *copy = req;
        copy->owner = RedisModule_Alloc(req.owner_len);
        memcpy(copy->owner, owner, req.owner_len);
        lstats.waits++;
        lstats.waiting++;
        waitq_block(ctx, &lock_wait_ops, keyname, copy, (long long)wait_ms, rep.ms > 0 ? (uint64_t)rep.ms : 0);
        return REDISMODULE_OK;
    }
    return reply_acquire(ctx, &rep);
}

/* LOCK.ACQUIRE <key> <owner> <lease ms> [PERMITS <n>] [REENTRANT] [SESSION] [WAIT <timeout ms>]
 * Reply: [1, fencing token, lease ms] when granted; [0, -1, ms until the earliest
 * lease ends (-1 if unknown)] when not. With WAIT the caller blocks, first come
 * first served, until granted or the timeout (then [0, -1, -1]). */
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
    for (int i = 4; i < argc; i++) {
        if (mc_is_word(argv[i], "REENTRANT")) {
            req.reentrant = 1;
        } else if (mc_is_word(argv[i], "SESSION")) {
            session = 1;
        } else if (mc_is_word(argv[i], "PERMITS") && i + 1 < argc) {
            if (mc_parse_u64(argv[++i], 1, LOCK_MAX_PERMITS, &req.permits)) return mc_reply_range(ctx, "PERMITS", 1, LOCK_MAX_PERMITS);
        } else if (mc_is_word(argv[i], "WAIT") && i + 1 < argc) {
            if (mc_parse_u64(argv[++i], 0, 1ULL << 40, &wait_ms)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40);
        } else {
            return RedisModule_ReplyWithError(ctx, ERR_SYNTAX);
        }
    }
    if (session) req.client_id = RedisModule_GetClientId(ctx);
    req.owner = (char *)owner;
    return acquire_flow(ctx, argv[1], &req, wait_ms);
}

/* Release `argv[2]`'s hold on the lock at `argv[1]`: one acquisition, or all
 * of them with `all` (a concurrency slot). Returns the acquisitions still held
 * (0: the permit is free and the next waiter is served), -1 when the owner
 * held nothing, -2 after replying WRONGTYPE. */
static int release_hold(RedisModuleCtx *ctx, RedisModuleString **argv, int all) {
    RedisModuleKey *key;
    if (open_lock(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) {
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return -2;
    }
    uint64_t now_ms = mc_now_ms();
    expire_leases(ctx, key, argv[1], now_ms);
    size_t len;
    const char *owner = RedisModule_StringPtrLen(argv[2], &len);
    int left = -1;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        lockv *l = RedisModule_ModuleTypeGetValue(key);
        int h = lock_find(l, owner, len);
        if (h >= 0) {
            if (all) l->holders[h].count = 1;
            uint64_t client_id = l->holders[h].client_id;
            left = lock_release(l, owner, len);
            if (left == 0 && client_id) session_drop(ctx, client_id, argv[1], owner, len);
            commit_state(ctx, key, argv[1], l, now_ms);
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
    if (open_lock(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    uint64_t now_ms = mc_now_ms();
    expire_leases(ctx, key, argv[1], now_ms);
    size_t len;
    const char *owner = RedisModule_StringPtrLen(argv[2], &len);
    lockv *l = RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY ? RedisModule_ModuleTypeGetValue(key) : NULL;
    if (l == NULL || lock_extend(l, owner, len, now_ms, lease) != 0) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithError(ctx, ERR_NOT_OWNER);
    }
    commit_state(ctx, key, argv[1], l, now_ms);
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, (long long)lease);
}

/* LOCK.INSPECT <key>
 * Reply: [permits, last fencing token, waiters, [[owner, lease ms left, token,
 * count], ...]] for the leases still running; nil when there is no such lock.
 * Read-only (runs on replicas). */
static int LockInspect_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key;
    if (open_lock(ctx, argv[1], REDISMODULE_READ, &key) != 0)
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithNull(ctx);
    }
    lockv *l = RedisModule_ModuleTypeGetValue(key);
    uint64_t now_ms = mc_now_ms();
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, l->permits);
    RedisModule_ReplyWithLongLong(ctx, (long long)l->last_token);
    RedisModule_ReplyWithLongLong(ctx, waitq_length(ctx, argv[1]));
    RedisModule_ReplyWithArray(ctx, lock_live_holders(l, now_ms));
    for (uint32_t i = 0; i < l->nholders; i++) {
        lock_holder *h = &l->holders[i];
        if (h->expires_ms <= now_ms) continue;
        RedisModule_ReplyWithArray(ctx, 4);
        RedisModule_ReplyWithStringBuffer(ctx, h->owner, h->owner_len);
        RedisModule_ReplyWithLongLong(ctx, (long long)(h->expires_ms - now_ms));
        RedisModule_ReplyWithLongLong(ctx, (long long)h->token);
        RedisModule_ReplyWithLongLong(ctx, h->count);
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

/* LOCK.STATE <key> <permits> <last token> <nholders> [<owner> <lease end unix ms> <count> <token>]...
 * Internal (replication, AOF): replaces <key> with exactly this lock state. */
static int LockState_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    const char *err;
    lockv *l = lock_from_args(argv + 2, argc - 2, &err);
    if (l == NULL) {
        char buf[256];
        snprintf(buf, sizeof(buf), "ERR invalid lock state: %s", err);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    RedisModuleKey *key;
    if (open_lock(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) {
        lock_free(l);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    RedisModule_ModuleTypeSetValue(key, LockType, l);
    saw_token(l->last_token);
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE)
        track_lock(ctx, argv[1], l); /* a replica ends nothing itself, but remembers for a promotion */
    else
        arm_lease_timer(ctx, argv[1], l, mc_now_ms());
    RedisModule_CloseKey(key);
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
    if (argc != 5 && argc != 7) return RedisModule_WrongArity(ctx);
    lock_req req = {.ephemeral = 1, .rl_style = 1};
    uint64_t wait_ms = 0;
    req.owner = (char *)RedisModule_StringPtrLen(argv[2], &req.owner_len);
    if (req.owner_len == 0 || req.owner_len > LOCK_MAX_OWNER_BYTES)
        return RedisModule_ReplyWithError(ctx, "ERR holder must be 1 to 256 bytes");
    if (mc_parse_u64(argv[3], 1, LOCK_MAX_LEASE_MS, &req.lease_ms))
        return mc_reply_range(ctx, "lease (milliseconds)", 1, LOCK_MAX_LEASE_MS);
    if (mc_parse_u64(argv[4], 1, LOCK_MAX_PERMITS, &req.permits)) return mc_reply_range(ctx, "limit", 1, LOCK_MAX_PERMITS);
    if (argc == 7) {
        if (!mc_is_word(argv[5], "WAIT")) return RedisModule_ReplyWithError(ctx, ERR_SYNTAX);
        if (mc_parse_u64(argv[6], 0, 1ULL << 40, &wait_ms)) return mc_reply_range(ctx, "WAIT", 0, 1ULL << 40);
    }
    return acquire_flow(ctx, argv[1], &req, wait_ms);
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

/* ==== INFO and registration ==== */

void lock_info(RedisModuleInfoCtx *ctx) {
    RedisModule_InfoAddSection(ctx, "locks");
    RedisModule_InfoAddFieldLongLong(ctx, "grants", lstats.grants);
    RedisModule_InfoAddFieldLongLong(ctx, "waits", lstats.waits);
    RedisModule_InfoAddFieldLongLong(ctx, "timeouts", lstats.timeouts);
    RedisModule_InfoAddFieldLongLong(ctx, "leases_expired_while_held", lstats.expired);
    RedisModule_InfoAddFieldLongLong(ctx, "waiters", lstats.waiting);
}

static const mc_command commands[] = {
    {"LOCK.ACQUIRE", LockAcquire_RedisCommand, "write deny-oom", 1, 1, 1},
    {"LOCK.RELEASE", LockRelease_RedisCommand, "write fast", 1, 1, 1},
    {"LOCK.EXTEND", LockExtend_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"LOCK.INSPECT", LockInspect_RedisCommand, "readonly fast", 1, 1, 1},
    {CMD_LOCK_STATE, LockState_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.CONCURRENCY", Concurrency_RedisCommand, "write deny-oom", 1, 1, 1},
    {"RL.CONCURRENCY_RELEASE", ConcurrencyRelease_RedisCommand, "write fast", 1, 1, 1},
};

int lock_cmd_register(RedisModuleCtx *ctx) {
    lease_timers = RedisModule_CreateDict(NULL);
    sessions = RedisModule_CreateDict(NULL);
    detached = RedisModule_GetDetachedThreadSafeContext(ctx);
    if (mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0])) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_SubscribeToKeyspaceEvents(
            ctx, REDISMODULE_NOTIFY_GENERIC | REDISMODULE_NOTIFY_EXPIRED | REDISMODULE_NOTIFY_EVICTED, on_key_gone) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ClientChange, on_client_change) == REDISMODULE_ERR ||
        RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ReplicationRoleChanged, on_role_change) ==
            REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
