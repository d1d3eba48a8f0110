/* SPDX-License-Identifier: BSD-3-Clause */
/* legacy_type.c -- the original Rust module's auxiliary types, registered only
 * so that an RDB it wrote loads in place (Redis refuses to start on an RDB that
 * holds a module type no loaded module registers).
 *
 *   mcaptbuck  mcap:bucket:{<node id>}:<unix second>  pending decrements (JSON)
 *   mcaptsafe  safety:mcap:captcha::{<name>}         the 6 bytes "SAFETY"
 *
 * Both are encver 0 and hold one string buffer. Our captchas keep their own
 * visits (a legacy captcha's live count comes back as visits made at load time,
 * see captcha_type.c), so these keys mean nothing to us: every one loaded from
 * disk is deleted when loading ends, together with the plain-string
 * `timer:<bucket key>` key that went with each bucket, and the deletions are
 * replicated (and reach the AOF). A legacy key that arrives later by RESTORE is
 * kept as opaque bytes until the next load. */
#include <string.h>

#include "captcha/captcha_glue.h"
#include "server/events.h"

#define LEGACY_BUCKET_TYPE_NAME "mcaptbuck"
#define LEGACY_SAFETY_TYPE_NAME "mcaptsafe"
#define LEGACY_ENCVER 0
#define LEGACY_MAX_BYTES (64 * 1024 * 1024)

static RedisModuleType *LegacyBucketType;
static RedisModuleType *LegacySafetyType;

typedef struct legacy_value {
    size_t len;
    char *data;
} legacy_value;

/* Keys loaded from disk, to delete when loading ends. */
typedef struct pending_key {
    int db;
    RedisModuleString *name;
    struct pending_key *next;
} pending_key;

static pending_key *pending;
static int loading; /* between a Loading START and its END/FAILED */

static void *LegacyRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver != LEGACY_ENCVER) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: unknown legacy encoding version %d", encver);
        return NULL;
    }
    size_t len = 0;
    char *buf = RedisModule_LoadStringBuffer(rdb, &len);
    if (RedisModule_IsIOError(rdb) || buf == NULL || len > LEGACY_MAX_BYTES) {
        if (buf) RedisModule_Free(buf);
        return NULL;
    }
    legacy_value *v = RedisModule_Alloc(sizeof(*v));
    v->len = len;
    v->data = buf;
    /* Only keys loaded from disk or a full sync are dropped at the end of the
     * load; one that arrives by RESTORE stays, as opaque bytes. */
    const RedisModuleString *key = loading ? RedisModule_GetKeyNameFromIO(rdb) : NULL;
    if (key) {
        pending_key *p = RedisModule_Alloc(sizeof(*p));
        p->db = RedisModule_GetDbIdFromIO(rdb);
        p->name = RedisModule_CreateStringFromString(NULL, key);
        p->next = pending;
        pending = p;
    }
    return v;
}

static void LegacyRdbSave(RedisModuleIO *rdb, void *value) {
    legacy_value *v = value;
    RedisModule_SaveStringBuffer(rdb, v->data, v->len);
}

static void LegacyAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    /* Nothing to rebuild: the key is obsolete and is dropped by a rewrite. */
    (void)aof;
    (void)key;
    (void)value;
}

static size_t LegacyMemUsage(const void *value) {
    const legacy_value *v = value;
    return sizeof(*v) + v->len;
}

static void LegacyDigest(RedisModuleDigest *md, void *value) {
    legacy_value *v = value;
    RedisModule_DigestAddStringBuffer(md, v->data, v->len);
    RedisModule_DigestEndSequence(md);
}

static void LegacyFree(void *value) {
    legacy_value *v = value;
    RedisModule_Free(v->data);
    RedisModule_Free(v);
}

static void *LegacyCopy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value) {
    (void)fromkey;
    (void)tokey;
    const legacy_value *src = value;
    legacy_value *v = RedisModule_Alloc(sizeof(*v));
    v->len = src->len;
    v->data = RedisModule_Alloc(src->len ? src->len : 1);
    memcpy(v->data, src->data, src->len);
    return v;
}

/* Delete `name` if it is a key of `type` (or, with type NULL, a plain string),
 * and replicate the deletion. */
static void delete_if(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleType *type) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    int kt = RedisModule_KeyType(key);
    int match = type ? (kt == REDISMODULE_KEYTYPE_MODULE && RedisModule_ModuleTypeGetType(key) == type)
                     : kt == REDISMODULE_KEYTYPE_STRING;
    if (match) {
        RedisModule_DeleteKey(key);
        RedisModule_SignalModifiedKey(ctx, name);
        RedisModule_Replicate(ctx, "DEL", "s", name);
    }
    RedisModule_CloseKey(key);
}

static void drop_pending(RedisModuleCtx *ctx, int delete_keys) {
    int saved_db = RedisModule_GetSelectedDb(ctx);
    size_t deleted = 0;
    while (pending) {
        pending_key *p = pending;
        pending = p->next;
        if (delete_keys && RedisModule_SelectDb(ctx, p->db) == REDISMODULE_OK) {
            size_t len;
            const char *n = RedisModule_StringPtrLen(p->name, &len);
            if (len > 5 && memcmp(n, "mcap:", 5) == 0) {
                delete_if(ctx, p->name, LegacyBucketType);
                RedisModuleString *timer = RedisModule_CreateString(NULL, "timer:", 6);
                RedisModule_StringAppendBuffer(NULL, timer, n, len);
                delete_if(ctx, timer, NULL);
                RedisModule_FreeString(NULL, timer);
            } else {
                delete_if(ctx, p->name, LegacySafetyType);
            }
            deleted++;
        }
        RedisModule_FreeString(NULL, p->name);
        RedisModule_Free(p);
    }
    RedisModule_SelectDb(ctx, saved_db);
    if (deleted)
        RedisModule_Log(ctx, "notice", "mcaptcha_cache: removed %zu obsolete keys of the original module", deleted);
}

static void on_loading(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)data;
    if (sub == REDISMODULE_SUBEVENT_LOADING_RDB_START || sub == REDISMODULE_SUBEVENT_LOADING_AOF_START ||
        sub == REDISMODULE_SUBEVENT_LOADING_REPL_START) {
        loading = 1;
        return;
    }
    loading = 0;
    if (sub == REDISMODULE_SUBEVENT_LOADING_ENDED) {
        /* A replica keeps what its primary sends; the primary deletes and replicates. */
        int replica = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_SLAVE) != 0;
        drop_pending(ctx, !replica);
    } else if (sub == REDISMODULE_SUBEVENT_LOADING_FAILED) {
        drop_pending(ctx, 0);
    }
}

int legacy_type_register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = LegacyRdbLoad,
        .rdb_save = LegacyRdbSave,
        .aof_rewrite = LegacyAofRewrite,
        .mem_usage = LegacyMemUsage,
        .digest = LegacyDigest,
        .free = LegacyFree,
        .copy = LegacyCopy,
    };
    LegacyBucketType = RedisModule_CreateDataType(ctx, LEGACY_BUCKET_TYPE_NAME, LEGACY_ENCVER, &tm);
    LegacySafetyType = RedisModule_CreateDataType(ctx, LEGACY_SAFETY_TYPE_NAME, LEGACY_ENCVER, &tm);
    if (!LegacyBucketType || !LegacySafetyType) return REDISMODULE_ERR;
    return mc_on_loading(ctx, on_loading);
}
