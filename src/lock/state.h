/* state.h -- a lock key's value changed and made known: the one path by which
 * every lock-family write is committed (stored or deleted, replicated as an
 * exact state, its lease timer re-armed), and the family's INFO counters. */
#ifndef MC_LOCK_STATE_H
#define MC_LOCK_STATE_H

#include <stdint.h>

#include "lock/lock_glue.h"

/* INFO `locks` counters. */
typedef struct lock_counters {
    long long grants, waits, timeouts, expired, waiting;
} lock_counters;
extern lock_counters lock_stats;

/* Open a lock key, checking its type. 0, or -1 when it holds another type. */
int lock_open(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleKey **key);

/* The same for one family's commands: a lock or semaphore (ephemeral 0, the
 * LOCK.* commands) or a concurrency limit (ephemeral 1, RL.CONCURRENCY*). Also
 * -1 (closed) when the key holds the other kind: the caller replies WRONGTYPE. */
int lock_open_kind(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, int ephemeral, RedisModuleKey **key);

/* After a change to the lock at `key` (open for writing): an ephemeral lock (a
 * concurrency limit) that nobody holds is deleted, so idle limits cost no
 * memory; any other is kept with its last fencing token. Replicates the result
 * (LOCK.STATE with absolute lease ends, or DEL) and (re)arms the lease timer.
 * `l` may be freed: do not use it after. */
void lock_commit(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, lockv *l, uint64_t now_ms);

/* Drop the ended leases of the lock at `key` (open for writing), commit and
 * serve waiters when something ended. Returns how many ended. */
uint32_t lock_expire_leases(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t now_ms);

/* The `locks` INFO section. */
void lock_info(RedisModuleInfoCtx *ctx);

#endif
