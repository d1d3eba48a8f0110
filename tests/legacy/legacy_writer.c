/* SPDX-License-Identifier: BSD-3-Clause */
/* legacy_writer.c -- a TEST-ONLY Redis module that writes RDB files laid out
 * like the original mCaptcha cache module's (Rust, v0.1.x), so that the
 * in-place upgrade to mcaptcha_cache can be tested. It is never shipped and
 * never loaded in production; it cannot be loaded together with
 * mcaptcha_cache (both register the type names `mcaptmcap` and `mcaptchal`).
 *
 * Written from scratch from the layout in docs/protocol.md ("Original key
 * layout and RDB payloads"):
 *
 *   key                                      type       encver  payload (one SaveStringBuffer)      TTL
 *   mcap:captcha::{<name>}                   mcaptmcap  0       {"m":{"visitor_threshold":<live>,   none
 *                                                                 "defense":{"levels":[...],
 *                                                                 "current_visitor_threshold":<i>},
 *                                                                 "duration":<s>}}
 *   mcap:CHALLENGE:{<captcha>}:<challenge>   mcaptchal  0       {"duration":<s>,                    duration s
 *                                                                 "difficulty_factor":<n>}
 *   mcap:bucket:{<id>}:<unix s>              mcaptbuck  0       {"timer":<t>,"bucket_instant":<s>,  none
 *                                                                 "decrement":{"<captcha key>":<n>,..}}
 *   safety:mcap:captcha::{<name>}            mcaptsafe  0       the 6 bytes SAFETY                  given
 *
 * (The `timer:mcap:bucket:{<id>}:<unix s>` keys were plain strings: the caller
 * makes them with SET ... EX.)
 *
 * Commands (each replies +OK, or an error):
 *   LEGACY.CAPTCHA <name> <duration s> <live count> <levels JSON array> [<current level index>]
 *       the levels array is embedded verbatim, so pass it compact, as serde_json wrote it:
 *       [{"visitor_threshold":N,"difficulty_factor":N},...]
 *   LEGACY.CHALLENGE <captcha name> <challenge> <difficulty> <duration s>
 *   LEGACY.BUCKET <id> <unix s> <captcha key> <count> [<captcha key> <count>]...   ("timer":1)
 *   LEGACY.SAFETY <captcha name> [<ttl s>]       (default TTL 1200 s = 2 x 600 s)
 *   LEGACY.PAYLOAD <key>   -> the stored payload as a bulk string (nil when the key holds none)
 *   LEGACY.RAW captcha|challenge <key> <payload> [<ttl ms>]   any payload bytes, as the original
 *       could have stored them without validating (odd values for the upgrade tests)
 *
 * rdb_load reads the one buffer back, so an RDB written here also loads here. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "redismodule.h"

#define NTYPES 4
enum { T_CAPTCHA, T_CHALLENGE, T_BUCKET, T_SAFETY };
static const char *const type_names[NTYPES] = {"mcaptmcap", "mcaptchal", "mcaptbuck", "mcaptsafe"};
static RedisModuleType *types[NTYPES];

typedef struct payload {
    size_t len;
    char *data;
} payload;

/* ---- a growing byte buffer (RedisModule_Alloc'ed) ---- */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void buf_put(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        b->p = RedisModule_Realloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(buf *b, const char *s) {
    buf_put(b, s, strlen(s));
}

static void buf_printf(buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0) buf_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A JSON string literal, as serde_json escapes it. */
static void buf_json_string(buf *b, const char *s, size_t n) {
    buf_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': buf_put(b, "\\\"", 2); break;
        case '\\': buf_put(b, "\\\\", 2); break;
        case '\n': buf_put(b, "\\n", 2); break;
        case '\r': buf_put(b, "\\r", 2); break;
        case '\t': buf_put(b, "\\t", 2); break;
        case '\b': buf_put(b, "\\b", 2); break;
        case '\f': buf_put(b, "\\f", 2); break;
        default:
            if (c < 0x20) buf_printf(b, "\\u%04x", c);
            else buf_put(b, (const char *)&s[i], 1);
        }
    }
    buf_put(b, "\"", 1);
}

/* ---- type callbacks: one opaque string buffer ---- */
static void *PayloadRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver != 0) return NULL;
    size_t len = 0;
    char *data = RedisModule_LoadStringBuffer(rdb, &len);
    if (data == NULL) return NULL;
    payload *v = RedisModule_Alloc(sizeof(*v));
    v->len = len;
    v->data = data;
    return v;
}

static void PayloadRdbSave(RedisModuleIO *rdb, void *value) {
    payload *v = value;
    RedisModule_SaveStringBuffer(rdb, v->data, v->len);
}

static void PayloadAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    (void)aof;
    (void)key;
    (void)value; /* the writer is for RDB files only */
}

static void PayloadFree(void *value) {
    payload *v = value;
    RedisModule_Free(v->data);
    RedisModule_Free(v);
}

