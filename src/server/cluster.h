/* cluster.h -- this node's view of Redis Cluster: whether cluster mode is on and
 * which hash slots its shard serves (the slot of a key: core/keyslot.h). */
#ifndef MC_CLUSTER_H
#define MC_CLUSTER_H

#include "redismodule.h"

extern int mc_cluster_enabled; /* set at load: cluster-enabled yes */

/* Read the cluster flag from the loading context. Call once from OnLoad. */
void mc_cluster_init(RedisModuleCtx *ctx);

/* Whether this node's shard (it, or its primary on a replica) serves hash slot
 * `slot`; 1 outside a cluster. From CLUSTER SLOTS, cached for 100 ms. */
int mc_slot_is_mine(RedisModuleCtx *ctx, unsigned slot);

/* The same, read from CLUSTER SLOTS now (a slot may just have moved away). */
int mc_slot_is_mine_fresh(RedisModuleCtx *ctx, unsigned slot);

#endif
