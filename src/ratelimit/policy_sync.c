/* SPDX-License-Identifier: BSD-3-Clause */
/* policy_sync.c -- the stored policies on every node of a cluster: the table
 * of policy.c travels over the cluster bus (RedisModule_SendClusterMessage),
 * so a slot that moves, a node that joins and a replica promoted later all
 * resolve `POLICY name` alike.
 *
 * Two messages (every number little-endian; byte 0 the format, 1):
 *   DIGEST   u8 format, u64 digest, u64 entries: the sender's table in short.
 *   ENTRIES  u8 format, u16 n, then n entries in core/policy_entry.h's bus form.
 * A command that writes a version (RL.POLICY_SET, RL.POLICY_DEL, a client's
 * RL.POLICY_PUT) broadcasts it at once as ENTRIES. Every SYNC_PERIOD_MS every
 * node broadcasts its DIGEST (anti-entropy): a node whose digest or count
 * differs answers the sender with its whole table as ENTRIES, in messages of
 * at most CHUNK_BYTES. Merging is last-writer-wins per name (policy.c,
 * rl_policy_merge), so the order and repetition of messages do not matter, and
 * both sides of a difference end with the union's newest versions: a node that
 * was down, or new, catches up within a period or two of coming back.
 *
 * A primary that keeps a version from the bus replicates it (RL.POLICY_PUT) to
 * its replicas and AOF, and the RDB holds it (policy.c's aux data); replicas
 * merge bus messages too, without replicating. While clients are paused for
 * writes (FAILOVER, a manual cluster failover) a primary drops ENTRIES: it may
 * not replicate then, and the next digests bring them again; so does any node
 * while it loads an RDB or AOF.
 *
 * Every message is checked before anything is merged: its length, format,
 * count, each entry's lengths and fields (policy_entry_valid); a bad one is
 * dropped whole and counted (INFO rl_policy_sync_rejected).
 *
 * SPDX-License-Identifier: BSD-3-Clause */
#include <stdio.h>
#include <string.h>

#include "core/policy_entry.h"
#include "ratelimit/ratelimit_glue.h"

#define MSG_DIGEST 1
#define MSG_ENTRIES 2
#define WIRE_FORMAT 1
#define DIGEST_LEN 17
#define SYNC_PERIOD_MS 1000
#define CHUNK_BYTES 32768 /* ENTRIES payload at most (one more entry never fits past it) */

static int sync_on; /* cluster mode: the receiver is registered, the timer runs */
static uint64_t stat_sent_digests, stat_sent_entries, stat_applied, stat_rejected, stat_deferred;

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ENTRIES being filled for one target (NULL: every node). */
typedef struct batch {
    RedisModuleCtx *ctx;
    const char *target;
    unsigned char buf[3 + CHUNK_BYTES];
    size_t used; /* bytes after the 3-byte header */
    unsigned n;
} batch;

static void batch_flush(batch *b) {
    if (b->n == 0) return;
    b->buf[0] = WIRE_FORMAT;
    b->buf[1] = (unsigned char)(b->n & 0xff);
    b->buf[2] = (unsigned char)(b->n >> 8);
    RedisModule_SendClusterMessage(b->ctx, b->target, MSG_ENTRIES, (const char *)b->buf, (uint32_t)(3 + b->used));
    stat_sent_entries += b->n;
    b->used = 0;
    b->n = 0;
}

static void batch_add(const char *name, size_t len, const policy_entry *e, void *arg) {
    batch *b = arg;
    if (b->used + POLICY_WIRE_MAX > CHUNK_BYTES || b->n == 65535) batch_flush(b);
    b->used += policy_wire_put(b->buf + 3 + b->used, name, len, e);
    b->n++;
}

/* The hook policy.c calls after a command wrote a version: tell every node. */
static void announce(RedisModuleCtx *ctx, const char *name, size_t len, const policy_entry *e) {
    if (!sync_on) return;
    batch *b = RedisModule_Alloc(sizeof(*b));
    b->ctx = ctx;
    b->target = NULL;
    b->used = b->n = 0;
    batch_add(name, len, e, b);
    batch_flush(b);
    RedisModule_Free(b);
}