static size_t PayloadMemUsage(const void *value) {
    const payload *v = value;
    return sizeof(*v) + v->len;
}

/* ---- helpers ---- */
static int arg_u64(RedisModuleString *s, unsigned long long max, unsigned long long *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < 0 || (unsigned long long)v > max)
        return -1;
    *out = (unsigned long long)v;
    return 0;
}

/* Store `b` (taken over) as a value of types[t] at the key `keytext`, with a TTL
 * of ttl_s seconds when ttl_s > 0. Replies. */
static int store(RedisModuleCtx *ctx, int t, const char *keytext, size_t keylen, buf *b,
                 unsigned long long ttl_s) {
    RedisModuleString *kn = RedisModule_CreateString(ctx, keytext, keylen);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, kn, REDISMODULE_READ | REDISMODULE_WRITE);
    int kt = RedisModule_KeyType(key);
    if (kt != REDISMODULE_KEYTYPE_EMPTY &&
        (kt != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(key) != types[t])) {
        RedisModule_CloseKey(key);
        RedisModule_Free(b->p);
        return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
    }
    payload *v = RedisModule_Alloc(sizeof(*v));
    v->len = b->len;
    v->data = b->p ? b->p : RedisModule_Alloc(1);
    RedisModule_ModuleTypeSetValue(key, types[t], v);
    if (ttl_s > 0) RedisModule_SetExpire(key, (mstime_t)(ttl_s * 1000ULL));
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

#define MAX_SECONDS 9000000000000ULL /* TTLs in ms stay far below 2^63 */

/* LEGACY.CAPTCHA <name> <duration s> <live count> <levels JSON array> [<current level index>] */
static int Captcha_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5 && argc != 6) return RedisModule_WrongArity(ctx);
    unsigned long long duration, live, current = 0;
    if (arg_u64(argv[2], MAX_SECONDS, &duration)) return RedisModule_ReplyWithError(ctx, "ERR bad duration");
    if (arg_u64(argv[3], UINT32_MAX, &live)) return RedisModule_ReplyWithError(ctx, "ERR bad live count");
    if (argc == 6 && arg_u64(argv[5], UINT32_MAX, &current))
        return RedisModule_ReplyWithError(ctx, "ERR bad level index");
    size_t nlen, llen;
    const char *name = RedisModule_StringPtrLen(argv[1], &nlen);
    const char *levels = RedisModule_StringPtrLen(argv[4], &llen);
    buf b = {0}, k = {0};
    buf_printf(&b, "{\"m\":{\"visitor_threshold\":%llu,\"defense\":{\"levels\":", live);
    buf_put(&b, levels, llen);
    buf_printf(&b, ",\"current_visitor_threshold\":%llu},\"duration\":%llu}}", current, duration);
    buf_str(&k, "mcap:captcha::{");
    buf_put(&k, name, nlen);
    buf_str(&k, "}");
    int rc = store(ctx, T_CAPTCHA, k.p, k.len, &b, 0);
    RedisModule_Free(k.p);
    return rc;
}

/* LEGACY.CHALLENGE <captcha name> <challenge> <difficulty> <duration s> */
static int Challenge_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    unsigned long long difficulty, duration;
    if (arg_u64(argv[3], UINT32_MAX, &difficulty)) return RedisModule_ReplyWithError(ctx, "ERR bad difficulty");
    if (arg_u64(argv[4], MAX_SECONDS, &duration) || duration == 0)
        return RedisModule_ReplyWithError(ctx, "ERR bad duration");
    size_t nlen, clen;
    const char *name = RedisModule_StringPtrLen(argv[1], &nlen);
    const char *ch = RedisModule_StringPtrLen(argv[2], &clen);
    buf b = {0}, k = {0};
    buf_printf(&b, "{\"duration\":%llu,\"difficulty_factor\":%llu}", duration, difficulty);
    buf_str(&k, "mcap:CHALLENGE:{");
    buf_put(&k, name, nlen);
    buf_str(&k, "}:");
    buf_put(&k, ch, clen);
    int rc = store(ctx, T_CHALLENGE, k.p, k.len, &b, duration);
    RedisModule_Free(k.p);
    return rc;
}

