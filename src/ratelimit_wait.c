/* ratelimit_wait.c -- waiting for capacity without polling (the WAIT option of
 * RL.GCRA and RL.WINDOW).
 *
 * A request that does not fit blocks its client (RedisModule_BlockClient) in a
 * FIFO queue kept per key. One module timer per queue fires when the head of
 * the queue can fit (the limiter tells when: retry_after); the timer serves
 * waiters in arrival order, applying each request exactly as the command would
 * (state written, expiry set, change replicated with absolute times), and
 * stops at the first that still does not fit. So waiters are woken when
 * capacity returns, first come first served, with no polling by the clients.
 * RL.REFUND wakes a queue at once. A waiter that times out gets the refused
 * reply; one that disconnects leaves the queue.
 *
 * The queues and timers live in memory only: they hold clients, which do not
 * survive a restart or a failover either. Inside MULTI, Lua or AOF replay the
 * commands answer at once (rl_can_block). While clients are paused for writes
 * (CLIENT PAUSE WRITE, failover), the timer writes nothing and retries later. */
#include <string.h>

#include "ratelimit.h"

#define PAUSE_RETRY_MS 10

typedef struct wait_queue wait_queue;

typedef struct waiter {
    RedisModuleBlockedClient *bc;
    rl_request req;
    wait_queue *q;
    struct waiter *prev, *next;
} waiter;

struct wait_queue {
    int db;
    RedisModuleString *key;   /* the limiter's key (retained) */
    RedisModuleString *id;    /* "<db>:<key>", the dict key (retained) */
    waiter *head, *tail;
    RedisModuleTimerID timer;
    int timer_armed;
};

/* The reply a served or timed-out waiter gets. */
typedef struct wait_reply {
    int error;          /* an RL_ERR_* code, or RL_OK */
    int stat;           /* RL_STAT_* of the command */
    rl_result result;
} wait_reply;

static RedisModuleDict *queues;   /* id -> wait_queue */
static RedisModuleDict *by_client; /* blocked client pointer -> waiter */

static RedisModuleString *queue_id(RedisModuleCtx *ctx, RedisModuleString *key) {
    size_t len;
    const char *k = RedisModule_StringPtrLen(key, &len);
    return RedisModule_CreateStringPrintf(NULL, "%d:%.*s", RedisModule_GetSelectedDb(ctx), (int)len, k);
}

int rl_can_block(RedisModuleCtx *ctx) {
    int flags = RedisModule_GetContextFlags(ctx);
    return !(flags & (REDISMODULE_CTX_FLAGS_MULTI | REDISMODULE_CTX_FLAGS_LUA | REDISMODULE_CTX_FLAGS_DENY_BLOCKING |
                      REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING));
}

int rl_wait_queued(RedisModuleCtx *ctx, RedisModuleString *keyname) {
    RedisModuleString *id = queue_id(ctx, keyname);
    wait_queue *q = RedisModule_DictGet(queues, id, NULL);
    RedisModule_FreeString(NULL, id);
    return q != NULL && q->head != NULL;
}

static void unlink_waiter(waiter *w) {
    wait_queue *q = w->q;
    if (w->prev) w->prev->next = w->next; else q->head = w->next;
    if (w->next) w->next->prev = w->prev; else q->tail = w->prev;
    RedisModule_DictDelC(by_client, &w->bc, sizeof(w->bc), NULL);
}

static void drop_queue_if_empty(RedisModuleCtx *ctx, wait_queue *q) {
    if (q->head) return;
    if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
    RedisModule_DictDel(queues, q->id, NULL);
    RedisModule_FreeString(NULL, q->id);
    RedisModule_FreeString(NULL, q->key);
    RedisModule_Free(q);
}

static void serve_queue(RedisModuleCtx *ctx, void *data);

static void arm_timer(RedisModuleCtx *ctx, wait_queue *q, uint64_t in_ms) {
    if (q->timer_armed) RedisModule_StopTimer(ctx, q->timer, NULL);
    q->timer = RedisModule_CreateTimer(ctx, (mstime_t)in_ms, serve_queue, q);
    q->timer_armed = 1;
}

