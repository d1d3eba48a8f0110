/* SPDX-License-Identifier: BSD-3-Clause */
/* floor.c -- the module API's floor: a measurement-only Redis module for `make bench`.
 *
 * Each command does the least any module command must do for the same kind of job
 * as one of mcaptcha_cache's, and nothing more: open the key, change or read a small
 * value of a module type, replicate a command that carries the time it used, keep a
 * TTL where the real command keeps one. Integers it replicates are formatted on the
 * stack (core/decimal.h, the module's own way), the cheapest the API allows.
 * `make bench` reports each of our commands
 * as a ratio to its floor on server CPU per call. It is never installed, never
 * loaded by the tests, and its values mean nothing; it is built only by `make bench`
 * (build/bench/floor.so).
 *
 *   FLOOR.WRITE key [AT ms]            counter + 1; replicates FLOOR.WRITE key AT <ms used>
 *                                      (the floor of ADD_VISITOR); reply: the count
 *   FLOOR.WRITE_PX key ttl_ms [AT ms]  the same, then sets the key's TTL to ttl_ms
 *   FLOOR.LIMIT key ttl_ms [pad ...]   FLOOR.WRITE_PX with a limiter's reply, an array of 4
 *                                      integers [1, count, -1, ttl_ms]; the pad arguments (not
 *                                      read) make its request as long as the limiter command it
 *                                      is the floor of (RL.GCRA, CL.THROTTLE, RL.WINDOW); it
 *                                      replicates FLOOR.WRITE_PX key ttl_ms AT <ms used>
 *   FLOOR.READ key                     the count, or 0 (the floor of MCAPTCHA_CACHE.GET)
 *   FLOOR.LOCK key owner ttl_ms        when the key is empty: stores owner and a token
 *                                      from a process-wide counter, TTL ttl_ms (the lease
 *                                      ends by key expiry); replicates FLOOR.LOCK_SET key
 *                                      owner token PXAT; reply: the token, or 0 when held
 *   FLOOR.UNLOCK key owner             deletes the key when owner holds it; reply 1 or 0
 *   FLOOR.LOCK_SET key owner token at_ms   what FLOOR.LOCK replicates
 */
#include <stdint.h>
#include <string.h>

#include "core/decimal.h"
#include "redismodule.h"

typedef struct {
    long long n;
    long long at_ms;
    RedisModuleString *owner; /* NULL: a counter */
    long long token;
} floorv;

static RedisModuleType *FloorType;
static long long last_token;

static void floor_free(void *value) {
    floorv *v = value;
    if (v->owner) RedisModule_FreeString(NULL, v->owner);
    RedisModule_Free(v);
}

static void floor_save(RedisModuleIO *io, void *value) {
    floorv *v = value;
    RedisModule_SaveSigned(io, v->n);
    RedisModule_SaveSigned(io, v->at_ms);
    RedisModule_SaveSigned(io, v->token);
    RedisModule_SaveUnsigned(io, v->owner != NULL);
    if (v->owner) RedisModule_SaveString(io, v->owner);
}

static void *floor_load(RedisModuleIO *io, int encver) {
    if (encver != 0) return NULL;
    floorv *v = RedisModule_Calloc(1, sizeof(*v));
    v->n = RedisModule_LoadSigned(io);
    v->at_ms = RedisModule_LoadSigned(io);
    v->token = RedisModule_LoadSigned(io);
    if (RedisModule_LoadUnsigned(io)) v->owner = RedisModule_LoadString(io);
    return v;
}

/* Open `name` for writing as a floor value, created when empty; NULL (after an
 * error reply) when it holds another type. */
static floorv *open_write(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleKey **key) {
    *key = RedisModule_OpenKey(ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    int type = RedisModule_KeyType(*key);
    if (type == REDISMODULE_KEYTYPE_EMPTY) {
        floorv *v = RedisModule_Calloc(1, sizeof(*v));
        RedisModule_ModuleTypeSetValue(*key, FloorType, v);
        return v;
    }
    if (RedisModule_ModuleTypeGetType(*key) != FloorType) {
        RedisModule_CloseKey(*key);
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return NULL;
    }
    return RedisModule_ModuleTypeGetValue(*key);
}

/* FLOOR.WRITE key [AT ms], FLOOR.WRITE_PX key ttl_ms [AT ms] and (as_limit)
 * FLOOR.LIMIT key ttl_ms [pad ...] */
static int write_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int with_ttl, int as_limit) {
    int base = with_ttl ? 3 : 2;
    if (as_limit) {
        if (argc < base) return RedisModule_WrongArity(ctx);
        argc = base;
    }
    if (argc != base && argc != base + 2) return RedisModule_WrongArity(ctx);
    long long ttl = 0, now = 0;
    if (with_ttl && (RedisModule_StringToLongLong(argv[2], &ttl) != REDISMODULE_OK || ttl <= 0))
        return RedisModule_ReplyWithError(ctx, "ERR bad ttl_ms");
    if (argc == base + 2) {
        if (RedisModule_StringToLongLong(argv[base + 1], &now) != REDISMODULE_OK)
            return RedisModule_ReplyWithError(ctx, "ERR bad AT");
    } else {
        now = RedisModule_Milliseconds();
    }
    RedisModuleKey *key;
    floorv *v = open_write(ctx, argv[1], &key);
    if (v == NULL) return REDISMODULE_OK;
    v->n++;
    v->at_ms = now;
    mc_dec at = mc_dec_of(now);
    if (with_ttl) {
        RedisModule_SetExpire(key, ttl);
        RedisModule_Replicate(ctx, "FLOOR.WRITE_PX", "sscb", argv[1], argv[2], "AT", MC_DEC_ARG(at));
    } else {
        RedisModule_Replicate(ctx, "FLOOR.WRITE", "scb", argv[1], "AT", MC_DEC_ARG(at));
    }
    RedisModule_CloseKey(key);
    if (!as_limit) return RedisModule_ReplyWithLongLong(ctx, v->n);
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, v->n);
    RedisModule_ReplyWithLongLong(ctx, -1);
    return RedisModule_ReplyWithLongLong(ctx, ttl);
}

