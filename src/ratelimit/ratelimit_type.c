/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_type.c -- the rate limiters' module types, `mcap-gcra` and
 * `mcap-wndw` (see ratelimit_glue.h): RDB save and load, AOF rewrite, digest,
 * memory usage, copy and free.
 *
 * RDB layouts (RedisModule_SaveUnsigned each):
 *   mcap-gcra encver 1: tat_us, emission_us, limit
 *   mcap-wndw encver 1: window_ms, limit, then the bucket (bucket_io.c: last_ms,
 *             n, n x (slot, count)) with slots of window/256
 *   mcap-wndw encver 2 (WINDOW_ENCVER_2_SLOT_WIDTH): window_ms, limit, slot_ms,
 *             then last_ms, n, n x (slot, count) (core/window.h); slot_ms must
 *             be window/256 or sw_fine_width(window)
 * The loaders check every read and invariant and refuse unknown encvers. The
 * key's TTL is kept by Redis itself, as an absolute time. */
#include <string.h>

#include "core/alloc.h"
#include "server/args.h"
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
    sw_free(&v->hits);
    RedisModule_Free(v);
}

static void save_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModule_SaveUnsigned(priv, slot);
    RedisModule_SaveUnsigned(priv, count);
}

static void WindowRdbSave(RedisModuleIO *rdb, void *value) {
    window_value *v = value;
    RedisModule_SaveUnsigned(rdb, v->hits.window_ms);
    RedisModule_SaveUnsigned(rdb, v->limit);
    RedisModule_SaveUnsigned(rdb, v->hits.slot_ms);
    RedisModule_SaveUnsigned(rdb, v->hits.last_ms);
    RedisModule_SaveUnsigned(rdb, sw_slots(&v->hits));
    sw_foreach_slot(&v->hits, save_slot, rdb);
}

/* last_ms, n, n x (slot, count) into `w` (set up by sw_init): 0 or -1. The
 * same form as bucket_io.c's, so encver 1 reads through here too. */
static int load_slots(RedisModuleIO *rdb, swindow *w) {
    uint64_t last = RedisModule_LoadUnsigned(rdb);
    if (RedisModule_IsIOError(rdb) || sw_restore_begin(w, last) != SW_OK) return -1;
    uint64_t n = RedisModule_LoadUnsigned(rdb);
    if (RedisModule_IsIOError(rdb) || n > w->window_ms / w->slot_ms + 2) return -1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot = RedisModule_LoadUnsigned(rdb);
        if (RedisModule_IsIOError(rdb)) return -1;
        uint64_t count = RedisModule_LoadUnsigned(rdb);
        if (RedisModule_IsIOError(rdb) || count > UINT32_MAX) return -1;
        if (sw_restore_slot(w, slot, (uint32_t)count) != SW_OK) return -1;
    }
    return sw_restore_end(w) == SW_OK ? 0 : -1;
}

/* A slot width this module makes for `window`: window/256 or the fine one. */
static int width_known(uint64_t window, uint64_t w) {
    return w == sw_legacy_width(window) || w == sw_fine_width(window);
}

static void *WindowRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver != WINDOW_ENCVER_1 && encver != WINDOW_ENCVER_2_SLOT_WIDTH) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: window encoding version %d is not one this module reads (%d)",
                               encver, WINDOW_ENCVER_LATEST);
        return NULL;
    }
    uint64_t window, limit, w;
    LOAD_FIELD(window, LB_MIN_WINDOW_MS, LB_MAX_WINDOW_MS, "window");
    LOAD_FIELD(limit, 1, UINT32_MAX, "limit");
    if (encver == WINDOW_ENCVER_1) {
        w = sw_legacy_width(window); /* encver 1: slots of window/256 */
    } else {
        LOAD_FIELD(w, 1, LB_MAX_WINDOW_MS, "slot_ms");
        if (!width_known(window, w)) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: slot width %llu for a %llu ms window",
                                   (unsigned long long)w, (unsigned long long)window);
            goto fail;
        }
    }
    window_value *v = RedisModule_Calloc(1, sizeof(*v));
    v->limit = limit;
    if (sw_init(&v->hits, window, w) != SW_OK || load_slots(rdb, &v->hits) != 0) {
        window_value_free(v);
        goto fail;
    }
    return v;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated window value");
    return NULL;
}

static void push_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModuleString ***out = priv;
    *(*out)++ = RedisModule_CreateStringFromLongLong(NULL, (long long)slot);
    *(*out)++ = RedisModule_CreateStringFromLongLong(NULL, count);
}

RedisModuleString **window_state_args(const window_value *v, size_t *n) {
    size_t slots = sw_slots(&v->hits);
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * (6 + 2 * slots));
    RedisModuleString **p = argv;
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)v->hits.window_ms);
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)v->limit);
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)v->hits.last_ms);
    *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)slots);
    sw_foreach_slot(&v->hits, push_slot, &p);
    if (v->hits.slot_ms != sw_legacy_width(v->hits.window_ms)) {
        *p++ = RedisModule_CreateString(NULL, "SLOTMS", 6);
        *p++ = RedisModule_CreateStringFromLongLong(NULL, (long long)v->hits.slot_ms);
    }
    *n = (size_t)(p - argv);
    return argv;
}

