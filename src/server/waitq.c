/* SPDX-License-Identifier: BSD-3-Clause */
/* waitq.c -- FIFO wait queues per key, served by module timers; see waitq.h.
 *
 * Each waiter keeps its absolute deadline. A queue keeps retry_at (when its
 * head is next tried; 0: when kicked) and min_deadline, a lower bound of its
 * waiters' deadlines: exact after a serve, possibly early after a waiter left
 * (the timer then fires early once and recomputes it), so a serve scans the
 * whole queue only when some deadline may have come.
 *
 * A multi-key waiter (waitq_block_all) is a group of waiter nodes, one in each
 * of its keys' queues, sharing one blocked client, request and deadline. A
 * queue whose head is such a node serves it only when the node heads every
 * one of its queues (else the queue waits: the queue where it is not yet at
 * the head reaches it in order and serves it then). Whatever ends the wait --
 * served, deadline, CLIENT UNBLOCK, disconnect, TRYAGAIN -- takes every node
 * out at once, answers once, and kicks the other queues whose head it was. */
#include <string.h>

#include "server/waitq.h"

#include "server/clock.h"
#include "server/cluster.h"
#include "server/keys.h"

#define PAUSE_RETRY_MS 10
#define NO_DEADLINE UINT64_MAX

typedef struct waitq waitq;
typedef struct group group;

typedef struct waiter {
    RedisModuleBlockedClient *bc;
    const waitq_ops *ops;
    void *req;
    uint64_t deadline_ms; /* Unix ms: answered "timed out" from then on, never granted */
    uint64_t blocked_ms;  /* Unix ms: when it started waiting (introspection) */
    uint64_t client_id;   /* the waiting client (introspection) */
    waitq *q;
    struct waiter *prev, *next;
    group *group;         /* a multi-key waiter's nodes (this one among them), else NULL */
    int was_head;         /* it headed its queue when it was taken out */
} waiter;

/* The nodes of one multi-key waiter, one per key (queue). */
struct group {
    int n;
    waiter *nodes[];
};

struct waitq {
    int db;
    RedisModuleString *key; /* retained */
    RedisModuleString *id;  /* "<db>:<key>", the dict key (retained) */
    waiter *head, *tail;
    long long length;
    uint64_t retry_at;      /* Unix ms of the head's next try; 0: only when kicked */
    uint64_t min_deadline;  /* <= every waiter's deadline; NO_DEADLINE when empty */
    int kicked;             /* the timer is armed to serve at once */
    RedisModuleTimerID timer;
    int timer_armed;
};

/* What a waiter's reply callback gets: the one answer of its wait, built when
 * it was answered (granted, refused for good, or timed out: ops->timed_out). */
typedef struct served {
    const waitq_ops *ops;
    void *reply;        /* the family's reply, or NULL with `error` */
    const char *error;  /* a static error reply instead */
} served;

#define ERR_SLOT_MOVED "TRYAGAIN the key's hash slot moved to another node while this client waited; retry"

static RedisModuleDict *queues;    /* id -> waitq */
static RedisModuleDict *by_client; /* blocked client handle -> waiter */
static long long total_waiting;
static RedisModuleCtx *detached; /* timers armed from type callbacks, which have no context */

/* The queue of `key` in db `db`, or NULL. */
static waitq *find_queue_in(int db, const RedisModuleString *key) {
    if (total_waiting == 0) return NULL; /* the common case: nobody waits anywhere */
    char stackbuf[128];
    size_t len;
    char *id = mc_db_key_buf(db, key, stackbuf, sizeof(stackbuf), &len);
    waitq *q = RedisModule_DictGetC(queues, id, len, NULL);
    if (id != stackbuf) RedisModule_Free(id);
    return q;
}

static waitq *find_queue(RedisModuleCtx *ctx, RedisModuleString *key) {
    return find_queue_in(RedisModule_GetSelectedDb(ctx), key);
}

