/* SPDX-License-Identifier: BSD-3-Clause */
/* state.h -- a lock key's value changed and made known: the one path by which
 * every lock-family write is committed (stored or deleted, replicated as an
 * exact state, its lease timer re-armed), and the family's INFO counters and
 * latency histograms (the section itself: lock_cmd.c's lock_info). */
#ifndef MC_LOCK_STATE_H
#define MC_LOCK_STATE_H

#include <stdint.h>

#include "core/histogram.h"
#include "lock/lock_glue.h"

/* INFO `locks` counters. */
typedef struct lock_counters {
    long long grants, waits, timeouts, expired, waiting;
} lock_counters;
extern lock_counters lock_stats;

/* INFO `locks` latencies since the start (core/histogram.h, ms): how long waiters
 * that were granted waited (from blocking to the grant), and how long grants made
 * on this node were held (from the grant to the release, the lease end or the
 * SESSION's disconnect; holders loaded or replicated here are not timed). */
extern histogram lock_wait_hist, lock_hold_hist;

/* A waiter blocked at blocked_us was granted at now_us. */
void lock_note_wait(uint64_t blocked_us, uint64_t now_us);

/* A holder granted at granted_ms (0: not known here, ignored) let go at end_ms. */
void lock_note_hold(uint64_t granted_ms, uint64_t end_ms);

/* lock_expire, counting the ended leases (lock_stats.expired) and their hold
 * times (each until its lease end). Returns how many entries changed (leases
 * ended, lock-delay slots begun or ended): nonzero means commit and serve. */
uint32_t lock_drop_ended(lockv *l, uint64_t now_ms);

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

/* lock_commit for a change that does not depend on the clock (a release):
 * replicates the command as called instead of the state. Its replay (replica,
 * AOF) must not read the clock either: see lock_replayed. `ctx_flags`: the
 * command's RedisModule_GetContextFlags, read once. */
void lock_commit_verbatim(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, lockv *l,
                          uint64_t now_ms, int ctx_flags);

/* Whether the command with these context flags is a replay (from the primary
 * or the AOF): it then applies exactly what the primary did, ending no lease
 * by its own clock (the primary replicated every lease end it made). */
int lock_replayed(int ctx_flags);

/* Drop the ended leases of the lock at `key` (open for writing), commit and
 * serve waiters when something ended. Returns how many ended. */
uint32_t lock_expire_leases(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t now_ms);

/* Called by every commit of a value that has SESSION entries (l->sessions):
 * set by sessions.c, which drops the entries whose holder is gone. The hook
 * keeps the dependency one way (sessions.c commits through this file). */
extern void (*lock_commit_sessions_hook)(lockv *l);

#endif
