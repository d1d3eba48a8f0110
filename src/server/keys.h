/* SPDX-License-Identifier: BSD-3-Clause */
/* keys.h -- opening keys of the module's types, and the binary-safe "<db>:<key>"
 * ids under which the module's own in-memory dicts (wait queues, lease timers)
 * find a key. */
#ifndef MC_KEYS_H
#define MC_KEYS_H

#include <stddef.h>

#include "redismodule.h"

/* Open `keyname` with `mode` and check it is empty or holds `type`. 0 with *key
 * open (NULL when a read-only open found no key), or -1 with the key closed
 * when it holds another type (the caller replies WRONGTYPE). */
int mc_open_typed(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                  RedisModuleKey **key);

/* mc_open_typed, also setting *empty (on 0): 1 when the key holds nothing, so that
 * the caller need not ask the key's type again. */
int mc_open_typed_empty(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                        RedisModuleKey **key, int *empty);

/* "<db>:<key>", binary-safe: the id of a key in the module's own dicts. */
RedisModuleString *mc_db_key_id(int db, RedisModuleString *key);

/* The same id as bytes, in `stackbuf` when it fits in `cap` bytes, else in a
 * RedisModule_Alloc'ed buffer the caller frees (when the result != stackbuf). */
char *mc_db_key_buf(int db, const RedisModuleString *key, char *stackbuf, size_t cap, size_t *len);

#endif