window_value *window_from_args(RedisModuleString **argv, int argc, const char **err) {
    long long window, limit;
    uint64_t w, last, n;
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
    w = sw_legacy_width((uint64_t)window);
    if (argc >= 6 && mc_is_word(argv[argc - 2], "SLOTMS")) { /* the trailing width (encver 2 windows) */
        if (mc_parse_u64(argv[argc - 1], 1, LB_MAX_WINDOW_MS, &w) || !width_known((uint64_t)window, w)) {
            *err = "SLOTMS must be the slot width this module uses for the window";
            return NULL;
        }
        argc -= 2;
    }
    window_value *v = RedisModule_Calloc(1, sizeof(*v));
    v->limit = (uint64_t)limit;
    sw_init(&v->hits, (uint64_t)window, w); /* both widths are in range */
    *err = "last_ms must be an integer from 0 to 2^48";
    if (mc_parse_u64(argv[2], 0, LB_MAX_TIME_MS, &last) || sw_restore_begin(&v->hits, last) != SW_OK) goto fail;
    *err = "nslots must be an integer from 0 to the window's slots, followed by that many slot/count pairs";
    if (mc_parse_u64(argv[3], 0, (uint64_t)window / w + 2, &n) || (uint64_t)argc != 4 + 2 * n) goto fail;
    *err = "slots must be ascending, non-zero, not after last_ms and within one window";
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot, count;
        if (mc_parse_u64(argv[4 + 2 * i], 0, LB_MAX_TIME_MS, &slot) || mc_parse_u64(argv[5 + 2 * i], 0, UINT32_MAX, &count))
            goto fail;
        if (sw_restore_slot(&v->hits, slot, (uint32_t)count) != SW_OK) goto fail;
    }
    if (sw_restore_end(&v->hits) == SW_OK) return v;
fail:
    window_value_free(v);
    return NULL;
}

static void WindowAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    size_t n;
    RedisModuleString **args = window_state_args(value, &n);
    RedisModule_EmitAOF(aof, CMD_WINDOW_SET, "sv", key, args, n);
    mc_free_args(args, n);
}

static void digest_slot(uint64_t slot, uint32_t count, void *priv) {
    RedisModule_DigestAddLongLong(priv, (long long)slot);
    RedisModule_DigestAddLongLong(priv, count);
}

static void WindowDigest(RedisModuleDigest *md, void *value) {
    window_value *v = value;
    RedisModule_DigestAddLongLong(md, (long long)v->hits.window_ms);
    RedisModule_DigestAddLongLong(md, (long long)v->limit);
    RedisModule_DigestAddLongLong(md, (long long)v->hits.last_ms);
    sw_foreach_slot(&v->hits, digest_slot, md);
    /* The width only when not window/256: digests of encver 1 values are unchanged. */
    if (v->hits.slot_ms != sw_legacy_width(v->hits.window_ms)) RedisModule_DigestAddLongLong(md, (long long)v->hits.slot_ms);
    RedisModule_DigestEndSequence(md);
}

static size_t WindowMemUsage(const void *value) {
    const window_value *v = value;
    return sizeof(*v) - sizeof(v->hits) + sw_mem_usage(&v->hits);
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
    if (sw_copy(&v->hits, &src->hits) != SW_OK) {
        RedisModule_Free(v);
        return NULL;
    }
    return v;
}

lb_status window_hit(RedisModuleKey *key, uint64_t window_ms, int width, uint64_t limit, int keep_limit,
                     uint64_t at_ms, uint32_t cost, uint64_t *count, uint64_t *have_ms) {
    int created = RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_EMPTY;
    uint64_t w = window_width(window_ms, width);
    window_value *v;
    if (created) {
        v = RedisModule_Calloc(1, sizeof(*v));
        if (sw_init(&v->hits, window_ms, w) != SW_OK) {
            RedisModule_Free(v);
            return LB_ERR_RANGE;
        }
        v->limit = limit;
    } else {
        v = RedisModule_ModuleTypeGetValue(key);
        if (v->hits.window_ms != window_ms) {
            *have_ms = v->hits.window_ms;
            return LB_ERR_RANGE;
        }
    }
    swindow fresh;
    int rewidth = !created && v->hits.slot_ms != w && sw_count(&v->hits, at_ms) == 0;
    if (rewidth) { /* empty at at_ms: start over with the asked width, keeping the clock mark */
        sw_init(&fresh, window_ms, w);
        fresh.last_ms = v->hits.last_ms;
    }
    swindow *hits = rewidth ? &fresh : &v->hits;
    sw_status st = sw_add(hits, at_ms, cost, count);
    if (st != SW_OK) {
        if (created) window_value_free(v);
        if (rewidth) sw_free(&fresh);
        return st == SW_ERR_FULL ? LB_ERR_FULL : st == SW_ERR_NOMEM ? LB_ERR_NOMEM : LB_ERR_RANGE;
    }
    if (rewidth) {
        sw_free(&v->hits);
        v->hits = fresh;
    }
    if (!keep_limit) v->limit = limit;
    if (created) RedisModule_ModuleTypeSetValue(key, WindowType, v);
    RedisModule_SetAbsExpire(key, (long long)sw_empty_at(&v->hits, at_ms));
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
