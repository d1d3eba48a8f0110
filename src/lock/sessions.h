/* SPDX-License-Identifier: BSD-3-Clause */
/* sessions.h -- SESSION ties a holder to its connection: when the connection
 * closes, its permits are released at once (the lease stays the fallback, e.g.
 * after a failover, where the new primary never sees the disconnect). */
#ifndef MC_LOCK_SESSIONS_H
#define MC_LOCK_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "lock/lock_glue.h"

/* Subscribe to client disconnections. REDISMODULE_OK or REDISMODULE_ERR. */
int sessions_init(RedisModuleCtx *ctx);

/* Client `client_id` was granted `owner`'s hold of the lock value `l` (just
 * committed) with SESSION: end it when that client disconnects, wherever the
 * value's key went by then. Known entries are not added twice. O(SESSION
 * holders of l). */
void session_add(RedisModuleCtx *ctx, uint64_t client_id, lockv *l, const char *owner, size_t len);


/* SESSION entries alive (INFO session_entries). */
long long sessions_entries(void);

#endif
