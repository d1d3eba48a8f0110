/* SPDX-License-Identifier: BSD-3-Clause */
/* sessions.h -- SESSION ties a holder to its connection: when the connection
 * closes, its permits are released at once (the lease stays the fallback, e.g.
 * after a failover, where the new primary never sees the disconnect). */
#ifndef MC_LOCK_SESSIONS_H
#define MC_LOCK_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "redismodule.h"

/* Subscribe to client disconnections. REDISMODULE_OK or REDISMODULE_ERR. */
int sessions_init(RedisModuleCtx *ctx);

/* Client `client_id` was granted (db, key, owner) with SESSION: release it when
 * that client disconnects. Known entries are not added twice. */
void session_add(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner, size_t len);

/* The holder of a session permit released it: forget the entry. */
void session_drop(RedisModuleCtx *ctx, uint64_t client_id, RedisModuleString *keyname, const char *owner, size_t len);

#endif
