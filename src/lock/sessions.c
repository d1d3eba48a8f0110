/* SPDX-License-Identifier: BSD-3-Clause */
/* sessions.c -- release on disconnect; see sessions.h. A disconnecting
 * client's context cannot write, so its locks are released from a timer. */
#include "lock/sessions.h"

#include <string.h>

#include "lock/state.h"
#include "server/clock.h"
#include "server/waitq.h"

/* One SESSION grant: (db, key, owner) held by a client. */
typedef struct session_lock {
    int db;
    RedisModuleString *key;
    RedisModuleString *owner;
} session_lock;

/* A client's SESSION grants, by entry id (session_id). Entries whose holder
 * went without a release (lease ended, key deleted) are pruned when the
 * count doubles, so memory follows the live grants and each add costs O(log n)
 * amortized. */
typedef struct client_sessions {
    RedisModuleDict *entries; /* session_id -> session_lock */
    size_t prune_at;          /* prune when the dict reaches this size */
} client_sessions;

#define PRUNE_MIN 16

static RedisModuleDict *sessions;    /* client id (8 bytes) -> client_sessions */
static uint64_t *closed_ids;         /* disconnected clients whose locks to release */
static size_t nclosed, closed_cap;
static int release_timer_armed;

/* The id of (db, key, owner): db, key length (4 bytes each), key, owner;
 * binary-safe. In `stackbuf` when it fits in `cap`, else allocated (the caller
 * frees it when the result != stackbuf). */
static char *session_id(int db, RedisModuleString *keyname, const char *owner, size_t olen, char *stackbuf,
                        size_t cap, size_t *len) {
    size_t klen;
    const char *k = RedisModule_StringPtrLen(keyname, &klen);
    uint32_t d = (uint32_t)db, kl = (uint32_t)klen;
    *len = 8 + klen + olen;
    char *buf = *len <= cap ? stackbuf : RedisModule_Alloc(*len);
    memcpy(buf, &d, 4);
    memcpy(buf + 4, &kl, 4);
    memcpy(buf + 8, k, klen);
    memcpy(buf + 8 + klen, owner, olen);
    return buf;
}

static void session_lock_free(session_lock *s) {
    RedisModule_FreeString(NULL, s->key);
    RedisModule_FreeString(NULL, s->owner);
    RedisModule_Free(s);
}

static void client_sessions_free(client_sessions *cs) {
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(cs->entries, "^", NULL, 0);
    session_lock *s;
    while (RedisModule_DictNextC(it, NULL, (void **)&s)) session_lock_free(s);
    RedisModule_DictIteratorStop(it);
    RedisModule_FreeDict(NULL, cs->entries);
    RedisModule_Free(cs);
}

/* Whether client `id` still holds a running lease of the lock at s (read only). */
static int session_live(RedisModuleCtx *ctx, uint64_t id, const session_lock *s, uint64_t now_ms) {
    RedisModule_SelectDb(ctx, s->db);
    RedisModuleKey *key;
    if (lock_open(ctx, s->key, REDISMODULE_READ, &key) != 0) return 0;
    int live = 0;
    if (key && RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        lockv *l = RedisModule_ModuleTypeGetValue(key);
        size_t olen;
        const char *owner = RedisModule_StringPtrLen(s->owner, &olen);
        int h = lock_find(l, owner, olen);
        live = h >= 0 && l->holders[h].client_id == id && l->holders[h].expires_ms > now_ms;
    }
    if (key) RedisModule_CloseKey(key);
    return live;
}

/* Forget the entries of client `id` whose holder is gone, then set the next
 * prune size to twice what is left. */
static void session_prune(RedisModuleCtx *ctx, uint64_t id, client_sessions *cs) {
    int saved = RedisModule_GetSelectedDb(ctx);
    uint64_t now_ms = mc_now_ms();
    size_t n = 0, cap = RedisModule_DictSize(cs->entries);
    RedisModuleString **dead = RedisModule_Alloc(sizeof(*dead) * (cap ? cap : 1));
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(cs->entries, "^", NULL, 0);
    RedisModuleString *eid;
    session_lock *s;
    while ((eid = RedisModule_DictNext(NULL, it, (void **)&s)) != NULL) {
        if (!session_live(ctx, id, s, now_ms)) dead[n++] = eid;
        else RedisModule_FreeString(NULL, eid);
    }
    RedisModule_DictIteratorStop(it);
    for (size_t i = 0; i < n; i++) {
        session_lock *gone = NULL;
        RedisModule_DictDel(cs->entries, dead[i], &gone);
        if (gone) session_lock_free(gone);
        RedisModule_FreeString(NULL, dead[i]);
    }
    RedisModule_Free(dead);
    RedisModule_SelectDb(ctx, saved);
    size_t left = RedisModule_DictSize(cs->entries);
    cs->prune_at = left * 2 > PRUNE_MIN ? left * 2 : PRUNE_MIN;
}

