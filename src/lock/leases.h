/* SPDX-License-Identifier: BSD-3-Clause */
/* leases.h -- leases end on time: one module timer per held lock key, armed for
 * its earliest lease end.
 *
 * When the timer fires on a primary, the lease-end handler given to leases_init
 * (state.c's lock_expire_leases) drops the ended leases, commits and serves the
 * waiters, and the timer is re-armed for the next lease end. A replica ends
 * nothing itself (its primary replicates the end) but tracks its held locks, so
 * that a promotion arms their timers. Locks that arrive without a command (RDB
 * load, RESTORE, COPY) or move (RENAME, MOVE, SWAPDB) get their timers just
 * after. All of it rides on the lock type's callbacks (unlink, free, copy, load)
 * and on server events (flush, SWAPDB, role change): the module subscribes to
 * no keyspace event, so unrelated commands pay nothing for it. */
#ifndef MC_LOCK_LEASES_H
#define MC_LOCK_LEASES_H

#include <stdint.h>

#include "lock/lock_glue.h"

/* Drop the ended leases of the open lock key; returns how many ended. */
typedef uint32_t (*lease_end_fn)(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname,
                                 uint64_t now_ms);

/* Set up the timers, subscribe to flushes, SWAPDB and role changes, and take
 * the lock type's load, unlink and free notifications. REDISMODULE_OK or REDISMODULE_ERR. */
int leases_init(RedisModuleCtx *ctx, lease_end_fn on_end);

/* (Re)arm the lease timer of the lock at `keyname` (selected db) for its earliest
 * lease end; `l` NULL or unheld forgets it. A timer that will fire no later than
 * needed is left alone, so grants and releases do not churn timers. */
void lease_arm(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l, uint64_t now_ms);

/* On a replica: remember a held lock's key (timer not armed) so that a
 * promotion can arm it; forget it when nobody holds the lock. */
void lease_track(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l);

/* Lease-timer entries (INFO lease_timers): one per held lock, plus released
 * locks whose armed timer has not fired yet (it ends at the released lease's
 * end at the latest). */
long long leases_tracked(void);

#endif
