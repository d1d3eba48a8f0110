/* SPDX-License-Identifier: BSD-3-Clause */
/* inspect.h -- LOCK.INSPECT, the lock family's read-only view.
 *
 *   LOCK.INSPECT key         [permits, last fencing token, waiters, [[owner,
 *                            lease_ms left, token, count], ...], adjustment,
 *                            size]; count 0 is a lock-delay (ms left: until it
 *                            ends); adjustment: the semaphore pool's, size:
 *                            permits + adjustment clamped to 0..1024; nil: no lock
 *                            and nobody waiting on the key (waiters but no lock:
 *                            shown as a lock of one permit nobody holds, token 0)
 *   LOCK.INSPECT key FULL    field/value pairs (as XINFO): permits, adjustment,
 *                            size, available (permits free now), last_token,
 *                            kind ("lock",
 *                            "semaphore", "concurrency"), holders, waiters. Each
 *                            holder: owner, mode ("write", "read", "permit"),
 *                            weight (permits it takes), state ("held",
 *                            "lock-delay"), ms_left, token, count, held_ms (since
 *                            its grant on this node; -1 when not known here),
 *                            lock_delay_ms, session (0/1). Each waiter, in queue
 *                            order: owner, mode, permits, weight, lease_ms,
 *                            waited_ms, timeout_ms (ms until its WAIT runs out),
 *                            client_id.
 * All times in milliseconds. */
#ifndef MC_LOCK_INSPECT_H
#define MC_LOCK_INSPECT_H

#include "redismodule.h"

int lock_inspect_command(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif
