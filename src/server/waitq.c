/* waitq.c -- FIFO wait queues per key, served by module timers; see waitq.h. */
#include <string.h>

#include "server/waitq.h"

#include "core/keyslot.h"
#include "server/clock.h"
#include "server/cluster.h"
#include "server/keys.h"

#define PAUSE_RETRY_MS 10

typedef struct waitq waitq;

typedef struct waiter {
    RedisModuleBlockedClient *bc;
    const waitq_ops *ops;
    void *req;
    waitq *q;
    struct waiter *prev, *next;
} waiter;

struct waitq {
    int db;
    RedisModuleString *key; /* retained */
    RedisModuleString *id;  /* "<db>:<key>", the dict key (retained) */
    waiter *head, *tail;
    long long length;
    RedisModuleTimerID timer;
    int timer_armed;
};

/* What a served waiter's reply callback gets. */
typedef struct served {
    const waitq_ops *ops;
    void *reply;        /* the family's reply, or NULL with `error` */
    const char *error;  /* a static error reply instead */
} served;

#define ERR_SLOT_MOVED "TRYAGAIN the key's hash slot moved to another node while this client waited; retry"

static RedisModuleDict *queues;    /* id -> waitq */
static RedisModuleDict *by_client; /* blocked client handle -> waiter */
static long long total_waiting;

static waitq *find_queue(RedisModuleCtx *ctx, RedisModuleString *key) {
    if (total_waiting == 0) return NULL; /* the common case: nobody waits anywhere */
    char stackbuf[128];
    size_t len;
    char *id = mc_db_key_buf(RedisModule_GetSelectedDb(ctx), key, stackbuf, sizeof(stackbuf), &len);
    waitq *q = RedisModule_DictGetC(queues, id, len, NULL);
    if (id != stackbuf) RedisModule_Free(id);
    return q;
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

long long waitq_total(void) {
    return total_waiting;
}

static void unlink_waiter(waiter *w) {
    waitq *q = w->q;
    if (w->prev) w->prev->next = w->next; else q->head = w->next;
    if (w->next) w->next->prev = w->prev; else q->tail = w->prev;
    q->length--;
    total_waiting--;
    RedisModule_DictDelC(by_client, &w->bc, sizeof(w->bc), NULL);
}

static void free_waiter(waiter *w) {
    w->ops->free_req(w->req);
    RedisModule_Free(w);
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

static void arm(RedisModuleCtx *ctx, waitq *q, uint64_t in_ms) {
    if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
    q->timer = RedisModule_CreateTimer(ctx, (mstime_t)in_ms, serve, q);
    q->timer_armed = 1;
}

/* Timer callback: serve the queue's waiters in order while they can be served. */
static void serve(RedisModuleCtx *ctx, void *data) {
    waitq *q = data;
    q->timer_armed = 0;
    if (RedisModule_AvoidReplicaTraffic()) {
        arm(ctx, q, PAUSE_RETRY_MS); /* clients paused for writes: write nothing now */
        return;
    }
    int saved_db = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, q->db);
    uint64_t now_us = mc_now_us();
    /* In a cluster the key's slot may have moved away while clients waited:
     * serving them here would write into a slot this node no longer owns. */
    int moved = 0;
    if (mc_cluster_enabled) {
        size_t klen;
        const char *k = RedisModule_StringPtrLen(q->key, &klen);
        moved = !mc_slot_is_mine_fresh(ctx, keyslot_of(k, klen));
    }
    while (q->head) {
        waiter *w = q->head;
        void *reply = NULL;
        uint64_t retry_ms = 0;
        if (moved) {
            unlink_waiter(w);
            served *s = RedisModule_Calloc(1, sizeof(*s));
            s->ops = w->ops;
            s->error = ERR_SLOT_MOVED;
            RedisModule_UnblockClient(w->bc, s);
            free_waiter(w);
            continue;
        }
        if (!w->ops->try_serve(ctx, q->key, w->req, now_us, &reply, &retry_ms)) {
            if (retry_ms) arm(ctx, q, retry_ms); /* else: until kicked */
            break;
        }
        unlink_waiter(w);
        served *s = RedisModule_Calloc(1, sizeof(*s));
        s->ops = w->ops;
        s->reply = reply;
        RedisModule_UnblockClient(w->bc, s);
        free_waiter(w);
    }
    RedisModule_SelectDb(ctx, saved_db);
    drop_queue_if_empty(ctx, q);
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

/* Take the waiter of `bc` out of its queue; the next one may be served now. */
static waiter *leave(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = RedisModule_DictGetC(by_client, &bc, sizeof(bc), NULL);
    if (w == NULL) return NULL;
    waitq *q = w->q;
    int was_head = q->head == w;
    unlink_waiter(w);
    if (q->head == NULL) drop_queue_if_empty(ctx, q);
    else if (was_head) arm(ctx, q, 0);
    return w;
}

static int timeout_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argc;
    RedisModuleBlockedClient *bc = RedisModule_GetBlockedClientHandle(ctx);
    waiter *w = leave(ctx, bc);
    int rc = REDISMODULE_OK;
    if (w) {
        rc = w->ops->timeout_reply(ctx, argv[1], w->req);
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

void waitq_block(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString *key, void *req,
                 long long timeout_ms, uint64_t retry_ms) {
    int db = RedisModule_GetSelectedDb(ctx);
    RedisModuleString *id = mc_db_key_id(db, key);
    waitq *q = RedisModule_DictGet(queues, id, NULL);
    if (q == NULL) {
        q = RedisModule_Calloc(1, sizeof(*q));
        q->db = db;
        q->key = RedisModule_CreateStringFromString(NULL, key);
        q->id = id;
        RedisModule_DictSet(queues, id, q);
        if (retry_ms) arm(ctx, q, retry_ms);
    } else {
        RedisModule_FreeString(NULL, id);
    }
    waiter *w = RedisModule_Calloc(1, sizeof(*w));
    w->ops = ops;
    w->req = req;
    w->q = q;
    w->bc = RedisModule_BlockClient(ctx, reply_cb, timeout_cb, free_cb, timeout_ms);
    RedisModule_SetDisconnectCallback(w->bc, disconnect_cb);
    w->prev = q->tail;
    if (q->tail) q->tail->next = w; else q->head = w;
    q->tail = w;
    q->length++;
    total_waiting++;
    RedisModule_DictSetC(by_client, &w->bc, sizeof(w->bc), w);
}

void waitq_kick(RedisModuleCtx *ctx, RedisModuleString *key) {
    waitq *q = find_queue(ctx, key);
    if (q && q->head) arm(ctx, q, 0);
}

void waitq_init(void) {
    queues = RedisModule_CreateDict(NULL);
    by_client = RedisModule_CreateDict(NULL);
}