int waitq_can_block(RedisModuleCtx *ctx) {
    int flags = RedisModule_GetContextFlags(ctx);
    return !(flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_DENY_BLOCKING |
                      REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING));
}

int waitq_busy(RedisModuleCtx *ctx, RedisModuleString *key) {
    waitq *q = find_queue(ctx, key);
    return q != NULL && q->head != NULL;
}

long long waitq_length(RedisModuleCtx *ctx, RedisModuleString *key) {
    waitq *q = find_queue(ctx, key);
    return q ? q->length : 0;
}

uint64_t waitq_next_try_ms(RedisModuleCtx *ctx, RedisModuleString *key, uint64_t now_ms) {
    waitq *q = find_queue(ctx, key);
    if (q == NULL || q->kicked || q->retry_at <= now_ms) return 0;
    return q->retry_at - now_ms;
}

long long waitq_each_of(RedisModuleCtx *ctx, RedisModuleString *key, const waitq_ops *const *ops, int nops,
                        waitq_visit fn, void *arg) {
    waitq *q = find_queue(ctx, key);
    long long n = 0;
    for (waiter *w = q ? q->head : NULL; w; w = w->next) {
        int match = 0;
        for (int i = 0; i < nops && !match; i++) match = w->ops == ops[i];
        if (!match) continue;
        if (fn) {
            waitq_waiter_info info = {w->req, w->blocked_ms, w->deadline_ms, w->client_id,
                                      w->group ? w->group->n : 1};
            fn(arg, &info);
        }
        n++;
    }
    return n;
}

long long waitq_each(RedisModuleCtx *ctx, RedisModuleString *key, const waitq_ops *ops, waitq_visit fn, void *arg) {
    return waitq_each_of(ctx, key, &ops, 1, fn, arg);
}

long long waitq_total(void) {
    return total_waiting;
}

long long waitq_max_length(const waitq_ops *ops) {
    long long max = 0;
    if (total_waiting == 0) return 0;
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(queues, "^", NULL, 0);
    waitq *q;
    while (RedisModule_DictNextC(it, NULL, (void **)&q))
        if (q->head && q->head->ops == ops && q->length > max) max = q->length;
    RedisModule_DictIteratorStop(it);
    return max;
}

/* Take one node out of its queue, noting whether it was the head. */
static void unlink_node(waiter *w) {
    waitq *q = w->q;
    w->was_head = q->head == w;
    if (w->prev) w->prev->next = w->next; else q->head = w->next;
    if (w->next) w->next->prev = w->prev; else q->tail = w->prev;
    q->length--;
}

/* Take the waiter of `w` out: w, or every node of its group. */
static void unlink_waiter(waiter *w) {
    if (w->group) {
        for (int i = 0; i < w->group->n; i++) unlink_node(w->group->nodes[i]);
    } else {
        unlink_node(w);
    }
    total_waiting--;
    RedisModule_DictDelC(by_client, &w->bc, sizeof(w->bc), NULL);
}

/* Free the waiter of `w` (unlinked): its request once, and every node. */
static void free_waiter(waiter *w) {
    w->ops->free_req(w->req);
    group *g = w->group;
    if (g == NULL) {
        RedisModule_Free(w);
        return;
    }
    for (int i = 0; i < g->n; i++) RedisModule_Free(g->nodes[i]);
    RedisModule_Free(g);
}

/* Whether the multi-key waiter `g` heads every one of its queues. */
static int heads_all(const group *g) {
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i]->q->head != g->nodes[i]) return 0;
    return 1;
}

static void drop_queue_if_empty(RedisModuleCtx *ctx, waitq *q) {
    if (q->head) return;
    if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
    RedisModule_DictDel(queues, q->id, NULL);
    RedisModule_FreeString(NULL, q->id);
    RedisModule_FreeString(NULL, q->key);
    RedisModule_Free(q);
}

static void serve(RedisModuleCtx *ctx, void *data);
static void kick(RedisModuleCtx *ctx, waitq *q);

