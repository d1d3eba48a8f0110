/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.h -- this node's view of Redis Cluster: whether cluster mode is on and
 * which hash slots its shard serves (the slot of a key: core/keyslot.h). */
#ifndef MC_CLUSTER_H
#define MC_CLUSTER_H

#include "redismodule.h"

extern int mc_cluster_enabled; /* set at load: cluster-enabled yes */

/* Read the cluster flag from the loading context. Call once from OnLoad. */
void mc_cluster_init(RedisModuleCtx *ctx);

/* Whether this node's shard (it, or its primary on a replica) serves hash slot
 * `slot`; 1 outside a cluster. From CLUSTER SLOTS, cached for 100 ms. Only
 * from a command's context (never a timer: see cluster.c). */
int mc_slot_is_mine(RedisModuleCtx *ctx, unsigned slot);

/* Whether this node serves `key` now, as the cluster would route a client's
 * command on it (a missing key in a slot migrating away is not ours); 1
 * outside a cluster. Safe from timers; on a primary, with the key's db
 * selected. */
int mc_key_is_mine_now(RedisModuleCtx *ctx, RedisModuleString *key);

#endif
