/* SPDX-License-Identifier: BSD-3-Clause */
/* renames.h -- where RENAME sent a key: the names of recent RENAME and
 * RENAMENX commands, so that a held lock that was renamed is placed again in
 * O(1) instead of by a scan of the keyspace (see renames.c).
 *
 * The module API tells a module type that its value left a key (the unlink
 * callback, with the old name) but not a RENAME's new name, except through a
 * keyspace-event subscription whose class (generic) also fires on every DEL
 * and EXPIRE on the server. A command filter sees each command's arguments
 * before it runs: this one keeps the last RENAME_HINTS (source, destination)
 * pairs, and costs every other command a test of its argument count and name
 * (with the server's own cost of calling a filter, ~90-130 instructions a
 * command on Redis 7.0, 2-3 % of a pipelined SET or INCR). So it is opt-in:
 * config lock-follow-renames (off: a renamed lock nobody opens before it must
 * be written is found by one scan of the keyspace, see leases.c). */
#ifndef MC_LOCK_RENAMES_H
#define MC_LOCK_RENAMES_H

#include "redismodule.h"

#define RENAME_HINTS 1024

/* Record RENAMEs while the lock-follow-renames config is on (server/config.h):
 * the filter is registered only then, and follows later CONFIG SETs. */
int renames_init(RedisModuleCtx *ctx);

/* The destination of the newest recorded RENAME when its source is `from`,
 * else NULL: while a RENAME runs (the unlink callback of its source), that is
 * its own destination. O(1). The string belongs to the ring: copy it to keep. */
const RedisModuleString *renames_latest(const RedisModuleString *from);

/* The destinations of the recorded RENAMEs whose source is `from`, newest
 * first: start with *pos = 0, then pass it back; NULL when there is no more
 * (a RENAME queued in MULTI was recorded when it was queued, so the one EXEC
 * ran may be older than the newest). O(RENAME_HINTS) per full walk. */
const RedisModuleString *renames_next(const RedisModuleString *from, int *pos);

#endif
