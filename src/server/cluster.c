/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c -- the hash slots this node's shard serves; see cluster.h.
 *
 * CLUSTER SLOTS is only ever called from a command's context: called through
 * RM_Call from a timer it crashes Valkey 8.0/8.1 (its reply code reads the
 * calling client's connection, and a timer has none). Timers ask about one key
 * with mc_key_is_mine_now instead. */
#include "server/cluster.h"

#include <string.h>

#include "server/clock.h"

int mc_cluster_enabled;

void mc_cluster_init(RedisModuleCtx *ctx) {
    mc_cluster_enabled = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
}

/* Slots served by this node's shard (its own, or its primary's on a replica),
 * refreshed from CLUSTER SLOTS at most every SLOT_CACHE_MS. A stale answer can
 * only come from a slot just handed to this node, and then costs a TRYAGAIN. */
#define SLOT_CACHE_MS 100
static unsigned char slots_mine[16384 / 8];
static uint64_t slots_read_at;

static void refresh_slots(RedisModuleCtx *ctx) {
    memset(slots_mine, 0, sizeof(slots_mine));
    const char *me = RedisModule_GetMyClusterID();
    if (me == NULL) return;
    char shard[REDISMODULE_NODE_ID_LEN];
    memcpy(shard, me, REDISMODULE_NODE_ID_LEN);
    char master[REDISMODULE_NODE_ID_LEN];
    char me_z[REDISMODULE_NODE_ID_LEN + 1]; /* the node id is not NUL-terminated; the lookup needs it */
    memcpy(me_z, me, REDISMODULE_NODE_ID_LEN);
    me_z[REDISMODULE_NODE_ID_LEN] = '\0';
    int flags = 0;
    if (RedisModule_GetClusterNodeInfo(ctx, me_z, NULL, master, NULL, &flags) == REDISMODULE_OK &&
        (flags & REDISMODULE_NODE_SLAVE))
        memcpy(shard, master, REDISMODULE_NODE_ID_LEN);
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CLUSTER", "c", "SLOTS");
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY) {
        size_t n = RedisModule_CallReplyLength(r);
        for (size_t i = 0; i < n; i++) {
            /* [start, end, [ip, port, node id, ...], replicas...] */
            RedisModuleCallReply *range = RedisModule_CallReplyArrayElement(r, i);
            if (RedisModule_CallReplyLength(range) < 3) continue;
            long long start = RedisModule_CallReplyInteger(RedisModule_CallReplyArrayElement(range, 0));
            long long end = RedisModule_CallReplyInteger(RedisModule_CallReplyArrayElement(range, 1));
            RedisModuleCallReply *owner = RedisModule_CallReplyArrayElement(range, 2);
            size_t idlen = 0;
            const char *id = RedisModule_CallReplyLength(owner) >= 3
                                 ? RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(owner, 2), &idlen)
                                 : NULL;
            if (!id || idlen != REDISMODULE_NODE_ID_LEN || memcmp(id, shard, idlen) != 0) continue;
            for (long long s = start < 0 ? 0 : start; s <= end && s < 16384; s++)
                slots_mine[s / 8] |= (unsigned char)(1u << (s % 8));
        }
    }
    if (r) RedisModule_FreeCallReply(r);
}

int mc_key_is_mine_now(RedisModuleCtx *ctx, RedisModuleString *key) {
    if (!mc_cluster_enabled) return 1;
    /* RM_Call checks, as for a client, that this node serves the key's slot
     * (a missing key in a slot being migrated away is an ASK: not ours), and
     * refuses the call otherwise. EXISTS reads nothing else and writes nothing
     * (an expired key is deleted, as any read would). */
    RedisModuleCallReply *r = RedisModule_Call(ctx, "EXISTS", "s", key);
    int mine = r != NULL && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_INTEGER;
    if (r) RedisModule_FreeCallReply(r);
    return mine;
}

int mc_slot_is_mine(RedisModuleCtx *ctx, unsigned slot) {
    if (!mc_cluster_enabled) return 1;
    uint64_t now = mc_now_ms();
    if (slots_read_at == 0 || now - slots_read_at >= SLOT_CACHE_MS || now < slots_read_at) {
        refresh_slots(ctx);
        slots_read_at = now ? now : 1;
    }
    return (slots_mine[(slot & 16383) / 8] >> (slot % 8)) & 1;
}

