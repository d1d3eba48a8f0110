/* acks.c -- LOCK.ACQUIRE ... ACKS numreplicas timeout-ms: a grant answered only
 * once that many replicas have acknowledged it, so that a grant the client saw
 * survives a failover to one of them.
 *
 * The module API offers no way to wait for replicas from a command: WAIT called
 * through RedisModule_Call waits for its temporary client's offset, not for the
 * command's own write (which is propagated only after the command returns), and
 * on Redis 7.0 it asserts when it would block. So the grant blocks its client
 * here, and a module timer -- which runs after the command's write has been
 * propagated -- notes the primary's replication offset as the target, then
 * checks the offsets the online replicas have acknowledged (INFO replication,
 * read through RedisModule_GetServerInfo) every ACK_POLL_MS until enough have
 * it or the timeout passes. Replicas acknowledge on their own about once per
 * second (their replication cron), so an ACKS grant takes up to about a second
 * more than a plain one.
 *
 * When the timeout passes first (or the client ends its wait with CLIENT
 * UNBLOCK, or disconnects), the grant is taken back -- released as by its owner,
 * if that owner still holds the permit with the same token -- and the client
 * gets NOREPLICAS: it never holds a grant it was not told about, nor one told
 * about that fewer replicas have. */
#include "lock/acks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock/sessions.h"
#include "lock/state.h"
#include "server/clock.h"
#include "server/waitq.h"

#define ACK_POLL_MS 5

typedef struct ack_wait {
    RedisModuleBlockedClient *bc;
    RedisModuleString *key;  /* retained */
    int db;
    char *owner;
    size_t owner_len;
    uint64_t token, lease_ms;
    long long needed;
    uint64_t deadline_ms;
    unsigned long long target; /* replication offset to reach; 0: not noted yet */
    int gone;                  /* the client left (disconnect): undo, reply to nobody */
    struct ack_wait *next;
} ack_wait;

/* What the blocked client is answered with. */
typedef struct ack_reply {
    int granted;
    int demoted; /* the server became a replica while the client waited */
    uint64_t token, lease_ms;
    long long acked, needed;
} ack_reply;

static ack_wait *waits;
static RedisModuleTimerID timer;
static int timer_armed;

static void check(RedisModuleCtx *ctx, void *data);

static void arm(RedisModuleCtx *ctx, mstime_t in_ms) {
    if (timer_armed) return;
    timer = RedisModule_CreateTimer(ctx, in_ms, check, NULL);
    timer_armed = 1;
}

#define MAX_REPLICAS 256

/* INFO replication, read once: the primary's offset and the offsets the online
 * replicas acknowledged (at most MAX_REPLICAS). */
typedef struct repl_view {
    unsigned long long master;
    unsigned long long acked[MAX_REPLICAS];
    int n;
} repl_view;

static void read_repl(RedisModuleCtx *ctx, repl_view *v) {
    RedisModuleServerInfoData *info = RedisModule_GetServerInfo(ctx, "replication");
    int err = 0;
    v->master = RedisModule_ServerInfoGetFieldUnsigned(info, "master_repl_offset", &err);
    if (err) v->master = 0;
    v->n = 0;
    for (int i = 0; v->n < MAX_REPLICAS; i++) {
        char field[32];
        snprintf(field, sizeof(field), "slave%d", i);
        const char *f = RedisModule_ServerInfoGetFieldC(info, field);
        if (f == NULL) break;
        /* "ip=...,port=...,state=online,offset=123,lag=0" */
        const char *off = strstr(f, "offset=");
        if (strstr(f, "state=online") == NULL || off == NULL) continue;
        v->acked[v->n++] = strtoull(off + 7, NULL, 10);
    }
    RedisModule_FreeServerInfo(ctx, info);
}

/* How many online replicas acknowledged `target` (0: none noted yet). */
static long long acked_at(const repl_view *v, unsigned long long target) {
    long long n = 0;
    for (int i = 0; target && i < v->n; i++) n += v->acked[i] >= target;
    return n;
}

/* Take the grant of `w` back: release one acquisition of its owner if the hold
 * is still the one granted (same token) -- a fresh grant is then gone, a
 * reentry counted once less -- replicated like any change, and serve the
 * waiters. */
static void undo(RedisModuleCtx *ctx, ack_wait *w) {
    int saved = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, w->db);
    RedisModuleKey *key;
    if (lock_open(ctx, w->key, REDISMODULE_READ | REDISMODULE_WRITE, &key) == 0 && key) {
        if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
            lockv *l = RedisModule_ModuleTypeGetValue(key);
            int h = lock_find(l, w->owner, w->owner_len);
            if (h >= 0 && l->holders[h].token == w->token) {
                uint64_t client_id = l->holders[h].client_id, granted_ms = l->holders[h].granted_ms;
                if (lock_release(l, w->owner, w->owner_len) == 0) {
                    lock_note_hold(granted_ms, mc_now_ms());
                    if (client_id) session_drop(ctx, client_id, w->key, w->owner, w->owner_len);
                }
                lock_commit(ctx, key, w->key, l, mc_now_ms());
                RedisModule_CloseKey(key);
                waitq_kick(ctx, w->key);
                RedisModule_SelectDb(ctx, saved);
                return;
            }
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_SelectDb(ctx, saved);
}

