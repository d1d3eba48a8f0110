/* SPDX-License-Identifier: BSD-3-Clause */
/* multi.h -- multi-key locks (LOCK.ACQUIRE_ALL, LOCK.RELEASE_ALL,
 * LOCK.EXTEND_ALL): several exclusive locks of one hash slot, acquired all or
 * none, waited for without holding any part, released together (multi.c). */
#ifndef MC_LOCK_MULTI_H
#define MC_LOCK_MULTI_H

#include "redismodule.h"
#include "server/waitq.h"

/* Register the commands. REDISMODULE_OK or REDISMODULE_ERR. */
int lock_multi_register(RedisModuleCtx *ctx);

/* The wait-queue operations of multi-key waiters (their requests begin with a
 * lock_req), for introspection (waitq_each). */
const waitq_ops *lock_multi_waitq_ops(void);

#endif
