/* lock_glue.h -- what the lock family's glue files share (lock_type.c,
 * lock_cmd.c). The algorithm itself is in lock.h. */
#ifndef MC_LOCK_GLUE_H
#define MC_LOCK_GLUE_H

#include <stddef.h>

#include "lock.h"
#include "module.h"

#define LOCK_TYPE_NAME "mcap-lock"
#define LOCK_ENCVER_1 1 /* permits, last_token, holders (owner, expires_ms, count, token) */
#define LOCK_ENCVER_2 2 /* + flags (ephemeral) */
#define LOCK_ENCVER_LATEST LOCK_ENCVER_2
#define LOCK_MAX_TIME_MS (1ULL << 48)
#define CMD_LOCK_STATE "LOCK.STATE"

extern RedisModuleType *LockType;

int lock_type_register(RedisModuleCtx *ctx);
int lock_cmd_register(RedisModuleCtx *ctx);

/* Arguments after the key of a LOCK.STATE rebuilding `l`:
 * permits last_token nholders [owner expires_ms count token]... [EPHEMERAL]
 * Free with captcha_free_args. */
RedisModuleString **lock_state_args(const lockv *l, size_t *n);

/* A lock value arrived without a command (RDB load, RESTORE, COPY): raise the
 * process-wide token floor past its tokens and arm its lease timer soon (db -1:
 * the db is not known; key may be NULL). */
void lock_loaded(const lockv *l, int db, const RedisModuleString *key);

/* Parse LOCK.STATE's arguments; NULL and *err (no code) on failure. */
lockv *lock_from_args(RedisModuleString **argv, int argc, const char **err);

#endif
