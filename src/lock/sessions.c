/* SPDX-License-Identifier: BSD-3-Clause */
/* sessions.c -- release on disconnect; see sessions.h.
 *
 * One entry per SESSION grant, on two lists: its client's and its lock
 * value's (lockv.sessions). The entry names the value, not its key, so a
 * disconnect ends the hold wherever the key went (RENAME, MOVE, SWAPDB; the
 * value's lease entry knows the place, leases.h). An entry lives exactly as
 * long as its hold: every commit of a value that has entries (session_sync)
 * drops those whose holder is gone (released, lease ended, ended by a lock-delay)
 * and a value freed or dropped drops all of its own, each in O(1); a client
 * whose last entry goes is forgotten. Memory follows the live holds, whatever
 * a connection held before.
 *
 * A disconnecting client's context cannot write, so its holds are released
 * from a timer. */
#include "lock/sessions.h"

#include <string.h>

#include "lock/leases.h"
#include "lock/state.h"
#include "server/clock.h"
#include "server/waitq.h"

#define PAUSE_RETRY_MS 10

typedef struct client_sessions client_sessions;

/* One SESSION grant: `owner` holds `value` for client `cs`. */
typedef struct session_entry {
    client_sessions *cs;
    lockv *value;
    char *owner;
    size_t owner_len;
    struct session_entry *cprev, *cnext; /* the client's entries */
    struct session_entry *vprev, *vnext; /* the value's entries (lockv.sessions heads them) */
} session_entry;

struct client_sessions {
    uint64_t id;
    session_entry *head;
    long long n;
};

static RedisModuleDict *sessions;    /* client id (8 bytes) -> client_sessions */
static uint64_t *closed_ids;         /* disconnected clients whose locks to release */
static size_t nclosed, closed_cap;
static int release_timer_armed;
static long long nentries;

/* Take `e` off both lists and free it; its client goes with its last entry. */
static void entry_drop(session_entry *e) {
    client_sessions *cs = e->cs;
    if (e->cprev) e->cprev->cnext = e->cnext; else cs->head = e->cnext;
    if (e->cnext) e->cnext->cprev = e->cprev;
    if (e->vprev) e->vprev->vnext = e->vnext; else e->value->sessions = e->vnext;
    if (e->vnext) e->vnext->vprev = e->vprev;
    RedisModule_Free(e->owner);
    RedisModule_Free(e);
    nentries--;
    if (--cs->n == 0) {
        RedisModule_DictDelC(sessions, &cs->id, sizeof(cs->id), NULL);
        RedisModule_Free(cs);
    }
}

/* Whether `e`'s client still holds `l` as `e`'s owner. */
static int entry_live(const session_entry *e, const lockv *l) {
    int h = lock_find(l, e->owner, e->owner_len);
    return h >= 0 && l->holders[h].client_id == e->cs->id;
}

void session_add(RedisModuleCtx *ctx, uint64_t client_id, lockv *l, const char *owner, size_t len) {
    (void)ctx;
    for (session_entry *e = l->sessions; e; e = e->vnext)
        if (e->cs->id == client_id && e->owner_len == len && memcmp(e->owner, owner, len) == 0) return;
    client_sessions *cs = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    if (cs == NULL) {
        cs = RedisModule_Calloc(1, sizeof(*cs));
        cs->id = client_id;
        RedisModule_DictSetC(sessions, &client_id, sizeof(client_id), cs);
    }
    session_entry *e = RedisModule_Calloc(1, sizeof(*e));
    e->cs = cs;
    e->value = l;
    e->owner = RedisModule_Alloc(len);
    memcpy(e->owner, owner, len);
    e->owner_len = len;
    e->cnext = cs->head;
    if (cs->head) cs->head->cprev = e;
    cs->head = e;
    cs->n++;
    e->vnext = l->sessions;
    if (l->sessions) ((session_entry *)l->sessions)->vprev = e;
    l->sessions = e;
    nentries++;
}

/* lock_commit_sessions_hook: after a change to `l`, its entries whose holder is
 * gone (released, lease ended) go. */
static void session_sync(lockv *l) {
    session_entry *e = l->sessions, *next;
    for (; e; e = next) {
        next = e->vnext;
        if (!entry_live(e, l)) entry_drop(e);
    }
}

/* lease_value_gone_hook: `l` is freed or dropped; its entries go. */
static void value_gone(lockv *l) {
    while (l->sessions) entry_drop(l->sessions);
}

long long sessions_entries(void) {
    return nentries;
}

/* End client `id`'s hold of `owner` on the value `l` (the entry is gone): find
 * the value's key, end the hold as a lease end would (a lock-delay runs from
 * now), commit, serve the waiters. */
static void release_one(RedisModuleCtx *ctx, uint64_t id, lockv *l, const char *owner, size_t olen, uint64_t now_ms) {
    int db;
    RedisModuleString *where;
    if (lease_where(ctx, l, &db, &where) != 0) return;
    RedisModuleString *name = RedisModule_CreateStringFromString(NULL, where);
    RedisModule_SelectDb(ctx, db);
    RedisModuleKey *key;
    if (lock_open(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE, &key) == 0) {
        if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetValue(key) == l) {
            int h = lock_find(l, owner, olen);
            if (h >= 0 && l->holders[h].client_id == id) {
                uint64_t granted_ms = l->holders[h].granted_ms, until = l->holders[h].expires_ms;
                uint64_t end = until < now_ms ? until : now_ms; /* a lease ended first: its end */
                lock_end_hold(l, (uint32_t)h, end); /* no release: a lock-delay runs from here */
                lock_note_hold(granted_ms, end);
                lock_drop_ended(l, now_ms); /* ended leases count as in lock_expire_leases */
                lock_commit(ctx, key, name, l, now_ms);
                waitq_kick(ctx, name);
            }
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_FreeString(NULL, name);
}

/* Timer: release the SESSION grants of the clients that disconnected (a
 * replica only forgets them: its primary releases and replicates). */
static void release_closed_sessions(RedisModuleCtx *ctx, void *data) {
    (void)data;
    release_timer_armed = 0;
    int replica = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
    if (!replica && RedisModule_AvoidReplicaTraffic()) {
        release_timer_armed = 1;
        RedisModule_CreateTimer(ctx, PAUSE_RETRY_MS, release_closed_sessions, NULL);
        return;
    }
    int saved = RedisModule_GetSelectedDb(ctx);
    uint64_t now_ms = mc_now_ms();
    for (size_t i = 0; i < nclosed; i++) {
        uint64_t id = closed_ids[i];
        client_sessions *cs;
        /* each entry leaves before its release (a commit syncs the value's
         * entries); the client goes with its last one */
        while ((cs = RedisModule_DictGetC(sessions, &id, sizeof(id), NULL)) != NULL) {
            session_entry *e = cs->head;
            lockv *l = e->value;
            size_t olen = e->owner_len;
            char *owner = RedisModule_Alloc(olen);
            memcpy(owner, e->owner, olen);
            entry_drop(e);
            if (!replica) release_one(ctx, id, l, owner, olen, now_ms);
            RedisModule_Free(owner);
        }
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

int sessions_init(RedisModuleCtx *ctx) {
    sessions = RedisModule_CreateDict(NULL);
    lease_value_gone_hook = value_gone;
    lock_commit_sessions_hook = session_sync;
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ClientChange, on_client_change);
}
