/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_type.c -- the rate limiters' module types, `mcap-gcra` and
 * `mcap-wndw` (see ratelimit_glue.h): RDB save and load, AOF rewrite, digest,
 * memory usage, copy and free.
 *
 * RDB layouts (RedisModule_SaveUnsigned each):
 *   mcap-gcra encver 1: tat_us, emission_us, limit
 *   mcap-wndw encver 1: window_ms, limit, then the bucket (bucket_io.c)
 * The loaders check every read and invariant and refuse unknown encvers. The
 * key's TTL is kept by Redis itself, as an absolute time. */
#include <string.h>

#include "core/alloc.h"
#include "server/args.h"
#include "server/bucket_io.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/rdb_load.h"
#include "server/waitq.h"

RedisModuleType *GcraType;
RedisModuleType *WindowType;

/* ==== GCRA ==== */

static void GcraRdbSave(RedisModuleIO *rdb, void *value) {
    gcra_value *v = value;
    RedisModule_SaveUnsigned(rdb, v->tat_us);
    RedisModule_SaveUnsigned(rdb, v->params.emission_us);
    RedisModule_SaveUnsigned(rdb, v->params.limit);
}

static void *GcraRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver != GCRA_ENCVER_1) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: GCRA encoding version %d is not one this module reads (%d)",
                               encver, GCRA_ENCVER_LATEST);
        return NULL;
    }
    uint64_t tat, t, limit;
    gcra_params p;
    /* The same bounds as RL.GCRA_SET, so that an AOF rewrite can rebuild it. */
    LOAD_FIELD(tat, 1, GCRA_MAX_TIME_US, "tat");
    LOAD_FIELD(t, 1, GCRA_MAX_PERIOD_US, "emission_interval");
    LOAD_FIELD(limit, 1, GCRA_MAX_LIMIT, "limit");
    /* emission * limit re-derives the DVT with the same overflow checks. */
    if (gcra_params_init(&p, limit, 1, t) != 0) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: emission_interval * limit overflows");
        goto fail;
    }
    gcra_value *v = RedisModule_Alloc(sizeof(*v));
    v->tat_us = tat;
    v->params = p;
    return v;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated GCRA value");
    return NULL;
}

static void GcraAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    gcra_value *v = value;
    RedisModule_EmitAOF(aof, CMD_GCRA_SET, "slll", key, (long long)v->tat_us,
                        (long long)v->params.emission_us, (long long)v->params.limit);
}

static void GcraDigest(RedisModuleDigest *md, void *value) {
    gcra_value *v = value;
    RedisModule_DigestAddLongLong(md, (long long)v->tat_us);
    RedisModule_DigestAddLongLong(md, (long long)v->params.emission_us);
    RedisModule_DigestAddLongLong(md, (long long)v->params.limit);
    RedisModule_DigestEndSequence(md);
}

static size_t GcraMemUsage(const void *value) {
    (void)value;
    return sizeof(gcra_value);
}

static void GcraFree(void *value) {
    RedisModule_Free(value);
}

static void *GcraCopy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value) {
    (void)fromkey;
    (void)tokey;
    gcra_value *v = RedisModule_Alloc(sizeof(*v));
    memcpy(v, value, sizeof(*v));
    return v;
}

/* ==== Sliding window ==== */

void window_value_free(window_value *v) {
    if (v == NULL) return;
    lb_free(&v->hits);
    RedisModule_Free(v);
}

static void WindowRdbSave(RedisModuleIO *rdb, void *value) {
    window_value *v = value;
    RedisModule_SaveUnsigned(rdb, v->hits.window_ms);
    RedisModule_SaveUnsigned(rdb, v->limit);
    bucket_rdb_save(rdb, &v->hits);
}

static void *WindowRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver != WINDOW_ENCVER_1) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: window encoding version %d is not one this module reads (%d)",
                               encver, WINDOW_ENCVER_LATEST);
        return NULL;
    }
    uint64_t window, limit;
    LOAD_FIELD(window, LB_MIN_WINDOW_MS, LB_MAX_WINDOW_MS, "window");
    LOAD_FIELD(limit, 1, UINT32_MAX, "limit");
    window_value *v = RedisModule_Calloc(1, sizeof(*v));
    v->limit = limit;
    if (lb_init(&v->hits, window) != LB_OK || bucket_rdb_load(rdb, &v->hits) != 0) {
        window_value_free(v);
        goto fail;
    }
    return v;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated window value");
    return NULL;
}

RedisModuleString **window_state_args(const window_value *v, size_t *n) {
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * (4 + 2 * bucket_nonzero_slots(&v->hits)));
    argv[0] = RedisModule_CreateStringFromLongLong(NULL, (long long)v->hits.window_ms);
    argv[1] = RedisModule_CreateStringFromLongLong(NULL, (long long)v->limit);
    *n = 2 + bucket_args_fill(&v->hits, argv + 2);
    return argv;
}

