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
 *   FLOOR.LOCK key owner ttl_ms [PERMITS n]
 *                                      when the key is empty: stores owner and a token
 *                                      from a process-wide counter, TTL ttl_ms (the lease
 *                                      ends by key expiry); replicates FLOOR.LOCK_SET key
 *                                      owner token PXAT; reply: the token, or 0 when held.
 *                                      PERMITS n (parsed, 1 to 1024): the semaphore pair's
 *                                      request shape (its floor: a key holds one holder)
 *   FLOOR.UNLOCK key owner             deletes the key when owner holds it; reply 1 or 0
 *   FLOOR.LOCK_SET key owner token at_ms   what FLOOR.LOCK replicates
 *
 * The same-job floor (issue #30, `make bench-instr`): each takes the request of one of ours,
 * with a command name of the same length, the key derived the same way, the same reply
 * shape and a replicated command of the same name length and arguments (see below):
 *   FLOOR_SAME_JOB.ADD_VISITOR name, FLOOR_SAME_JOB.GET name, FL.GCRA key rate period BURST n,
 *   FL.THROTTLE key burst count period [qty], FL.WINDOW key limit window; and what they
 *   replicate: FL.VISIT_AT, FL.GCRA_SET, FL.WINDOW_HIT.
 * SPDX-License-Identifier: BSD-3-Clause
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

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

/* FLOOR.LOCK key owner ttl_ms [PERMITS n] */
static int lock_cmd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4 && argc != 6) return RedisModule_WrongArity(ctx);
    long long ttl, permits = 1;
    if (RedisModule_StringToLongLong(argv[3], &ttl) != REDISMODULE_OK || ttl <= 0)
        return RedisModule_ReplyWithError(ctx, "ERR bad ttl_ms");
    if (argc == 6) {
        size_t wl;
        const char *w = RedisModule_StringPtrLen(argv[4], &wl);
        if (wl != 7 || strncasecmp(w, "PERMITS", 7) != 0 ||
            RedisModule_StringToLongLong(argv[5], &permits) != REDISMODULE_OK || permits < 1 || permits > 1024)
            return RedisModule_ReplyWithError(ctx, "ERR syntax error");
    }
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

/* ==== The same job (issue #30): requests, keys, replies and replication of our shape ====
 *
 * Each command below takes the request one of ours takes, with a command name of the same
 * length, derives the key the same way, gives the same reply shape and replicates a command
 * of the same name length with the same arguments; between those it does the least: a
 * counter in a module-type value. `make bench-instr` compares ours with these. */

#define SJ_CAPTCHA_PREFIX "mcap:captcha::{" /* the captcha key, as ours derives it */

/* The captcha key of `name`, built as ours builds it (one new string per call). */
static RedisModuleString *sj_captcha_key(RedisModuleCtx *ctx, RedisModuleString *name) {
    size_t nlen;
    const char *n = RedisModule_StringPtrLen(name, &nlen);
    size_t plen = sizeof(SJ_CAPTCHA_PREFIX) - 1, len = plen + nlen + 1;
    char stackbuf[256];
    char *buf = len <= sizeof(stackbuf) ? stackbuf : RedisModule_Alloc(len);
    memcpy(buf, SJ_CAPTCHA_PREFIX, plen);
    memcpy(buf + plen, n, nlen);
    buf[plen + nlen] = '}';
    RedisModuleString *key = RedisModule_CreateString(ctx, buf, len);
    if (buf != stackbuf) RedisModule_Free(buf);
    return key;
}

/* FLOOR_SAME_JOB.ADD_VISITOR name   (26 bytes, as MCAPTCHA_CACHE.ADD_VISITOR)
 * counter + 1 at mcap:captcha::{name}; reply {"duration":30,"difficulty_factor":<n>} (the
 * difficulty: 50 below 500 visits, else 500); replicates FL.VISIT_AT key <ms> (11 bytes, as
 * MC.VISIT_AT). */
