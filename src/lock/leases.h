/* SPDX-License-Identifier: BSD-3-Clause */
/* leases.h -- leases end on time: one module timer per held lock key, armed for
 * its earliest lease end.
 *
 * When the timer fires on a primary, the lease-end handler given to leases_init
 * (state.c's lock_expire_leases) drops the ended leases, commits and serves the
 * waiters, and the timer is re-armed for the next lease end. A replica ends
 * nothing itself (its primary replicates the end) but tracks its held locks, so
 * that a promotion arms their timers. Each held value points to its entry
 * (lockv.lease), which knows where the value lives: locks that arrive without a
 * command (RDB load, RESTORE, COPY) or move (RENAME, MOVE, SWAPDB) are placed
 * again in O(1) (a RENAME: at its recorded destination when the config
 * lock-follow-renames is on, see renames.h; otherwise when the value is next
 * opened by name, or by one scan only if it must be written first; see
 * leases.c). All of it rides on the lock type's callbacks (unlink, free, copy,
 * load) and on server events (flush, SWAPDB, loading, role change): the module
 * subscribes to no keyspace event, so unrelated commands pay nothing for it
 * (with lock-follow-renames on, a command filter: ~100 instructions each). While writes are paused, ended
 * leases wait on one list for the pause to lift. */
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

/* A lock command opened `l` at `keyname` (selected db): when its entry did not
 * know that place (the value was renamed), it does now. O(1). */
void lease_seen(RedisModuleCtx *ctx, RedisModuleString *keyname, lockv *l);

/* Where the held value `l` lives: 0 with *db and *key (the entry's own string:
 * copy it before anything changes the lock), or -1 when it has no entry or is
 * in no key. A renamed value not opened since is looked for by a scan. */
int lease_where(RedisModuleCtx *ctx, lockv *l, int *db, RedisModuleString **key);

/* Called (main thread) when a held value is freed or its entries are dropped
 * before an asynchronous free: sessions.c forgets its entries. NULL until set. */
extern void (*lease_value_gone_hook)(lockv *l);

/* INFO `locks` figures of the entries. */
typedef struct leases_stats {
    long long tracked;       /* entries (lease_timers) */
    long long pending;       /* values that left their key in this command, not yet placed */
    long long lost;          /* renamed values not placed yet (opened by name or scanned when needed) */
    long long paused;        /* ended leases waiting for paused writes to resume */
    long long keys_scanned;  /* keys read by scans for renamed values, since the start */
    long long pause_wakeups; /* wake-ups of the one poll timer while writes were paused, since the start */
    long long renames_followed; /* renamed values placed at a RENAME's recorded destination, since the start */
} leases_stats;
void leases_counters(leases_stats *out);

#endif
