/* waitq.h -- clients waiting on a key, without polling, first come first served.
 *
 * A command that cannot be served yet blocks its client (RedisModule_BlockClient)
 * in a FIFO queue kept per (db, key). Whoever may make room -- a module timer at
 * the time the head of the queue can be served, or a command that frees
 * something (release, refund) calling waitq_kick -- serves the queue: it asks
 * the family's try_serve for the head, unblocks it with the result, and goes on
 * down the queue, stopping at the first waiter that does not fit, so nobody
 * jumps the queue. A waiter that times out gets the family's timeout reply; one
 * that disconnects leaves the queue.
 *
 * Queues and timers live in memory: they hold clients, which do not survive a
 * restart or failover either. In a cluster, waiters whose key's slot has moved
 * to another node by the time they would be served get TRYAGAIN (their client
 * retries on the new owner) instead of a write into a slot this node lost. While clients are paused for writes (CLIENT PAUSE
 * WRITE, failover) nothing is served and the timer retries shortly after. Used
 * by the rate limits (WAIT) and the locks. */
#ifndef MC_WAITQ_H
#define MC_WAITQ_H

#include <stdint.h>

#include "redismodule.h"

typedef struct waitq_ops {
    /* Try to serve `req` on `key` at now_us, in a context whose db is the key's.
     * Served (or failed for good): return 1 with *reply set (handed to reply()).
     * Not yet: return 0 with *retry_ms = when to try again (0: only when kicked). */
    int (*try_serve)(RedisModuleCtx *ctx, RedisModuleString *key, void *req, uint64_t now_us, void **reply,
                     uint64_t *retry_ms);
    /* Reply to the served client with `reply` (then freed with free_reply). */
    int (*reply)(RedisModuleCtx *ctx, void *reply);
    /* Reply to a client whose wait timed out. */
    int (*timeout_reply)(RedisModuleCtx *ctx, RedisModuleString *key, void *req);
    void (*free_req)(void *req);
    void (*free_reply)(void *reply);
} waitq_ops;

/* Whether clients are waiting on this key (a newcomer must then queue behind them). */
int waitq_busy(RedisModuleCtx *ctx, RedisModuleString *key);

/* Number of clients waiting on this key. */
long long waitq_length(RedisModuleCtx *ctx, RedisModuleString *key);

/* Block the calling client on `key` with `req` (owned by the queue from now on)
 * for at most timeout_ms (> 0); first try after retry_ms (0: when kicked). */
void waitq_block(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString *key, void *req,
                 long long timeout_ms, uint64_t retry_ms);

/* Something was freed on `key`: serve its queue as soon as possible. */
void waitq_kick(RedisModuleCtx *ctx, RedisModuleString *key);

/* Clients currently waiting, over all keys (INFO). */
long long waitq_total(void);

/* Blocking is possible here (not MULTI, Lua, AOF replay, the replication stream). */
int waitq_can_block(RedisModuleCtx *ctx);

void waitq_init(void);

#endif
