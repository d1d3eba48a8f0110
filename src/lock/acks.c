/* SPDX-License-Identifier: BSD-3-Clause */
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
 * if that owner still holds the permit with the same token at that key -- and
 * the client gets NOREPLICAS: it never holds a grant it was not told about, nor
 * one told about that fewer replicas have. Taking back writes, so it waits while
 * writes are paused (CLIENT PAUSE WRITE, a failover). An acknowledged grant is
 * answered with the lease left then, or an error when the hold is gone by then
 * (its lease ended while the replicas caught up). */
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
    uint64_t token;
    long long needed;
    uint64_t deadline_ms;
    unsigned long long target; /* replication offset to reach; 0: not noted yet */
    int gone;                  /* the client left (disconnect): undo, reply to nobody */
    struct ack_wait *next;
} ack_wait;

/* How a wait ended, and so what its client is answered. */
typedef enum ack_outcome {
    ACK_GRANTED,       /* acknowledged and still held: [1, token, lease ms left] */
    ACK_NOT_HELD,      /* acknowledged, but no longer held at the key (lease ended, key moved...) */
    ACK_RELEASED,      /* not acknowledged in time: taken back */
    ACK_NOT_RELEASED,  /* not acknowledged in time, and not found at the key to take back */
    ACK_DEMOTED,       /* the server became a replica meanwhile: nothing written */
} ack_outcome;

typedef struct ack_reply {
    ack_outcome outcome;
    uint64_t token, lease_left_ms;
    long long acked, needed;
} ack_reply;

static ack_wait *waits;
static int timer_armed;

static void check(RedisModuleCtx *ctx, void *data);

static void arm(RedisModuleCtx *ctx, mstime_t in_ms) {
    if (timer_armed) return;
    RedisModule_CreateTimer(ctx, in_ms, check, NULL);
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

/* The value of the last ",name=" field of a slaveN line (NULL: none). */
static const char *last_field(const char *line, const char *name) {
    char pat[16];
    snprintf(pat, sizeof(pat), ",%s=", name);
    const char *found = NULL;
    for (const char *at = strstr(line, pat); at; at = strstr(at + 1, pat)) found = at;
    return found ? found + strlen(pat) : NULL;
}

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
        /* "ip=...,port=...,state=online,offset=123,lag=0[,type=replica]": read from
         * the end, since ip= (a replica's announced address) is free text */
        const char *state = last_field(f, "state"), *off = last_field(f, "offset");
        if (state == NULL || off == NULL || strncmp(state, "online", 6) != 0 || (state[6] != ',' && state[6]))
            continue;
        v->acked[v->n++] = strtoull(off, NULL, 10);
    }
    RedisModule_FreeServerInfo(ctx, info);
}

/* How many online replicas acknowledged `target` (0: none noted yet). */
static long long acked_at(const repl_view *v, unsigned long long target) {
    long long n = 0;
    for (int i = 0; target && i < v->n; i++) n += v->acked[i] >= target;
    return n;
}

/* The ms left of w's lease if its owner still holds the grant (same token) at
 * w's key, else 0 (lease ended; key deleted, moved, renamed or overwritten).
 * Reads only. */
static uint64_t hold_left(RedisModuleCtx *ctx, ack_wait *w, uint64_t now_ms) {
    int saved = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, w->db);
    RedisModuleKey *key;
    uint64_t left = 0;
    if (lock_open(ctx, w->key, REDISMODULE_READ, &key) == 0 && key) {
        if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
            const lockv *l = RedisModule_ModuleTypeGetValue(key);
            int h = lock_find(l, w->owner, w->owner_len);
            if (h >= 0 && l->holders[h].token == w->token && l->holders[h].expires_ms > now_ms)
                left = l->holders[h].expires_ms - now_ms;
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_SelectDb(ctx, saved);
    return left;
}

/* Take the grant of `w` back: release one acquisition of its owner if the hold
 * is still the one granted (same token) -- a fresh grant is then gone, a
 * reentry counted once less -- replicated like any change, and serve the
 * waiters. Returns 1, or 0 when it found no such hold at w's key. Writes:
 * never while replica traffic must be avoided (CLIENT PAUSE WRITE, failover). */
static int undo(RedisModuleCtx *ctx, ack_wait *w) {
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
                return 1;
            }
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_SelectDb(ctx, saved);
    return 0;
}