static int sj_add_visitor(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = sj_captcha_key(ctx, argv[1]);
    RedisModuleKey *key;
    floorv *v = open_write(ctx, keyname, &key);
    if (v == NULL) {
        RedisModule_FreeString(ctx, keyname);
        return REDISMODULE_OK;
    }
    long long now = RedisModule_Milliseconds();
    v->n++;
    v->at_ms = now;
    char buf[80];
    size_t n = sizeof("{\"duration\":") - 1;
    memcpy(buf, "{\"duration\":", n);
    n += mc_dec_write(30, buf + n);
    memcpy(buf + n, ",\"difficulty_factor\":", sizeof(",\"difficulty_factor\":") - 1);
    n += sizeof(",\"difficulty_factor\":") - 1;
    n += mc_dec_write(v->n < 500 ? 50 : 500, buf + n);
    buf[n++] = '}';
    RedisModule_ReplyWithStringBuffer(ctx, buf, n);
    mc_dec at = mc_dec_of(now);
    RedisModule_Replicate(ctx, "FL.VISIT_AT", "sb", keyname, MC_DEC_ARG(at));
    RedisModule_CloseKey(key);
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* FL.VISIT_AT key ms: what FLOOR_SAME_JOB.ADD_VISITOR replicates. */
static int sj_visit_at(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long at;
    if (RedisModule_StringToLongLong(argv[2], &at) != REDISMODULE_OK) return RedisModule_ReplyWithError(ctx, "ERR bad ms");
    RedisModuleKey *key;
    floorv *v = open_write(ctx, argv[1], &key);
    if (v == NULL) return REDISMODULE_OK;
    v->n++;
    v->at_ms = at;
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, v->n);
}

/* FLOOR_SAME_JOB.GET name   (18 bytes, as MCAPTCHA_CACHE.GET): the counter at the derived key. */
static int sj_get(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = sj_captcha_key(ctx, argv[1]);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    long long n = 0;
    if (RedisModule_KeyType(key) != REDISMODULE_KEYTYPE_EMPTY) {
        if (RedisModule_ModuleTypeGetType(key) != FloorType) {
            RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
            goto out;
        }
        n = ((floorv *)RedisModule_ModuleTypeGetValue(key))->n;
    }
    RedisModule_ReplyWithLongLong(ctx, n);
out:
    RedisModule_CloseKey(key);
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* Parse argv[i] as an integer >= 1 into *out; -1 after an error reply. */
static int sj_arg(RedisModuleCtx *ctx, RedisModuleString *arg, long long *out) {
    if (RedisModule_StringToLongLong(arg, out) != REDISMODULE_OK || *out < 1) {
        RedisModule_ReplyWithError(ctx, "ERR bad integer");
        return -1;
    }
    return 0;
}

/* The GCRA floor's write: TAT (us) = max(TAT, now) + emission interval, TTL until the TAT,
 * replicated as FL.GCRA_SET key <tat> <emission interval> <limit> (11 bytes and 3
 * computed integers, as RL.GCRA_SET). Reply: an array of `nreply` integers. */
static int sj_gcra(RedisModuleCtx *ctx, RedisModuleString *name, long long ei_us, long long limit, int nreply) {
    long long now_us = RedisModule_Milliseconds() * 1000;
    RedisModuleKey *key;
    floorv *v = open_write(ctx, name, &key);
    if (v == NULL) return REDISMODULE_OK;
    v->n++;
    v->at_ms = (v->at_ms > now_us ? v->at_ms : now_us) + ei_us; /* the TAT, us */
    RedisModule_SetExpire(key, (v->at_ms - now_us) / 1000 + 1);
    mc_dec tat = mc_dec_of(v->at_ms), ei = mc_dec_of(ei_us), lim = mc_dec_of(limit);
    RedisModule_Replicate(ctx, "FL.GCRA_SET", "sbbb", name, MC_DEC_ARG(tat), MC_DEC_ARG(ei), MC_DEC_ARG(lim));
    RedisModule_CloseKey(key);
    RedisModule_ReplyWithArray(ctx, nreply);
    if (nreply == 5) RedisModule_ReplyWithLongLong(ctx, 0);
    if (nreply == 5) RedisModule_ReplyWithLongLong(ctx, limit);
    else RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, limit - 1);
    RedisModule_ReplyWithLongLong(ctx, -1);
    return RedisModule_ReplyWithLongLong(ctx, (v->at_ms - now_us) / 1000);
}

/* FL.GCRA key rate period_ms BURST capacity   (as RL.GCRA) */
static int sj_rl_gcra(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 6) return RedisModule_WrongArity(ctx);
    long long rate, period, burst;
    size_t wl;
    const char *w = RedisModule_StringPtrLen(argv[4], &wl);
    if (wl != 5 || strncasecmp(w, "BURST", 5) != 0) return RedisModule_ReplyWithError(ctx, "ERR syntax error");
    if (sj_arg(ctx, argv[2], &rate) || sj_arg(ctx, argv[3], &period) || sj_arg(ctx, argv[5], &burst))
        return REDISMODULE_OK;
    return sj_gcra(ctx, argv[1], period * 1000 / rate, burst, 4);
}

