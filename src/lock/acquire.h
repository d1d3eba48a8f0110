/* SPDX-License-Identifier: BSD-3-Clause */
/* acquire.h -- granting a lock, a semaphore permit or a concurrency slot, at
 * once or from the wait queue (WAIT: first come first served, no polling). */
#ifndef MC_LOCK_ACQUIRE_H
#define MC_LOCK_ACQUIRE_H

#include <stddef.h>
#include <stdint.h>

#include "redismodule.h"
#include "server/waitq.h"

typedef struct lock_req {
    int ephemeral;      /* RL.CONCURRENCY: the key goes once nobody holds it */
    int rl_style;       /* RL.CONCURRENCY: reply [allowed, remaining, retry_after_ms, reset_after_ms] */
    char *owner;
    size_t owner_len;
    uint64_t lease_ms;
    uint64_t delay_ms;  /* LOCKDELAY: the grant's lock-delay (core/lock.h), 0: none */
    uint64_t permits;
    uint64_t weight;    /* TAKE: permits to take at once (0 means 1) */
    int reentrant;
    int shared;         /* READ: a shared hold of a read-write lock (core/lock.h) */
    uint64_t client_id; /* SESSION: the requesting connection, else 0 */
    long long acks;     /* ACKS: replicas that must acknowledge a grant before it is answered (0: none) */
    uint64_t acks_timeout_ms;
    uint64_t blocked_us; /* a waiter: when it was queued (Unix µs; the wait-time metric) */
} lock_req;

/* Answer an acquire at once, or block the client in the key's queue (WAIT
 * wait_ms > 0, where blocking is possible). While clients wait on the key a
 * newcomer is not served before them (server/waitq.h): it queues with WAIT,
 * else it is refused. Replies in either shape: LOCK.ACQUIRE's [granted, token,
 * ms] (refused, a WAIT that ran out included: [0, -1, ms until the earliest
 * lease ends, -1 when nobody holds it]) or, with rl_style, RL.CONCURRENCY's
 * [allowed, remaining, retry_after_ms, reset_after_ms] (refused, on every path:
 * retry_after_ms until the earliest lease ends, 0 when no slot is held;
 * reset_after_ms until every lease ends). */
int lock_acquire_flow(RedisModuleCtx *ctx, RedisModuleString *keyname, lock_req *req, uint64_t wait_ms);

/* The longest queue of lock and concurrency waiters on one key now (INFO). */
long long lock_max_queue_length(void);

/* The wait-queue operations of lock waiters (their requests are lock_req), for
 * introspection (server/waitq.h's waitq_each). */
const waitq_ops *lock_waitq_ops(void);

/* Reply the error of an acquire (or a pool command) whose PERMITS n differs
 * from the held semaphore's base size `permits`. */
int lock_reply_permits_differ(RedisModuleCtx *ctx, uint32_t permits);

#endif