/* LEGACY.BUCKET <id> <unix s> <captcha key> <count> [<captcha key> <count>]... */
static int Bucket_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5 || (argc - 3) % 2 != 0) return RedisModule_WrongArity(ctx);
    unsigned long long instant;
    if (arg_u64(argv[2], MAX_SECONDS, &instant)) return RedisModule_ReplyWithError(ctx, "ERR bad instant");
    for (int i = 4; i < argc; i += 2) {
        unsigned long long n;
        if (arg_u64(argv[i], UINT32_MAX, &n)) return RedisModule_ReplyWithError(ctx, "ERR bad count");
    }
    size_t idlen;
    const char *id = RedisModule_StringPtrLen(argv[1], &idlen);
    buf b = {0}, k = {0};
    buf_printf(&b, "{\"timer\":1,\"bucket_instant\":%llu,\"decrement\":{", instant);
    for (int i = 3; i < argc; i += 2) {
        size_t len;
        const char *ck = RedisModule_StringPtrLen(argv[i], &len);
        unsigned long long n;
        arg_u64(argv[i + 1], UINT32_MAX, &n);
        if (i > 3) buf_put(&b, ",", 1);
        buf_json_string(&b, ck, len);
        buf_printf(&b, ":%llu", n);
    }
    buf_str(&b, "}}");
    buf_str(&k, "mcap:bucket:{");
    buf_put(&k, id, idlen);
    buf_printf(&k, "}:%llu", instant);
    int rc = store(ctx, T_BUCKET, k.p, k.len, &b, 0);
    RedisModule_Free(k.p);
    return rc;
}

/* LEGACY.SAFETY <captcha name> [<ttl s>] */
static int Safety_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2 && argc != 3) return RedisModule_WrongArity(ctx);
    unsigned long long ttl = 1200;
    if (argc == 3 && (arg_u64(argv[2], MAX_SECONDS, &ttl) || ttl == 0))
        return RedisModule_ReplyWithError(ctx, "ERR bad ttl");
    size_t nlen;
    const char *name = RedisModule_StringPtrLen(argv[1], &nlen);
    buf b = {0}, k = {0};
    buf_put(&b, "SAFETY", 6);
    buf_str(&k, "safety:mcap:captcha::{");
    buf_put(&k, name, nlen);
    buf_str(&k, "}");
    int rc = store(ctx, T_SAFETY, k.p, k.len, &b, ttl);
    RedisModule_Free(k.p);
    return rc;
}

/* LEGACY.RAW captcha|challenge <key> <payload> [<ttl ms>] */
static int Raw_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4 && argc != 5) return RedisModule_WrongArity(ctx);
    const char *kind = RedisModule_StringPtrLen(argv[1], NULL);
    int t = strcmp(kind, "captcha") == 0 ? T_CAPTCHA : strcmp(kind, "challenge") == 0 ? T_CHALLENGE : -1;
    unsigned long long ttl_ms = 0;
    if (t < 0) return RedisModule_ReplyWithError(ctx, "ERR kind must be captcha or challenge");
    if (argc == 5 && arg_u64(argv[4], MAX_SECONDS, &ttl_ms)) return RedisModule_ReplyWithError(ctx, "ERR bad ttl");
    size_t klen, plen;
    const char *k = RedisModule_StringPtrLen(argv[2], &klen);
    const char *p = RedisModule_StringPtrLen(argv[3], &plen);
    buf b = {0};
    buf_put(&b, p, plen);
    store(ctx, t, k, klen, &b, 0);
    if (ttl_ms) {
        RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[2], REDISMODULE_READ | REDISMODULE_WRITE);
        RedisModule_SetExpire(key, (mstime_t)ttl_ms);
        RedisModule_CloseKey(key);
    }
    return REDISMODULE_OK;
}

/* LEGACY.PAYLOAD <key> */
static int Payload_Cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    if (RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_MODULE) {
        RedisModuleType *mt = RedisModule_ModuleTypeGetType(key);
        for (int t = 0; t < NTYPES; t++) {
            if (mt == types[t]) {
                payload *v = RedisModule_ModuleTypeGetValue(key);
                RedisModule_ReplyWithStringBuffer(ctx, v->data, v->len);
                RedisModule_CloseKey(key);
                return REDISMODULE_OK;
            }
        }
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithNull(ctx);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "legacy_writer", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = PayloadRdbLoad,
        .rdb_save = PayloadRdbSave,
        .aof_rewrite = PayloadAofRewrite,
        .mem_usage = PayloadMemUsage,
        .free = PayloadFree,
    };
    for (int t = 0; t < NTYPES; t++) {
        types[t] = RedisModule_CreateDataType(ctx, type_names[t], 0, &tm);
        if (types[t] == NULL) return REDISMODULE_ERR;
    }
    static const struct {
        const char *name;
        RedisModuleCmdFunc fn;
        const char *flags;
    } cmds[] = {
        {"LEGACY.CAPTCHA", Captcha_Cmd, "write deny-oom"},
        {"LEGACY.CHALLENGE", Challenge_Cmd, "write deny-oom"},
        {"LEGACY.BUCKET", Bucket_Cmd, "write deny-oom"},
        {"LEGACY.SAFETY", Safety_Cmd, "write deny-oom"},
        {"LEGACY.PAYLOAD", Payload_Cmd, "readonly"},
        {"LEGACY.RAW", Raw_Cmd, "write deny-oom"},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (RedisModule_CreateCommand(ctx, cmds[i].name, cmds[i].fn, cmds[i].flags, 0, 0, 0) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