static void free_wait(ack_wait *w) {
    RedisModule_FreeString(NULL, w->key);
    RedisModule_Free(w->owner);
    RedisModule_Free(w);
}

/* Unblock w's client with this answer (none when it is gone: its client was
 * unblocked already, by CLIENT UNBLOCK or its disconnect). */
static void answer(ack_wait *w, ack_outcome outcome, uint64_t lease_left_ms, long long acked) {
    if (w->gone) return;
    ack_reply *r = RedisModule_Alloc(sizeof(*r));
    *r = (ack_reply){outcome, w->token, lease_left_ms, acked, w->needed};
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
    /* While writes are paused (CLIENT PAUSE WRITE, failover) nothing is taken back:
     * the waits that need it go on until writes may flow again. */
    int paused = RedisModule_AvoidReplicaTraffic();
    repl_view v;
    read_repl(ctx, &v);
    ack_wait **p = &waits;
    while (*p) {
        ack_wait *w = *p;
        if (w->target == 0) w->target = v.master ? v.master : 1;
        long long acked = acked_at(&v, w->target);
        if (demoted) {
            answer(w, ACK_DEMOTED, 0, acked);
        } else if (!w->gone && acked >= w->needed) {
            uint64_t left = hold_left(ctx, w, now_ms);
            answer(w, left ? ACK_GRANTED : ACK_NOT_HELD, left, acked);
        } else if ((w->gone || now_ms >= w->deadline_ms) && !paused) {
            int released = undo(ctx, w);
            answer(w, released ? ACK_RELEASED : ACK_NOT_RELEASED, 0, acked);
        } else {
            p = &w->next; /* still waiting (or waiting to be taken back) */
            continue;
        }
        *p = w->next;
        free_wait(w);
    }
    if (waits) arm(ctx, ACK_POLL_MS);
}

static int reply_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    ack_reply *r = RedisModule_GetBlockedClientPrivateData(ctx);
    if (r == NULL) return RedisModule_ReplyWithError(ctx, "ERR the wait for replicas ended");
    char buf[256];
    switch (r->outcome) {
    case ACK_GRANTED:
        RedisModule_ReplyWithArray(ctx, 3);
        RedisModule_ReplyWithLongLong(ctx, 1);
        RedisModule_ReplyWithLongLong(ctx, (long long)r->token);
        return RedisModule_ReplyWithLongLong(ctx, (long long)r->lease_left_ms);
    case ACK_NOT_HELD:
        return RedisModule_ReplyWithError(ctx, "ERR the replicas acknowledged the grant, but it is no longer held at "
                                               "this key (its lease ended, or the key was deleted, moved or renamed)");
    case ACK_DEMOTED:
        return RedisModule_ReplyWithError(ctx, "NOREPLICAS this server became a replica while the grant waited for "
                                               "acknowledgements; its new primary decides whether it stands");
    case ACK_RELEASED:
    case ACK_NOT_RELEASED:
        break;
    }
    snprintf(buf, sizeof(buf), "NOREPLICAS %lld of the %lld replicas asked for acknowledged the grant in time; %s",
             r->acked, r->needed,
             r->outcome == ACK_RELEASED ? "it was released"
                                        : "it is no longer held at this key (lease ended, or the key was deleted, "
                                          "moved or renamed), so nothing was released");
    return RedisModule_ReplyWithError(ctx, buf);
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
    snprintf(buf, sizeof(buf), "NOREPLICAS the wait for %lld replicas ended (CLIENT UNBLOCK); the grant is being "
             "taken back", needed);
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
                   uint64_t token, long long needed, uint64_t timeout_ms) {
    ack_wait *w = RedisModule_Calloc(1, sizeof(*w));
    w->key = RedisModule_CreateStringFromString(NULL, keyname);
    w->db = RedisModule_GetSelectedDb(ctx);
    w->owner = RedisModule_Alloc(owner_len ? owner_len : 1);
    memcpy(w->owner, owner, owner_len);
    w->owner_len = owner_len;
    w->token = token;
    w->needed = needed;
    w->deadline_ms = mc_now_ms() + timeout_ms;
    w->bc = RedisModule_BlockClient(ctx, reply_cb, timeout_cb, free_reply_cb, 0);
    RedisModule_SetDisconnectCallback(w->bc, disconnect_cb);
    w->next = waits;
    waits = w;
    arm(ctx, 0); /* runs after this command's write is propagated: then the target is noted */
    return REDISMODULE_OK;
}