window_value *window_from_args(RedisModuleString **argv, int argc, const char **err) {
    long long window, limit;
    *err = "wrong number of arguments";
    if (argc < 4) return NULL;
    if (RedisModule_StringToLongLong(argv[0], &window) != REDISMODULE_OK || window < 1 ||
        (unsigned long long)window > LB_MAX_WINDOW_MS) {
        *err = "window must be a number of milliseconds from 1 to 2^42";
        return NULL;
    }
    if (RedisModule_StringToLongLong(argv[1], &limit) != REDISMODULE_OK || limit < 1 || limit > UINT32_MAX) {
        *err = "limit must be an integer from 1 to 4294967295";
        return NULL;
    }
    window_value *v = RedisModule_Calloc(1, sizeof(*v));
    v->limit = (uint64_t)limit;
    if (lb_init(&v->hits, (uint64_t)window) != LB_OK) {
        *err = "window too small for its ring";
        window_value_free(v);
        return NULL;
    }
    if (bucket_args_parse(&v->hits, argv + 2, argc - 2, err) != 0) {
        window_value_free(v);
        return NULL;
    }
    return v;
}

static void WindowAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    size_t n;
    RedisModuleString **args = window_state_args(value, &n);
    RedisModule_EmitAOF(aof, CMD_WINDOW_SET, "sv", key, args, n);
    mc_free_args(args, n);
}

static void WindowDigest(RedisModuleDigest *md, void *value) {
    window_value *v = value;
    RedisModule_DigestAddLongLong(md, (long long)v->hits.window_ms);
    RedisModule_DigestAddLongLong(md, (long long)v->limit);
    bucket_digest(md, &v->hits);
    RedisModule_DigestEndSequence(md);
}

static size_t WindowMemUsage(const void *value) {
    const window_value *v = value;
    return sizeof(*v) - sizeof(v->hits) + lb_mem_usage(&v->hits);
}

static void WindowFree(void *value) {
    window_value_free(value);
}

static void *WindowCopy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value) {
    (void)fromkey;
    (void)tokey;
    const window_value *src = value;
    window_value *v = RedisModule_Alloc(sizeof(*v));
    v->limit = src->limit;
    if (lb_copy(&v->hits, &src->hits) != LB_OK) {
        RedisModule_Free(v);
        return NULL;
    }
    return v;
}

lb_status window_hit(RedisModuleKey *key, uint64_t window_ms, uint64_t limit, int keep_limit, uint64_t at_ms,
                     uint32_t cost, uint64_t *count, uint64_t *have_ms) {
    int created = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY;
    window_value *v;
    if (created) {
        v = RedisModule_Calloc(1, sizeof(*v));
        lb_status st = lb_init(&v->hits, window_ms);
        if (st != LB_OK) {
            RedisModule_Free(v);
            return st;
        }
        v->limit = limit;
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
        if (v->hits.window_ms != window_ms) {
            *have_ms = v->hits.window_ms;
            return LB_ERR_RANGE;
        }
    }
    lb_status st = lb_add(&v->hits, at_ms, cost, count);
    if (st != LB_OK) {
        if (created) window_value_free(v);
        return st;
    }
    if (!keep_limit) v->limit = limit;
    if (created) RedisModule_ModuleTypeSetValue(key, WindowType, v);
    RedisModule_SetAbsExpire(key, (long long)lb_empty_at(&v->hits, at_ms));
    return LB_OK;
}

/* A limiter key left the keyspace (deleted, expired, evicted, overwritten,
 * renamed or moved away): its waiters may fit now; served after the command. */
static void LimiterUnlink(RedisModuleKeyOptCtx *ctx, const void *value) {
    (void)value;
    waitq_key_gone(RedisModule_GetDbIdFromOptCtx(ctx), RedisModule_GetKeyNameFromOptCtx(ctx));
}

int ratelimit_type_register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods gtm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = GcraRdbLoad,
        .rdb_save = GcraRdbSave,
        .aof_rewrite = GcraAofRewrite,
        .mem_usage = GcraMemUsage,
        .digest = GcraDigest,
        .free = GcraFree,
        .unlink2 = LimiterUnlink,
        .copy = GcraCopy,
    };
    GcraType = RedisModule_CreateDataType(ctx, GCRA_TYPE_NAME, GCRA_ENCVER_LATEST, &gtm);
    RedisModuleTypeMethods wtm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = WindowRdbLoad,
        .rdb_save = WindowRdbSave,
        .aof_rewrite = WindowAofRewrite,
        .mem_usage = WindowMemUsage,
        .digest = WindowDigest,
        .free = WindowFree,
        .unlink2 = LimiterUnlink,
        .copy = WindowCopy,
    };
    WindowType = RedisModule_CreateDataType(ctx, WINDOW_TYPE_NAME, WINDOW_ENCVER_LATEST, &wtm);
    return (GcraType && WindowType) ? REDISMODULE_OK : REDISMODULE_ERR;
}