/* Send the whole table to node `target` (40 bytes, not NUL-terminated). */
static void push_table(RedisModuleCtx *ctx, const char *target) {
    char id[REDISMODULE_NODE_ID_LEN + 1];
    memcpy(id, target, REDISMODULE_NODE_ID_LEN);
    id[REDISMODULE_NODE_ID_LEN] = '\0';
    batch *b = RedisModule_Alloc(sizeof(*b));
    b->ctx = ctx;
    b->target = id;
    b->used = b->n = 0;
    rl_policy_foreach(batch_add, b);
    batch_flush(b);
    RedisModule_Free(b);
}

static void on_digest(RedisModuleCtx *ctx, const char *sender, const unsigned char *p, uint32_t len) {
    if (len != DIGEST_LEN || p[0] != WIRE_FORMAT) {
        stat_rejected++;
        return;
    }
    if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_LOADING) return; /* its table is being replaced */
    uint64_t digest = get_u64(p + 1), entries = get_u64(p + 9);
    if (digest == rl_policy_digest() && entries == rl_policy_entries()) return;
    if (rl_policy_entries() > 0) push_table(ctx, sender); /* it pushes ours back when ours lacks its */
}

static void on_entries(RedisModuleCtx *ctx, const unsigned char *p, uint32_t len) {
    if (len < 3 || p[0] != WIRE_FORMAT) {
        stat_rejected++;
        return;
    }
    unsigned n = (unsigned)p[1] | ((unsigned)p[2] << 8);
    /* first check all of it, then merge */
    size_t off = 3;
    for (unsigned i = 0; i < n; i++) {
        const char *name;
        size_t nlen, used;
        policy_entry e;
        if (policy_wire_get(p + off, len - off, &name, &nlen, &e, &used) != 0) {
            stat_rejected++;
            return;
        }
        off += used;
    }
    if (off != len) {
        stat_rejected++;
        return;
    }
    int flags = RedisModule_GetContextFlags(ctx);
    int primary = !(flags & REDISMODULE_CTX_FLAGS_SLAVE);
    /* Loading (the table is about to be replaced), or paused for writes (a
     * primary may not replicate): the next digests bring them again. */
    if ((flags & REDISMODULE_CTX_FLAGS_LOADING) || (primary && RedisModule_AvoidReplicaTraffic())) {
        stat_deferred++;
        return;
    }
    off = 3;
    for (unsigned i = 0; i < n; i++) {
        const char *name;
        size_t nlen, used;
        policy_entry e;
        policy_wire_get(p + off, len - off, &name, &nlen, &e, &used);
        off += used;
        if (rl_policy_merge(ctx, name, nlen, &e, primary) > 0) stat_applied++;
    }
}

static void on_message(RedisModuleCtx *ctx, const char *sender_id, uint8_t type, const unsigned char *payload,
                       uint32_t len) {
    if (type == MSG_DIGEST) on_digest(ctx, sender_id, payload, len);
    else if (type == MSG_ENTRIES) on_entries(ctx, payload, len);
    else stat_rejected++;
}

static void sync_timer(RedisModuleCtx *ctx, void *data) {
    (void)data;
    unsigned char msg[DIGEST_LEN];
    msg[0] = WIRE_FORMAT;
    put_u64(msg + 1, rl_policy_digest());
    put_u64(msg + 9, rl_policy_entries());
    RedisModule_SendClusterMessage(ctx, NULL, MSG_DIGEST, (const char *)msg, DIGEST_LEN);
    stat_sent_digests++;
    RedisModule_CreateTimer(ctx, SYNC_PERIOD_MS, sync_timer, NULL);
}

void rl_policy_sync_info(RedisModuleInfoCtx *ctx) {
    if (!sync_on) return;
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policy_sync_digests_sent", stat_sent_digests);
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policy_sync_entries_sent", stat_sent_entries);
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policy_sync_applied", stat_applied);
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policy_sync_deferred", stat_deferred);
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policy_sync_rejected", stat_rejected);
}

int ratelimit_policy_sync_register(RedisModuleCtx *ctx) {
    if (!(RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER)) return REDISMODULE_OK;
    RedisModule_RegisterClusterMessageReceiver(ctx, MSG_DIGEST, on_message);
    RedisModule_RegisterClusterMessageReceiver(ctx, MSG_ENTRIES, on_message);
    rl_policy_changed_hook = announce;
    sync_on = 1;
    RedisModule_CreateTimer(ctx, SYNC_PERIOD_MS, sync_timer, NULL);
    return REDISMODULE_OK;
}