/* Serve the queue's waiters in order while their requests fit. */
static void serve_queue(RedisModuleCtx *ctx, void *data) {
    wait_queue *q = data;
    q->timer_armed = 0;
    if (RedisModule_AvoidReplicaTraffic()) {
        arm_timer(ctx, q, PAUSE_RETRY_MS); /* clients paused for writes: no writes now */
        return;
    }
    int saved_db = RedisModule_GetSelectedDb(ctx);
    RedisModule_SelectDb(ctx, q->db);
    uint64_t now_us = mc_now_us();
    while (q->head) {
        waiter *w = q->head;
        wait_reply *rep = RedisModule_Calloc(1, sizeof(*rep));
        rep->stat = w->req.kind == RL_GCRA ? RL_STAT_GCRA : RL_STAT_WINDOW;
        rep->error = rl_eval(ctx, q->key, &w->req, now_us, 1, &rep->result);
        if (rep->error == RL_OK && !rep->result.allowed && rep->result.retry_after_ms >= 0) {
            /* The head does not fit yet: nobody behind it jumps the queue. */
            uint64_t retry = (uint64_t)rep->result.retry_after_ms;
            RedisModule_Free(rep);
            arm_timer(ctx, q, retry ? retry : 1);
            break;
        }
        unlink_waiter(w);
        RedisModule_UnblockClient(w->bc, rep);
        RedisModule_Free(w);
    }
    RedisModule_SelectDb(ctx, saved_db);
    drop_queue_if_empty(ctx, q);
}

/* Reply callback: the waiter was served (or its request became impossible). */
static int wait_reply_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    wait_reply *rep = RedisModule_GetBlockedClientPrivateData(ctx);
    if (rep->error != RL_OK) return rl_reply_error(ctx, rep->error);
    rl_stat(rep->stat, rep->result.allowed);
    return rl_reply_result(ctx, &rep->result);
}

static void wait_free_cb(RedisModuleCtx *ctx, void *privdata) {
    (void)ctx;
    RedisModule_Free(privdata);
}

/* Leave the queue: on timeout (with a refused reply) or on disconnect. */
static waiter *leave_queue(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = RedisModule_DictGetC(by_client, &bc, sizeof(bc), NULL);
    if (w == NULL) return NULL;
    wait_queue *q = w->q;
    int was_head = q->head == w;
    unlink_waiter(w);
    if (q->head == NULL) {
        drop_queue_if_empty(ctx, q);
    } else if (was_head) {
        arm_timer(ctx, q, 0); /* the next one may fit already */
    }
    return w;
}

/* Timeout callback: reply with what the limiter says now, refused. */
static int wait_timeout_cb(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argc;
    RedisModuleBlockedClient *bc = RedisModule_GetBlockedClientHandle(ctx);
    waiter *w = leave_queue(ctx, bc);
    rl_result res = {0, 0, -1, 0};
    if (w) {
        if (rl_eval(ctx, argv[1], &w->req, mc_now_us(), 0, &res) != RL_OK) memset(&res, 0, sizeof(res));
        res.allowed = 0;
        if (res.retry_after_ms < 0) res.retry_after_ms = 0;
        rl_stat(w->req.kind == RL_GCRA ? RL_STAT_GCRA : RL_STAT_WINDOW, 0);
        RedisModule_Free(w);
    }
    RedisModule_UnblockClient(bc, NULL); /* frees the handle; the client is already answered */
    return rl_reply_result(ctx, &res);
}

static void wait_disconnect_cb(RedisModuleCtx *ctx, RedisModuleBlockedClient *bc) {
    waiter *w = leave_queue(ctx, bc);
    if (w) {
        RedisModule_Free(w);
        RedisModule_UnblockClient(bc, NULL);
    }
}

void rl_wait_block(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, long long timeout_ms,
                   uint64_t retry_ms) {
    RedisModuleString *id = queue_id(ctx, keyname);
    wait_queue *q = RedisModule_DictGet(queues, id, NULL);
    if (q == NULL) {
        q = RedisModule_Calloc(1, sizeof(*q));
        q->db = RedisModule_GetSelectedDb(ctx);
        q->key = RedisModule_CreateStringFromString(NULL, keyname);
        q->id = id;
        RedisModule_DictSet(queues, id, q);
        arm_timer(ctx, q, retry_ms ? retry_ms : 1);
    } else {
        RedisModule_FreeString(NULL, id);
    }
    waiter *w = RedisModule_Calloc(1, sizeof(*w));
    w->req = *r;
    w->q = q;
    w->bc = RedisModule_BlockClient(ctx, wait_reply_cb, wait_timeout_cb, wait_free_cb, timeout_ms);
    RedisModule_SetDisconnectCallback(w->bc, wait_disconnect_cb);
    w->prev = q->tail;
    if (q->tail) q->tail->next = w; else q->head = w;
    q->tail = w;
    RedisModule_DictSetC(by_client, &w->bc, sizeof(w->bc), w);
}

void rl_wait_kick(RedisModuleCtx *ctx, RedisModuleString *keyname) {
    RedisModuleString *id = queue_id(ctx, keyname);
    wait_queue *q = RedisModule_DictGet(queues, id, NULL);
    RedisModule_FreeString(NULL, id);
    if (q && q->head) arm_timer(ctx, q, 0);
}

int rl_wait_init(RedisModuleCtx *ctx) {
    (void)ctx;
    queues = RedisModule_CreateDict(NULL);
    by_client = RedisModule_CreateDict(NULL);
    return REDISMODULE_OK;
}