/* After the waiter of `w` was unlinked: each of its queues other than
 * `current` (NULL: all of them) is dropped when empty, or served at once when
 * it headed it (the next waiter may fit now). */
static void settle(RedisModuleCtx *ctx, waiter *w, waitq *current) {
    int n = w->group ? w->group->n : 1;
    for (int i = 0; i < n; i++) {
        waiter *node = w->group ? w->group->nodes[i] : w;
        waitq *q = node->q;
        if (q == current) continue;
        if (q->head == NULL) drop_queue_if_empty(ctx, q);
        else if (node->was_head) kick(ctx, q);
    }
}

/* (Re)arm the queue's one timer to fire in_ms from now. */
static void arm(RedisModuleCtx *ctx, waitq *q, uint64_t in_ms) {
    if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
    q->timer = RedisModule_CreateTimer(ctx, (mstime_t)in_ms, serve, q);
    q->timer_armed = 1;
}

/* Arm the timer for the earlier of the head's next try and the earliest
 * deadline, unless a kick already has it fire at once. */
static void schedule(RedisModuleCtx *ctx, waitq *q, uint64_t now_ms) {
    if (q->kicked || q->head == NULL) return;
    uint64_t at = q->min_deadline;
    if (q->retry_at && q->retry_at < at) at = q->retry_at;
    if (at == NO_DEADLINE) {
        if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
        q->timer_armed = 0;
        return;
    }
    arm(ctx, q, at > now_ms ? at - now_ms : 0);
}

/* Unblock `w` (already out of its queue) with its one answer, and free it. */
static void answer(waiter *w, void *reply, const char *error) {
    served *s = RedisModule_Calloc(1, sizeof(*s));
    s->ops = w->ops;
    s->reply = reply;
    s->error = error;
    RedisModule_UnblockClient(w->bc, s);
    free_waiter(w);
}

/* Answer every waiter whose deadline is at or before now_ms with the family's
 * timeout reply (they hold nothing); recompute the queue's min_deadline. */
static void expire_due(RedisModuleCtx *ctx, waitq *q, uint64_t now_us) {
    uint64_t now_ms = now_us / 1000;
    if (q->min_deadline > now_ms) return;
    uint64_t min = NO_DEADLINE;
    waiter *next;
    for (waiter *w = q->head; w; w = next) {
        next = w->next;
        if (w->deadline_ms > now_ms) {
            if (w->deadline_ms < min) min = w->deadline_ms;
            continue;
        }
        unlink_waiter(w);
        settle(ctx, w, q);
        answer(w, w->ops->timed_out(ctx, q->key, w->req, now_us), NULL);
    }
    q->min_deadline = min;
}

/* Whether the queue's key is in a hash slot this node no longer serves. */
static int slot_moved(RedisModuleCtx *ctx, waitq *q) {
    return !mc_key_is_mine_now(ctx, q->key);
}

/* Timer callback: answer the waiters whose deadline came, then serve the rest in
 * order while they can be served, then re-arm. The clock is read once. */
static void serve(RedisModuleCtx *ctx, void *data) {
    waitq *q = data;
    q->timer_armed = 0;
    q->kicked = 0;
    int saved_db = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, q->db);
    uint64_t now_us = mc_now_us(), now_ms = now_us / 1000;
    expire_due(ctx, q, now_us);
    if (q->head && RedisModule_AvoidReplicaTraffic()) {
        /* clients paused for writes: grant nothing now */
        q->retry_at = now_ms + PAUSE_RETRY_MS;
    } else if (q->head && slot_moved(ctx, q)) {
        /* serving here would write into a slot this node no longer owns */
        while (q->head) {
            waiter *w = q->head;
            unlink_waiter(w);
            settle(ctx, w, q);
            answer(w, NULL, ERR_SLOT_MOVED);
        }
    } else {
        q->retry_at = 0;
        while (q->head) {
            waiter *w = q->head;
            void *reply = NULL;
            uint64_t retry_ms = 0;
            if (w->group && !heads_all(w->group)) {
                /* it waits for its other queues, and this one with it (nobody
                 * passes it); the queue where it is not yet at the head serves
                 * it once it is */
                q->retry_at = 0;
                break;
            }
            if (!w->ops->try_serve(ctx, q->key, w->req, now_us, &reply, &retry_ms)) {
                q->retry_at = retry_ms ? now_ms + retry_ms : 0; /* 0: until kicked */
                break;
            }
            unlink_waiter(w);
            settle(ctx, w, q);
            answer(w, reply, NULL);
        }
    }
    RedisModule_SelectDb(ctx, saved_db);
    if (q->head) schedule(ctx, q, now_ms);
    else drop_queue_if_empty(ctx, q);
}

