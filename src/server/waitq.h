/* SPDX-License-Identifier: BSD-3-Clause */
/* waitq.h -- clients waiting on a key, without polling, first come first served.
 *
 * A command that cannot be served yet blocks its client (RedisModule_BlockClient,
 * with no Redis timeout) in a FIFO queue kept per (db, key), with the absolute
 * deadline (Unix ms, server/clock.h) its WAIT gives it. One module timer per
 * queue fires at the earlier of the head's next try and the earliest deadline;
 * a command that frees something (release, refund) fires it at once
 * (waitq_kick). Serving a queue at `now` first answers every waiter whose
 * deadline has come with the family's timeout reply -- a waiter is never
 * granted at or past its deadline, and one answered "timed out" holds nothing --
 * then asks the family's try_serve for the head, unblocks it with the result,
 * and goes on down the queue, stopping at the first waiter that does not fit.
 * Only this module unblocks a waiter, so each gets exactly one reply (Redis's
 * own blocking timeout, which could fire in the same event-loop iteration as a
 * grant and drop its reply, is not used). CLIENT UNBLOCK ends a wait like its
 * deadline; a client that disconnects leaves the queue.
 *
 * Fairness, one rule for every family: while clients wait on a key, a later
 * caller -- waiting or not -- is not served before them. One that waits queues
 * at the tail; one that does not is refused at once, with the family's retry
 * estimate (a lock: the ms until its earliest lease ends; a rate limit: when
 * its request could fit, and not before the queue's next try). Only a holder
 * re-entering a lock it already holds is not behind the queue.
 *
 * Queues and timers live in memory: they hold clients, which do not survive a
 * restart or failover either. In a cluster, waiters whose key's slot has moved
 * to another node by the time they would be served get TRYAGAIN (their client
 * retries on the new owner) instead of a write into a slot this node lost.
 * While clients are paused for writes (CLIENT PAUSE WRITE, failover) nobody is
 * granted and the timer retries shortly after; deadlines are still answered.
 * Used by the rate limits (WAIT) and the locks.
 *
 * Multi-key waiters (waitq_block_all: a request that needs several keys of
 * one db at once, e.g. LOCK.ACQUIRE_ALL) queue in every key's queue at once,
 * in arrival order, and are tried only when they head all of them: then all
 * of their entries leave together and the client gets one reply. Because
 * every queue is appended in arrival order, the earliest waiter heads all its
 * queues first: waiters never wait for each other in a cycle, and a waiter
 * holds no key while it waits. The cost: a queue whose head is a multi-key
 * waiter still waiting for its other keys waits too (nobody passes it), even
 * if its own key is free -- so a client that holds one of those other keys and
 * then waits for this one waits until its own lease ends or its wait runs out
 * (hold-and-wait; the family documents it). A deadline, CLIENT UNBLOCK, a disconnect or TRYAGAIN takes the waiter
 * out of every queue once and answers it once; the queues it headed are then
 * served at once. */
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
    /* The reply (handed to reply()) of a waiter whose wait ended unserved at
     * now_us: refused, holding nothing, with the family's retry estimate. Reads
     * the key only (it may run while writes are paused). */
    void *(*timed_out)(RedisModuleCtx *ctx, RedisModuleString *key, void *req, uint64_t now_us);
    void (*free_req)(void *req);
    void (*free_reply)(void *reply);
} waitq_ops;

/* Whether clients are waiting on this key (a newcomer must then queue behind them). */
int waitq_busy(RedisModuleCtx *ctx, RedisModuleString *key);

/* Number of clients waiting on this key. */
long long waitq_length(RedisModuleCtx *ctx, RedisModuleString *key);

/* Ms from now_ms until the head of this key's queue is next tried (0: nobody
 * waits, or only a kick serves it). */
uint64_t waitq_next_try_ms(RedisModuleCtx *ctx, RedisModuleString *key, uint64_t now_ms);

/* Block the calling client on `key` with `req` (owned by the queue from now on)
 * until now_ms + wait_ms (wait_ms > 0) at most; first try after retry_ms (0:
 * when kicked). now_ms is the command's one clock reading. */
void waitq_block(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString *key, void *req, uint64_t now_ms,
                 uint64_t wait_ms, uint64_t retry_ms);

/* waitq_block for a request on the n keys keys[0..n) (n >= 1, distinct, in
 * the selected db) at once: queued at the tail of each key's queue, tried
 * (ops->try_serve, with any one of the keys: the request names its own) only
 * when it heads every one of them, answered once. The keys are only read
 * here. ops->timed_out may get a `key` that is none of them (CLIENT UNBLOCK:
 * the command's argv[1]). */
void waitq_block_all(RedisModuleCtx *ctx, const waitq_ops *ops, RedisModuleString **keys, int n, void *req,
                     uint64_t now_ms, uint64_t wait_ms, uint64_t retry_ms);

/* Something was freed on `key`: serve its queue as soon as possible. */
void waitq_kick(RedisModuleCtx *ctx, RedisModuleString *key);

/* Database `db` (-1: every database) was flushed: serve every queue there as
 * soon as possible (their keys are gone, so the head waiters fit now). */
void waitq_kick_db(RedisModuleCtx *ctx, int db);

/* One waiter, as introspection sees it. */
typedef struct waitq_waiter_info {
    const void *req;      /* the family's request */
    uint64_t blocked_ms;  /* Unix ms: when it started waiting */
    uint64_t deadline_ms; /* Unix ms: when its WAIT runs out */
    uint64_t client_id;   /* the waiting client */
    int nkeys;            /* keys it waits for at once (waitq_block_all), else 1 */
} waitq_waiter_info;
typedef void (*waitq_visit)(void *arg, const waitq_waiter_info *w);

/* Call fn (may be NULL) for each waiter on `key` queued with `ops`, head first;
 * returns how many there are. Reads only. */
long long waitq_each(RedisModuleCtx *ctx, RedisModuleString *key, const waitq_ops *ops, waitq_visit fn, void *arg);

/* The same for the waiters queued with any of ops[0..nops), in queue order. */
long long waitq_each_of(RedisModuleCtx *ctx, RedisModuleString *key, const waitq_ops *const *ops, int nops,
                        waitq_visit fn, void *arg);

/* Clients currently waiting, over all keys (INFO). */
long long waitq_total(void);

/* The longest queue of waiters served by `ops` (one family's), 0 when none
 * (INFO; O(queues)). */
long long waitq_max_length(const waitq_ops *ops);

/* Blocking is possible here (not MULTI, Lua, AOF replay, the replication stream). */
int waitq_can_block(RedisModuleCtx *ctx);

/* The key `key` of db `db` left the keyspace (deleted, expired, evicted,
 * overwritten, renamed or moved away; called from a type's unlink callback,
 * which has no context): serve its queue just after the current command, as its
 * head waiter may fit now. Not in a cluster (see waitq.c). */
void waitq_key_gone(int db, const RedisModuleString *key);

void waitq_init(RedisModuleCtx *ctx);

#endif
