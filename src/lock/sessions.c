/* sessions.c -- release on disconnect; see sessions.h. A disconnecting
 * client's context cannot write, so its locks are released from a timer. */
#include "lock/sessions.h"

#include <string.h>

#include "lock/state.h"
#include "server/clock.h"
#include "server/waitq.h"

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

void session_add(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
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

void session_drop(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner,
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
            if (lock_open(ctx, s->key, REDISMODULE_READ | REDISMODULE_WRITE, &key) != 0) continue;
            if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
                lockv *l = RedisModule_ModuleTypeGetValue(key);
                size_t olen;
                const char *owner = RedisModule_StringPtrLen(s->owner, &olen);
                int h = lock_find(l, owner, olen);
                if (h >= 0 && l->holders[h].client_id == id) {
                    l->holders[h].count = 1;
                    lock_release(l, owner, olen);
                    lock_expire(l, now_ms);
                    lock_commit(ctx, key, s->key, l, now_ms);
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

int sessions_init(RedisModuleCtx *ctx) {
    sessions = RedisModule_CreateDict(NULL);
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_ClientChange, on_client_change);
}