static int reply_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    served *s = RedisModule_GetBlockedClientPrivateData(ctx);
    if (s->error) return RedisModule_ReplyWithError(ctx, s->error);
    return s->ops->reply(ctx, s->reply);
}

static void free_cb(RedisModuleCtx *ctx, void *privdata) {
    (void)ctx;
    served *s = privdata;
    if (s == NULL) return;
    if (s->reply) s->ops->free_reply(s->reply);
    RedisModule_Free(s);
}

/* Take the waiter of `bc` out of its queues; the next ones may be served now. */
static waiter *leave(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = RedisModule_DictGetC(by_client, &bc, sizeof(bc), NULL);
    if (w == NULL) return NULL;
    unlink_waiter(w);
    settle(ctx, w, NULL);
    return w;
}

/* Redis ends a wait only through CLIENT UNBLOCK (waiters block with no Redis
 * timeout): answered like a deadline, holding nothing. (A multi-key family's
 * timed_out gets the command's argv[1], which need not be a key: it reads its
 * keys from its request.) */
static int timeout_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argc;
    RedisModuleBlockedClient *bc = RedisModule_GetBlockedClientHandle(ctx);
    waiter *w = leave(ctx, bc);
    int rc;
    if (w) {
        void *reply = w->ops->timed_out(ctx, argv[1], w->req, mc_now_us());
        rc = w->ops->reply(ctx, reply);
        w->ops->free_reply(reply);
        free_waiter(w);
    } else {
        rc = RedisModule_ReplyWithError(ctx, "ERR wait ended");
    }
    RedisModule_UnblockClient(bc, NULL); /* releases the handle; the reply is sent */
    return rc;
}

static void disconnect_cb(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = leave(ctx, bc);
    if (w) {
        free_waiter(w);
        RedisModule_UnblockClient(bc, NULL);
    }
}

/* The queue of `key` in the selected db, created (first try after retry_ms;
 * 0: when kicked) when there is none. */
static waitq *queue_for(RedisModuleCtx *ctx, RedisModuleString *key, uint64_t now_ms, uint64_t retry_ms) {
    int db = RedisModule_GetSelectedDb(ctx);
    RedisModuleString *id = mc_db_key_id(db, key);
    waitq *q = RedisModule_DictGet(queues, id, NULL);
    if (q == NULL) {
        q = RedisModule_Calloc(1, sizeof(*q));
        q->db = db;
        q->key = RedisModule_CreateStringFromString(NULL, key);
        q->id = id;
        q->min_deadline = NO_DEADLINE;
        q->retry_at = retry_ms ? now_ms + retry_ms : 0;
        RedisModule_DictSet(queues, id, q);
    } else {
        RedisModule_FreeString(NULL, id);
    }
    return q;
}

/* Append node `w` (its deadline set) to `q` and re-arm the queue's timer when
 * the node is its earliest deadline or its head. */
static void enqueue(RedisModuleCtx *ctx, waitq *q, waiter *w, uint64_t now_ms) {
    w->q = q;
    w->prev = q->tail;
    if (q->tail) q->tail->next = w; else q->head = w;
    q->tail = w;
    q->length++;
    if (w->deadline_ms < q->min_deadline) {
        q->min_deadline = w->deadline_ms;
        schedule(ctx, q, now_ms);
    } else if (q->head == w) {
        schedule(ctx, q, now_ms);
    }
}