static int write_plain(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return write_cmd(ctx, argv, argc, 0, 0);
}

static int write_px(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return write_cmd(ctx, argv, argc, 1, 0);
}

static int limit_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return write_cmd(ctx, argv, argc, 1, 1);
}

/* FLOOR.READ key */
static int read_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    long long n = 0;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        if (RedisModule_ModuleTypeGetType(key) != FloorType) {
            RedisModule_CloseKey(key);
            return RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        }
        n = ((floorv *)RedisModule_ModuleTypeGetValue(key))->n;
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, n);
}

/* FLOOR.LOCK key owner ttl_ms */
static int lock_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long ttl;
    if (RedisModule_StringToLongLong(argv[3], &ttl) != REDISMODULE_OK || ttl <= 0)
        return RedisModule_ReplyWithError(ctx, "ERR bad ttl_ms");
    long long now = RedisModule_Milliseconds();
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(key);
        return RedisModule_ReplyWithLongLong(ctx, 0);
    }
    floorv *v = RedisModule_Calloc(1, sizeof(*v));
    v->owner = RedisModule_HoldString(NULL, argv[2]);
    v->token = ++last_token;
    v->at_ms = now + ttl;
    RedisModule_ModuleTypeSetValue(key, FloorType, v);
    RedisModule_SetExpire(key, ttl);
    mc_dec token = mc_dec_of(v->token), at = mc_dec_of(v->at_ms);
    RedisModule_Replicate(ctx, "FLOOR.LOCK_SET", "ssbb", argv[1], argv[2], MC_DEC_ARG(token), MC_DEC_ARG(at));
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, v->token);
}

/* FLOOR.LOCK_SET key owner token at_ms */
static int lock_set_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    long long token, at;
    if (RedisModule_StringToLongLong(argv[3], &token) != REDISMODULE_OK ||
        RedisModule_StringToLongLong(argv[4], &at) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR bad token or at_ms");
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    floorv *v = RedisModule_Calloc(1, sizeof(*v));
    v->owner = RedisModule_HoldString(NULL, argv[2]);
    v->token = token;
    v->at_ms = at;
    if (token > last_token) last_token = token;
    RedisModule_ModuleTypeSetValue(key, FloorType, v);
    RedisModule_SetAbsExpire(key, at);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* FLOOR.UNLOCK key owner */
static int unlock_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    int done = 0;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY && RedisModule_ModuleTypeGetType(key) == FloorType) {
        floorv *v = RedisModule_ModuleTypeGetValue(key);
        if (v->owner && RedisModule_StringCompare(v->owner, argv[2]) == 0) {
            RedisModule_DeleteKey(key);
            RedisModule_ReplicateVerbatim(ctx);
            done = 1;
        }
    }
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, done);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "mcaptcha_floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    RedisModuleTypeMethods tm = {.version = REDISMODULE_TYPE_METHOD_VERSION,
                                 .rdb_load = floor_load,
                                 .rdb_save = floor_save,
                                 .free = floor_free};
    FloorType = RedisModule_CreateDataType(ctx, "mc-floor0", 0, &tm);
    if (FloorType == NULL) return REDISMODULE_ERR;
    struct {
        const char *name;
        RedisModuleCmdFunc fn;
        const char *flags;
    } cmds[] = {
        {"floor.write", write_plain, "write deny-oom fast"},
        {"floor.write_px", write_px, "write deny-oom fast"},
        {"floor.limit", limit_cmd, "write deny-oom fast"},
        {"floor.read", read_cmd, "readonly fast"},
        {"floor.lock", lock_cmd, "write deny-oom fast"},
        {"floor.lock_set", lock_set_cmd, "write deny-oom fast"},
        {"floor.unlock", unlock_cmd, "write fast"},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (RedisModule_CreateCommand(ctx, cmds[i].name, cmds[i].fn, cmds[i].flags, 1, 1, 1) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