void session_add(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
                 size_t len) {
    int db = RedisModule_GetSelectedDb(ctx);
    client_sessions *cs = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    if (cs == NULL) {
        cs = RedisModule_Alloc(sizeof(*cs));
        cs->entries = RedisModule_CreateDict(NULL);
        cs->prune_at = PRUNE_MIN;
        RedisModule_DictSetC(sessions, &client_id, sizeof(client_id), cs);
    }
    char stackbuf[256];
    size_t idlen;
    char *id = session_id(db, keyname, owner, len, stackbuf, sizeof(stackbuf), &idlen);
    if (RedisModule_DictGetC(cs->entries, id, idlen, NULL) == NULL) {
        session_lock *s = RedisModule_Alloc(sizeof(*s));
        s->db = db;
        s->key = RedisModule_CreateStringFromString(NULL, keyname);
        s->owner = RedisModule_CreateString(NULL, owner, len);
        RedisModule_DictSetC(cs->entries, id, idlen, s);
        if (RedisModule_DictSize(cs->entries) >= cs->prune_at) session_prune(ctx, client_id, cs);
    }
    if (id != stackbuf) RedisModule_Free(id);
}

void session_drop(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
                  size_t len) {
    client_sessions *cs = RedisModule_DictGetC(sessions, &client_id, sizeof(client_id), NULL);
    if (cs == NULL) return;
    char stackbuf[256];
    size_t idlen;
    char *id = session_id(RedisModule_GetSelectedDb(ctx), keyname, owner, len, stackbuf, sizeof(stackbuf), &idlen);
    session_lock *s = NULL;
    if (RedisModule_DictDelC(cs->entries, id, idlen, &s) == REDISMODULE_OK && s) session_lock_free(s);
    if (id != stackbuf) RedisModule_Free(id);
    if (RedisModule_DictSize(cs->entries) == 0) {
        RedisModule_DictDelC(sessions, &client_id, sizeof(client_id), NULL);
        RedisModule_FreeDict(NULL, cs->entries);
        RedisModule_Free(cs);
    }
}

/* Timer: release the SESSION grants of the clients that disconnected (a
 * replica only forgets them: its primary releases and replicates). */
static void release_closed_sessions(RedisModuleCtx *ctx, void *data) {
    (void)data;
    release_timer_armed = 0;
    int replica = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
    if (!replica && RedisModule_AvoidReplicaTraffic()) {
        release_timer_armed = 1;
        RedisModule_CreateTimer(ctx, 10, release_closed_sessions, NULL);
        return;
    }
    int saved = RedisModule_GetSelectedDb(ctx);
    uint64_t now_ms = mc_now_ms();
    for (size_t i = 0; i < nclosed; i++) {
        uint64_t id = closed_ids[i];
        client_sessions *cs = NULL;
        RedisModule_DictDelC(sessions, &id, sizeof(id), &cs);
        if (cs == NULL) continue;
        RedisModuleDictIter *it = RedisModule_DictIteratorStartC(cs->entries, "^", NULL, 0);
        session_lock *s;
        while (!replica && RedisModule_DictNextC(it, NULL, (void **)&s)) {
            RedisModule_SelectDb(ctx, s->db);
            RedisModuleKey *key;
            if (lock_open(ctx, s->key, REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) continue;
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
                lockv *l = RedisModule_ModuleTypeGetValue(key);
                size_t olen;
                const char *owner = RedisModule_StringPtrLen(s->owner, &olen);
                int h = lock_find(l, owner, olen);
                if (h >= 0 && l->holders[h].client_id == id) {
                    uint64_t granted_ms = l->holders[h].granted_ms, until = l->holders[h].expires_ms;
                    uint64_t end = until < now_ms ? until : now_ms; /* a lease ended first: its end */
                    lock_end_hold(l, (uint32_t)h, end); /* no release: a lock-delay runs from here */
                    lock_note_hold(granted_ms, end);
                    lock_drop_ended(l, now_ms); /* ended leases count as in lock_expire_leases */
                    lock_commit(ctx, key, s->key, l, now_ms);
                    waitq_kick(ctx, s->key);
                }
            }
            RedisModule_CloseKey(key);
        }
        RedisModule_DictIteratorStop(it);
        client_sessions_free(cs);
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
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ClientChange, on_client_change);
}
