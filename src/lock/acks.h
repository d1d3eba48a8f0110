/* SPDX-License-Identifier: BSD-3-Clause */
/* acks.h -- grants answered once replicas have acknowledged them (LOCK.ACQUIRE
 * ... ACKS numreplicas timeout-ms); see acks.c. */
#ifndef MC_LOCK_ACKS_H
#define MC_LOCK_ACKS_H

#include <stddef.h>
#include <stdint.h>

#include "redismodule.h"

/* The acquire of `owner` on `keyname` was just granted (token) and
 * replicated: block the client until `needed` online replicas have acknowledged
 * it, then answer the grant; after timeout_ms (or CLIENT UNBLOCK) take the grant
 * back and answer NOREPLICAS; if the client disconnects, take it back too. The
 * caller checked that the client can block. */
int lock_acks_wait(RedisModuleCtx *ctx, RedisModuleString *keyname, const char *owner, size_t owner_len,
                   uint64_t token, long long needed, uint64_t timeout_ms);

#endif