/* FL.THROTTLE key max_burst count period_s [quantity]   (as CL.THROTTLE; reply of 5) */
static int sj_cl_throttle(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5 && argc != 6) return RedisModule_WrongArity(ctx);
    long long burst, count, period, qty = 1;
    if (sj_arg(ctx, argv[2], &burst) || sj_arg(ctx, argv[3], &count) || sj_arg(ctx, argv[4], &period) ||
        (argc == 6 && sj_arg(ctx, argv[5], &qty)))
        return REDISMODULE_OK;
    return sj_gcra(ctx, argv[1], period * 1000000 / count * qty, burst + 1, 5);
}

/* FL.GCRA_SET key tat ei limit: what the two above replicate. */
static int sj_gcra_set(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    long long tat;
    if (RedisModule_StringToLongLong(argv[2], &tat) != REDISMODULE_OK) return RedisModule_ReplyWithError(ctx, "ERR bad tat");
    RedisModuleKey *key;
    floorv *v = open_write(ctx, argv[1], &key);
    if (v == NULL) return REDISMODULE_OK;
    v->at_ms = tat;
    RedisModule_SetAbsExpire(key, tat / 1000 + 1);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* FL.WINDOW key limit window_ms   (as RL.WINDOW): counter + 1, TTL window_ms, reply of 4;
 * replicates FL.WINDOW_HIT key window limit <ms> 1 0 (13 bytes, the arguments of
 * RL.WINDOW_HIT; window and limit are the client's own strings). */
static int sj_rl_window(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    long long limit, window;
    if (sj_arg(ctx, argv[2], &limit) || sj_arg(ctx, argv[3], &window)) return REDISMODULE_OK;
    long long now = RedisModule_Milliseconds();
    RedisModuleKey *key;
    floorv *v = open_write(ctx, argv[1], &key);
    if (v == NULL) return REDISMODULE_OK;
    v->n++;
    v->at_ms = now;
    RedisModule_SetExpire(key, window);
    mc_dec at = mc_dec_of(now);
    RedisModule_Replicate(ctx, "FL.WINDOW_HIT", "sssbcc", argv[1], argv[3], argv[2], MC_DEC_ARG(at), "1", "0");
    RedisModule_CloseKey(key);
    RedisModule_ReplyWithArray(ctx, 4);
    RedisModule_ReplyWithLongLong(ctx, 1);
    RedisModule_ReplyWithLongLong(ctx, limit - v->n);
    RedisModule_ReplyWithLongLong(ctx, -1);
    return RedisModule_ReplyWithLongLong(ctx, window);
}

/* FL.WINDOW_HIT key window limit ms cost reserved: what FL.WINDOW replicates. */
static int sj_window_hit(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 7) return RedisModule_WrongArity(ctx);
    long long window, at;
    if (RedisModule_StringToLongLong(argv[2], &window) != REDISMODULE_OK ||
        RedisModule_StringToLongLong(argv[4], &at) != REDISMODULE_OK)
        return RedisModule_ReplyWithError(ctx, "ERR bad integer");
    RedisModuleKey *key;
    floorv *v = open_write(ctx, argv[1], &key);
    if (v == NULL) return REDISMODULE_OK;
    v->n++;
    v->at_ms = at;
    RedisModule_SetAbsExpire(key, at + window);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, v->n);
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
        {"floor_same_job.add_visitor", sj_add_visitor, "write deny-oom fast"},
        {"fl.visit_at", sj_visit_at, "write deny-oom fast"},
        {"floor_same_job.get", sj_get, "readonly fast"},
        {"fl.gcra", sj_rl_gcra, "write deny-oom fast"},
        {"fl.throttle", sj_cl_throttle, "write deny-oom fast"},
        {"fl.gcra_set", sj_gcra_set, "write deny-oom fast"},
        {"fl.window", sj_rl_window, "write deny-oom fast"},
        {"fl.window_hit", sj_window_hit, "write deny-oom fast"},
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
        if (RedisModule_CreateCommand(ctx, cmds[i].name, cmds[i].fn, cmds[i].flags, 1, 1, 1) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