static void free_wait(ack_wait *w) {
    RedisModule_FreeString(NULL, w->key);
    RedisModule_Free(w->owner);
    RedisModule_Free(w);
}

/* Unblock w's client with this answer (none when it is gone: its client was
 * unblocked already, by CLIENT UNBLOCK or its disconnect). */
static void answer(ack_wait *w, int granted, int demoted, long long acked) {
    if (w->gone) return;
    ack_reply *r = RedisModule_Alloc(sizeof(*r));
    *r = (ack_reply){granted, demoted, w->token, w->lease_ms, acked, w->needed};
    RedisModule_UnblockClient(w->bc, r);
}

/* The timer: note targets, answer the waits that are acknowledged or over. */
static void check(RedisModuleCtx *ctx, void *data) {
    (void)data;
    timer_armed = 0;
    uint64_t now_ms = mc_now_ms();
    /* A server that became a replica (a failover) writes nothing: its new primary
     * decides whether the grant stands. Its waits end now, unconfirmed. */
    int demoted = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
    repl_view v;
    read_repl(ctx, &v);
    ack_wait **p = &waits;
    while (*p) {
        ack_wait *w = *p;
        if (w->target == 0) w->target = v.master ? v.master : 1;
        long long acked = acked_at(&v, w->target);
        int done = demoted || w->gone || acked >= w->needed || now_ms >= w->deadline_ms;
        if (!done) {
            p = &w->next;
            continue;
        }
        *p = w->next;
        int granted = !demoted && !w->gone && acked >= w->needed;
        if (!granted && !demoted) undo(ctx, w);
        answer(w, granted, demoted, acked);
        free_wait(w);
    }
    if (waits) arm(ctx, ACK_POLL_MS);
}

static int reply_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    ack_reply *r = RedisModule_GetBlockedClientPrivateData(ctx);
    if (r == NULL) return RedisModule_ReplyWithError(ctx, "ERR the wait for replicas ended");
    if (r->demoted)
        return RedisModule_ReplyWithError(ctx, "NOREPLICAS this server became a replica while the grant waited for "
                                               "acknowledgements; its new primary decides whether it stands");
    if (!r->granted) {
        char buf[200];
        snprintf(buf, sizeof(buf),
                 "NOREPLICAS %lld of the %lld replicas asked for acknowledged the grant in time; "
                 "it was released",
                 r->acked, r->needed);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    RedisModule_ReplyWithArray(ctx, 3);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, (long long)r->token);
    return RedisModule_ReplyWithLongLong(ctx, (long long)r->lease_ms);
}

static void free_reply_cb(RedisModuleCtx *ctx, void *privdata) {
    (void)ctx;
    RedisModule_Free(privdata);
}

static ack_wait *find(RedisModuleBlockedClient *bc) {
    for (ack_wait *w = waits; w; w = w->next)
        if (w->bc == bc && !w->gone) return w;
    return NULL;
}

/* CLIENT UNBLOCK: the wait ends now, as at its timeout (the grant is taken
 * back by the timer, which runs next). */
static int timeout_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    RedisModuleBlockedClient *bc = RedisModule_GetBlockedClientHandle(ctx);
    ack_wait *w = find(bc);
    long long needed = w ? w->needed : 0;
    if (w) { /* else it was answered already: unblocked once is enough */
        w->gone = 1;
        arm(ctx, 0);
        RedisModule_UnblockClient(bc, NULL);
    }
    char buf[160];
    snprintf(buf, sizeof(buf), "NOREPLICAS the wait for %lld replicas ended (CLIENT UNBLOCK); the grant was released",
             needed);
    return RedisModule_ReplyWithError(ctx, buf);
}

/* The client left: nobody learns of the grant, so the timer takes it back. */
static void disconnect_cb(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    ack_wait *w = find(bc);
    if (w == NULL) return; /* answered already: unblocked once is enough */
    w->gone = 1;
    arm(ctx, 0);
    RedisModule_UnblockClient(bc, NULL);
}

int lock_acks_wait(RedisModuleCtx *ctx, RedisModuleString *keyname, const char *owner, size_t owner_len,
                   uint64_t token, uint64_t lease_ms, long long needed, uint64_t timeout_ms) {
    ack_wait *w = RedisModule_Calloc(1, sizeof(*w));
    w->key = RedisModule_CreateStringFromString(NULL, keyname);
    w->db = RedisModule_GetSelectedDb(ctx);
    w->owner = RedisModule_Alloc(owner_len ? owner_len : 1);
    memcpy(w->owner, owner, owner_len);
    w->owner_len = owner_len;
    w->token = token;
    w->lease_ms = lease_ms;
    w->needed = needed;
    w->deadline_ms = mc_now_ms() + timeout_ms;
    w->bc = RedisModule_BlockClient(ctx, reply_cb, timeout_cb, free_reply_cb, 0);
    RedisModule_SetDisconnectCallback(w->bc, disconnect_cb);
    w->next = waits;
    waits = w;
    arm(ctx, 0); /* runs after this command's write is propagated: then the target is noted */
    return REDISMODULE_OK;
}
