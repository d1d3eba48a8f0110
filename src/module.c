/* module.c -- the module's entry point: registers mcaptcha_cache's types and
 * commands with Redis, and owns the clock.
 *
 * Loads on Redis 7.0 and later. APIs newer than 7.0 are looked up at run time
 * (RedisModule_GetApi) and used only when present. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "module.h"
#include "ratelimit.h"
#include "waitq.h"

RedisModuleType *CaptchaType;
RedisModuleType *ChallengeType;
int mc_cluster_enabled;

static long long (*cached_microseconds)(void); /* 7.2+, NULL on 7.0 */

uint64_t mc_now_us(void) {
    if (cached_microseconds) return (uint64_t)cached_microseconds();
    long long ms = RedisModule_Milliseconds();
    return ms > 0 ? (uint64_t)ms * 1000 : 0;
}

uint64_t mc_now_ms(void) {
    if (cached_microseconds) return (uint64_t)cached_microseconds() / 1000;
    long long ms = RedisModule_Milliseconds();
    return ms > 0 ? (uint64_t)ms : 0;
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

int mc_slot_is_mine_fresh(RedisModuleCtx *ctx, unsigned slot) {
    slots_read_at = 0;
    return mc_slot_is_mine(ctx, slot);
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

int mc_open_typed(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                  RedisModuleKey **key) {
    *key = RedisModule_OpenKey(ctx, keyname, mode);
    int kt = RedisModule_KeyType(*key);
    if (kt != REDISMODULE_KEYTYPE_EMPTY &&
        (kt != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(*key) != type)) {
        RedisModule_CloseKey(*key);
        *key = NULL;
        return -1;
    }
    return 0;
}

char *mc_db_key_buf(int db, RedisModuleString *key, char *stackbuf, size_t cap, size_t *len) {
    size_t klen;
    const char *k = RedisModule_StringPtrLen(key, &klen);
    char prefix[16];
    int n = snprintf(prefix, sizeof(prefix), "%d:", db);
    *len = (size_t)n + klen;
    char *buf = *len <= cap ? stackbuf : RedisModule_Alloc(*len);
    memcpy(buf, prefix, (size_t)n);
    memcpy(buf + n, k, klen);
    return buf;
}

RedisModuleString *mc_db_key_id(int db, RedisModuleString *key) {
    char prefix[16];
    int n = snprintf(prefix, sizeof(prefix), "%d:", db);
    size_t len;
    const char *k = RedisModule_StringPtrLen(key, &len);
    RedisModuleString *id = RedisModule_CreateString(NULL, prefix, (size_t)n);
    RedisModule_StringAppendBuffer(NULL, id, k, len);
    return id;
}

/* ACL categories for a command: "write" or "read", plus "fast", plus the
 * module's own category when the server has one. */
static void acl_categories(const char *flags, int own_category, char *out, size_t len) {
    snprintf(out, len, "%s%s%s", strstr(flags, "write") ? "write" : "read", strstr(flags, "fast") ? " fast" : "",
             own_category ? " mcaptcha" : "");
}

int mc_register_commands(RedisModuleCtx *ctx, const mc_command *cmds, size_t n) {
    /* ACL categories need Redis 7.2 (SetCommandACLCategories) and 7.4
     * (AddACLCategory); on 7.0 module commands have none. */
    static int (*set_acl)(RedisModuleCommand *, const char *);
    static int (*add_category)(RedisModuleCtx *, const char *);
    static int resolved, own_category;
    if (!resolved) {
        resolved = 1;
        if (RedisModule_GetApi("RedisModule_SetCommandACLCategories", (void **)&set_acl) != REDISMODULE_OK)
            set_acl = NULL;
        if (RedisModule_GetApi("RedisModule_AddACLCategory", (void **)&add_category) != REDISMODULE_OK)
            add_category = NULL;
        own_category = add_category && add_category(ctx, "mcaptcha") == REDISMODULE_OK;
    }
    for (size_t i = 0; i < n; i++) {
        const mc_command *d = &cmds[i];
        if (RedisModule_CreateCommand(ctx, d->name, d->fn, d->flags, d->firstkey, d->lastkey, d->keystep) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
        if (cmdinfo_set(ctx, d->name) == REDISMODULE_ERR) {
            RedisModule_Log(ctx, "warning", "could not set the command info of %s", d->name);
            return REDISMODULE_ERR;
        }
        if (set_acl) {
            char cats[64];
            acl_categories(d->flags, own_category, cats, sizeof(cats));
            if (set_acl(RedisModule_GetCommand(ctx, d->name), cats) == REDISMODULE_ERR)
                RedisModule_Log(ctx, "warning", "could not set the ACL categories of %s", d->name);
        }
    }
    return REDISMODULE_OK;
}

static void info_callback(RedisModuleInfoCtx *ctx, int for_crash_report) {
    (void)for_crash_report;
    ratelimit_info(ctx);
    lock_info(ctx);
}

static void *calloc_hook(size_t n, size_t size) {
    return RedisModule_Calloc(n, size);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, MODULE_NAME, MODULE_VERSION, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    /* Corrupt RDB/RESTORE payloads must give an error, not a server panic. */
    RedisModule_SetModuleOptions(ctx, REDISMODULE_OPTIONS_HANDLE_IO_ERRORS);
    if (RedisModule_GetApi("RedisModule_CachedMicroseconds", (void **)&cached_microseconds) !=
        REDISMODULE_OK)
        cached_microseconds = NULL;

    /* Every allocation, jansson's included, goes through Redis. */
    mc_set_allocator(RedisModule_Alloc, calloc_hook, RedisModule_Free);
    json_set_alloc_funcs(RedisModule_Alloc, RedisModule_Free);

    mc_cluster_enabled = (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) != 0;
    if (captcha_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    waitq_init();
    if (legacy_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (ratelimit_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_type_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (lock_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_RegisterInfoFunc(ctx, info_callback) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (captcha_cmd_register(ctx) == REDISMODULE_ERR) return REDISMODULE_ERR;
    RedisModule_Log(ctx, "notice", "mcaptcha_cache %s loaded (clock: %s)", MODULE_VERSION_STRING,
                    cached_microseconds ? "CachedMicroseconds" : "Milliseconds");
    return REDISMODULE_OK;
}
