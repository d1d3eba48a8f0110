/* SPDX-License-Identifier: BSD-3-Clause */
/* bucket_io.c -- how a leaky-bucket counter (bucket.h) is persisted: in RDB,
 * in a digest, and as command arguments (AOF rewrite and replication). Shared
 * by every type built on the counter (captchas, sliding windows).
 *
 * The persisted form is the clock high-water mark and the non-zero slots:
 *   last_ms, nslots, nslots x (absolute slot number, count)
 * The window itself belongs to the owning type, which restores it first. */
#include "server/bucket_io.h"

#include "server/args.h"

static void count_slot(uint64_t slot, uint32_t count, void *priv) {
    (void)slot;
    (void)count;
    (*(size_t *)priv)++;
}

size_t bucket_nonzero_slots(const lbucket *b) {
    size_t n = 0;
    lb_foreach_slot(b, count_slot, &n);
    return n;
}

static void save_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModule_SaveUnsigned(priv, slot);
    RedisModule_SaveUnsigned(priv, count);
}

void bucket_rdb_save(RedisModuleIO *rdb, const lbucket *b) {
    RedisModule_SaveUnsigned(rdb, b->last_ms);
    RedisModule_SaveUnsigned(rdb, bucket_nonzero_slots(b));
    lb_foreach_slot(b, save_slot, rdb);
}

int bucket_rdb_load(RedisModuleIO *rdb, lbucket *b) {
    uint64_t last = RedisModule_LoadUnsigned(rdb);
    if (RedisModule_IsIOError(rdb) || lb_restore_begin(b, last) != LB_OK) return -1;
    uint64_t n = RedisModule_LoadUnsigned(rdb);
    if (RedisModule_IsIOError(rdb) || n > b->nslots) return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot = RedisModule_LoadUnsigned(rdb);
        if (RedisModule_IsIOError(rdb)) return -1;
        uint64_t count = RedisModule_LoadUnsigned(rdb);
        if (RedisModule_IsIOError(rdb) || count > UINT32_MAX) return -1;
        if (lb_restore_slot(b, slot, (uint32_t)count) != LB_OK) return -1;
    }
    return lb_restore_end(b) == LB_OK ? 0 : -1;
}

static void digest_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModule_DigestAddLongLong(priv, (long long)slot);
    RedisModule_DigestAddLongLong(priv, count);
}

void bucket_digest(RedisModuleDigest *md, const lbucket *b) {
    RedisModule_DigestAddLongLong(md, (long long)b->last_ms);
    lb_foreach_slot(b, digest_slot, md);
}

static void push_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModuleString ***out = priv;
    *(*out)++ = RedisModule_CreateStringFromLongLong(NULL, (long long)slot);
    *(*out)++ = RedisModule_CreateStringFromLongLong(NULL, count);
}

size_t bucket_args_fill(const lbucket *b, RedisModuleString **out) {
    RedisModuleString **p = out;
    size_t n = bucket_nonzero_slots(b);
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)b->last_ms);
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)n);
    lb_foreach_slot(b, push_slot, &p);
    return (size_t)(p - out);
}

int bucket_args_parse(lbucket *b, RedisModuleString **argv, int argc, const char **err) {
    uint64_t last, n;
    *err = "last_ms must be an integer from 0 to 2^48";
    if (argc < 2 || mc_parse_u64(argv[0], 0, LB_MAX_TIME_MS, &last) || lb_restore_begin(b, last) != LB_OK) return -1;
    *err = "nslots must be an integer from 0 to the ring size, followed by that many slot/count pairs";
    if (mc_parse_u64(argv[1], 0, b->nslots, &n) || (uint64_t)argc != 2 + 2 * n) return -1;
    *err = "slots must be ascending, non-zero, not after last_ms and within one window";
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot, count;
        if (mc_parse_u64(argv[2 + 2 * i], 0, LB_MAX_TIME_MS, &slot) || mc_parse_u64(argv[3 + 2 * i], 0, UINT32_MAX, &count))
            return -1;
        if (lb_restore_slot(b, slot, (uint32_t)count) != LB_OK) return -1;
    }
    return lb_restore_end(b) == LB_OK ? 0 : -1;
}

RedisModuleCommandArg mc_bucket_slot_args[] = {
    {.name = "slot", .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1,
     .summary = "absolute slot number: floor(visit ms / slot width)"},
    {.name = "count", .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1},
    {0}};
