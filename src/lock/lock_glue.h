/* SPDX-License-Identifier: BSD-3-Clause */
/* lock_glue.h -- what the lock family's Redis files share: the module type, its
 * name and encoding versions, and the text form of a lock's state that the
 * internal LOCK.STATE command carries. The algorithm itself is in core/lock.h.
 *
 * Files: lock_type.c (the type: RDB, AOF, digest, copy, memory), state.c (every
 * write committed and replicated), leases.c (lease timers, role changes),
 * sessions.c (release on disconnect), fencing.c (token floor), acquire.c
 * (grants and the wait queue), lock_cmd.c (the commands), pool_cmd.c (a
 * semaphore pool's size: LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS,
 * LOCK.AVAILABLE_PERMITS), multi.c (the multi-key LOCK.*_ALL commands),
 * lock_info.c (COMMAND DOCS). */
#ifndef MC_LOCK_GLUE_H
#define MC_LOCK_GLUE_H

#include <stddef.h>

#include "core/lock.h"
#include "redismodule.h"
#include "server/commands.h"

#define LOCK_TYPE_NAME "mcap-lock"
#define LOCK_ENCVER_1 1 /* permits, last_token, holders (owner, expires_ms, count, token) */
#define LOCK_ENCVER_2 2 /* + flags (ephemeral) */
#define LOCK_ENCVER_3 3 /* + each holder's delay_ms; count 0 allowed (a lock-delay slot) */
#define LOCK_ENCVER_4 4 /* + after the flags, the semaphore pool's adjustment (signed) */
#define LOCK_ENCVER_LATEST LOCK_ENCVER_4
#define LOCK_MAX_TIME_MS (1ULL << 48)
#define CMD_LOCK_STATE "LOCK.STATE"

extern RedisModuleType *LockType;

int lock_type_register(RedisModuleCtx *ctx);
/* The commands, their lease timers and sessions (lock_cmd.c). */
int lock_cmd_register(RedisModuleCtx *ctx);
/* The semaphore pool's commands (pool_cmd.c), registered by lock_cmd_register. */
int lock_pool_register(RedisModuleCtx *ctx);
/* The `locks` INFO section (lock_cmd.c): state.c's counters and latencies, the
 * wait queues' lengths. */
void lock_info(RedisModuleInfoCtx *ctx);

/* COMMAND DOCS metadata of the family (lock_info.c). */
extern mc_cmdinfo lock_cmdinfo[];

/* Arguments after the key of a LOCK.STATE rebuilding `l`:
 * permits last_token nholders [owner expires_ms count token]... [DELAY i ms]...
 * [SHARED i]... [TAKE i k]... [ADJUST a] [EPHEMERAL]
 * Free with mc_free_args. */
RedisModuleString **lock_state_args(const lockv *l, size_t *n);

/* Called when a lock value arrives without a command (RDB load, RESTORE, COPY;
 * db -1 when the db is not known, key may be NULL). leases.c sets it; NULL
 * until then. */
extern void (*lock_load_hook)(const lockv *l, int db, const RedisModuleString *key);

/* Called when a lock value leaves `key` of db `db` (deleted, expired, evicted,
 * overwritten, renamed or moved away; the type's unlink callback), and when a
 * lock value is freed (on any thread). leases.c sets both; NULL until then. */
extern void (*lock_unlink_hook)(lockv *l, int db, const RedisModuleString *key);
extern void (*lock_free_hook)(lockv *l);

/* Parse LOCK.STATE's arguments; NULL and *err (no code) on failure. */
lockv *lock_from_args(RedisModuleString **argv, int argc, const char **err);

#endif