/* Block the calling client with no Redis timeout: only this module unblocks it
 * (see waitq.h). */
static RedisModuleBlockedClient *block_client(RedisModuleCtx *ctx) {
    RedisModuleBlockedClient *bc = RedisModule_BlockClient(ctx, reply_cb, timeout_cb, free_cb, 0);
    RedisModule_SetDisconnectCallback(bc, disconnect_cb);
    return bc;
}

void waitq_block(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString *key, void *req, uint64_t now_ms,
                 uint64_t wait_ms, uint64_t retry_ms) {
    waitq *q = queue_for(ctx, key, now_ms, retry_ms);
    waiter *w = RedisModule_Calloc(1, sizeof(*w));
    w->ops = ops;
    w->req = req;
    w->deadline_ms = now_ms + wait_ms;
    w->blocked_ms = now_ms;
    w->client_id = RedisModule_GetClientId(ctx);
    w->bc = block_client(ctx);
    total_waiting++;
    RedisModule_DictSetC(by_client, &w->bc, sizeof(w->bc), w);
    enqueue(ctx, q, w, now_ms);
}

void waitq_block_all(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString **keys, int n, void *req,
                     uint64_t now_ms, uint64_t wait_ms, uint64_t retry_ms) {
    group *g = RedisModule_Calloc(1, sizeof(*g) + (size_t)n * sizeof(g->nodes[0]));
    g->n = n;
    RedisModuleBlockedClient *bc = block_client(ctx);
    uint64_t client_id = RedisModule_GetClientId(ctx);
    for (int i = 0; i < n; i++) {
        waiter *w = RedisModule_Calloc(1, sizeof(*w));
        w->ops = ops;
        w->req = req;
        w->deadline_ms = now_ms + wait_ms;
        w->blocked_ms = now_ms;
        w->client_id = client_id;
        w->bc = bc;
        w->group = g;
        g->nodes[i] = w;
    }
    total_waiting++;
    RedisModule_DictSetC(by_client, &bc, sizeof(bc), g->nodes[0]);
    for (int i = 0; i < n; i++) enqueue(ctx, queue_for(ctx, keys[i], now_ms, retry_ms), g->nodes[i], now_ms);
}

/* Have `q`'s timer serve it at once (when anyone waits). */
static void kick(RedisModuleCtx *ctx, waitq *q) {
    if (q && q->head) {
        q->kicked = 1;
        arm(ctx, q, 0);
    }
}

void waitq_kick(RedisModuleCtx *ctx, RedisModuleString *key) {
    kick(ctx, find_queue(ctx, key));
}

void waitq_kick_db(RedisModuleCtx *ctx, int db) {
    if (total_waiting == 0) return;
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(queues, "^", NULL, 0);
    waitq *q;
    /* arm() changes no dict entry: kicking while iterating is safe */
    while (RedisModule_DictNextC(it, NULL, (void **)&q)) {
        if (db == -1 || q->db == db) kick(ctx, q);
    }
    RedisModule_DictIteratorStop(it);
}

void waitq_key_gone(int db, const RedisModuleString *key) {
    /* Not in a cluster: there MIGRATE deletes the key while its slot is still
     * this node's, and a waiter served then would write into a slot being
     * moved; waiters there are served at their next try (or get TRYAGAIN). */
    if (mc_cluster_enabled || detached == NULL) return;
    kick(detached, find_queue_in(db, key)); /* served by the timer, after the command that removed the key */
}

void waitq_init(RedisModuleCtx *ctx) {
    queues = RedisModule_CreateDict(NULL);
    by_client = RedisModule_CreateDict(NULL);
    detached = RedisModule_GetDetachedThreadSafeContext(ctx);
}
