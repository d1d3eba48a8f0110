/* SPDX-License-Identifier: BSD-3-Clause */
/* lock_type.c -- the module type `mcap-lock` (a lock or semaphore, lock.h): RDB
 * save and load, AOF rewrite, digest, memory usage, copy and free; and the text
 * form of its state that the internal LOCK.STATE command carries.
 *
 * RDB layout (RedisModule_SaveUnsigned, owner with SaveStringBuffer):
 *   encver 1: permits, last_token, nholders, nholders x (owner, expires_ms, count, token)
 *   encver 2: the same, then flags (bit 0: ephemeral, a concurrency limit)
 *   encver 3: permits, last_token, nholders, nholders x (owner, expires_ms, count,
 *             token, delay_ms, shared, weight), flags; count 0 is a lock-delay slot,
 *             shared 1 a read hold of a read-write lock, weight the permits the
 *             entry takes (core/lock.h)
 *   encver 4: encver 3, then the semaphore pool's adjustment (SaveSigned,
 *             -LOCK_MAX_PERMITS..LOCK_MAX_PERMITS; 0 on a concurrency limit or
 *             beside readers)
 * Lease ends are absolute Unix milliseconds. A session holder's connection is
 * not persisted: after a restart or failover its lease is what ends it. */
#include <string.h>

#include "lock/lock_glue.h"
#include "server/args.h"
#include "server/rdb_load.h"
#include "server/waitq.h"

RedisModuleType *LockType;
void (*lock_load_hook)(const lockv *l, int db, const RedisModuleString *key);
void (*lock_unlink_hook)(lockv *l, int db, const RedisModuleString *key);
void (*lock_free_hook)(lockv *l);

static void LockRdbSave(RedisModuleIO *rdb, void *value) {
    lockv *l = value;
    RedisModule_SaveUnsigned(rdb, l->permits);
    RedisModule_SaveUnsigned(rdb, l->last_token);
    RedisModule_SaveUnsigned(rdb, l->nholders);
    for (uint32_t i = 0; i < l->nholders; i++) {
        lock_holder *h = &l->holders[i];
        RedisModule_SaveStringBuffer(rdb, h->owner, h->owner_len);
        RedisModule_SaveUnsigned(rdb, h->expires_ms);
        RedisModule_SaveUnsigned(rdb, h->count);
        RedisModule_SaveUnsigned(rdb, h->token);
        RedisModule_SaveUnsigned(rdb, h->delay_ms);
        RedisModule_SaveUnsigned(rdb, h->shared);
        RedisModule_SaveUnsigned(rdb, h->weight);
    }
    RedisModule_SaveUnsigned(rdb, l->ephemeral ? 1 : 0);
    RedisModule_SaveSigned(rdb, l->adjust);
}

static void *LockRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver < LOCK_ENCVER_1 || encver > LOCK_ENCVER_4) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: lock encoding version %d is not one this module reads (%d)",
                               encver, LOCK_ENCVER_LATEST);
        return NULL;
    }
    lockv *l = NULL;
    uint64_t permits, last, n;
    LOAD_FIELD(permits, 1, LOCK_MAX_PERMITS, "permits");
    LOAD_FIELD(last, 0, LOCK_MAX_TOKEN, "last_token");
    LOAD_FIELD(n, 0, LOCK_MAX_PERMITS, "nholders");
    l = lock_new((uint32_t)permits);
    l->last_token = last;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        char *owner = RedisModule_LoadStringBuffer(rdb, &len);
        if (RedisModule_IsIOError(rdb) || owner == NULL) goto fail;
        uint64_t expires = RedisModule_LoadUnsigned(rdb);
        int bad = RedisModule_IsIOError(rdb) || expires > LOCK_MAX_TIME_MS;
        uint64_t count = bad ? 0 : RedisModule_LoadUnsigned(rdb);
        bad = bad || RedisModule_IsIOError(rdb) || count > UINT32_MAX;
        uint64_t token = bad ? 0 : RedisModule_LoadUnsigned(rdb);
        bad = bad || RedisModule_IsIOError(rdb);
        uint64_t delay = bad || encver < LOCK_ENCVER_3 ? 0 : RedisModule_LoadUnsigned(rdb);
        bad = bad || RedisModule_IsIOError(rdb);
        if (!bad && delay > LOCK_MAX_LEASE_MS) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field delay_ms = %llu, not in [0, %llu]",
                                   (unsigned long long)delay, (unsigned long long)LOCK_MAX_LEASE_MS);
            bad = 1;
        }
        uint64_t shared = bad || encver < LOCK_ENCVER_3 ? 0 : RedisModule_LoadUnsigned(rdb);
        bad = bad || RedisModule_IsIOError(rdb);
        if (!bad && shared > 1) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field shared = %llu, not in [0, 1]",
                                   (unsigned long long)shared);
            bad = 1;
        }
        uint64_t weight = bad || encver < LOCK_ENCVER_3 ? 1 : RedisModule_LoadUnsigned(rdb);
        bad = bad || RedisModule_IsIOError(rdb);
        if (!bad && (weight < 1 || weight > LOCK_MAX_PERMITS)) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field weight = %llu, not in [1, %d]",
                                   (unsigned long long)weight, LOCK_MAX_PERMITS);
            bad = 1;
        }
        bad = bad ||
              lock_restore_holder(l, owner, len, expires, (uint32_t)count, token, delay, encver >= LOCK_ENCVER_3) != 0;
        RedisModule_Free(owner);
        if (bad) goto fail;
        l->holders[l->nholders - 1].shared = (uint16_t)shared;
        l->holders[l->nholders - 1].weight = (uint32_t)weight;
    }
    if (encver >= LOCK_ENCVER_2) {
        uint64_t flags;
        LOAD_U64(flags, 1);
        l->ephemeral = (uint32_t)flags;
    }
    if (encver >= LOCK_ENCVER_4) {
        int64_t adjust = RedisModule_LoadSigned(rdb);
        if (RedisModule_IsIOError(rdb)) goto fail;
        if (adjust < -LOCK_MAX_PERMITS || adjust > LOCK_MAX_PERMITS) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field adjust = %lld, not in [%d, %d]",
                                   (long long)adjust, -LOCK_MAX_PERMITS, LOCK_MAX_PERMITS);
            goto fail;
        }
        l->adjust = (int32_t)adjust;
    }
    int bad = lock_check(l);
    if (bad == LOCK_BAD_DELAY) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field delay_ms = 0 on a "
                                               "lock-delay slot (count 0), or set on a concurrency limit");
        goto fail;
    }
    if (bad == LOCK_BAD_SHARED) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field shared = 1 on a "
                                               "semaphore, a concurrency limit or beside an exclusive holder");
        goto fail;
    }
    if (bad == LOCK_BAD_ADJUST) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field adjust set on a "
                                               "concurrency limit or beside shared holders");
        goto fail;
    }
    if (bad) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field weight above the "
                                               "permits, or above 1 on a concurrency limit");
        goto fail;
    }
    /* Keep fencing tokens growing past this lock's, and end its leases on time. */
    if (lock_load_hook) lock_load_hook(l, RedisModule_GetDbIdFromIO(rdb), RedisModule_GetKeyNameFromIO(rdb));
    return l;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated lock value");
    lock_free(l);
    return NULL;
}

RedisModuleString **lock_state_args(const lockv *l, size_t *n) {
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * (6 + 12 * (size_t)l->nholders));
    size_t at = 0;
    argv[at++] = RedisModule_CreateStringFromLongLong(NULL, l->permits);
    argv[at++] = RedisModule_CreateStringFromLongLong(NULL, (long long)l->last_token);
    argv[at++] = RedisModule_CreateStringFromLongLong(NULL, l->nholders);
    for (uint32_t i = 0; i < l->nholders; i++) {
        lock_holder *h = &l->holders[i];
        argv[at++] = RedisModule_CreateString(NULL, h->owner, h->owner_len);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, (long long)h->expires_ms);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, h->count);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, (long long)h->token);
    }
    for (uint32_t i = 0; i < l->nholders; i++) {
        if (l->holders[i].delay_ms == 0) continue;
        argv[at++] = RedisModule_CreateString(NULL, "DELAY", 5);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, i);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, (long long)l->holders[i].delay_ms);
    }
    for (uint32_t i = 0; i < l->nholders; i++) {
        if (!l->holders[i].shared) continue;
        argv[at++] = RedisModule_CreateString(NULL, "SHARED", 6);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, i);
    }
    for (uint32_t i = 0; i < l->nholders; i++) {
        if (l->holders[i].weight == 1) continue;
        argv[at++] = RedisModule_CreateString(NULL, "TAKE", 4);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, i);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, l->holders[i].weight);
    }
    if (l->adjust != 0) {
        argv[at++] = RedisModule_CreateString(NULL, "ADJUST", 6);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, l->adjust);
    }
    if (l->ephemeral) argv[at++] = RedisModule_CreateString(NULL, "EPHEMERAL", 9);
    *n = at;
    return argv;
}

/* The error texts below name LOCK_MAX_TOKEN's and LOCK_MAX_PERMITS' values. */
_Static_assert(LOCK_MAX_PERMITS == 1024, "update the TAKE and ADJUST ranges in holder_options_from_args' errors");
_Static_assert(LOCK_MAX_TOKEN == 4611686018427387904ULL, "update the token range in lock_from_args' errors");

/* lock_from_args' part after the holders: [DELAY index delay-ms]...
 * [SHARED index]... [TAKE index k]... [ADJUST a]; they go to holders of `l`
 * (ADJUST: to `l`, once). 0, or -1 when malformed (*err set for a bad DELAY,
 * SHARED, TAKE or ADJUST, left as the caller's syntax text for anything
 * else). */
static int holder_options_from_args(lockv *l, RedisModuleString **argv, int argc, const char **err) {
    int i = 0, adjust_seen = 0;
    while (i < argc) {
        uint64_t at, delay;
        if (mc_is_word(argv[i], "DELAY")) {
            if (i + 3 > argc || l->nholders == 0 || mc_parse_u64(argv[i + 1], 0, l->nholders - 1, &at) ||
                mc_parse_u64(argv[i + 2], 1, LOCK_MAX_LEASE_MS, &delay) || l->holders[at].delay_ms != 0) {
                *err = "expected DELAY holder-index delay-ms (1 to 2^40 ms, once per holder) after the holders";
                return -1;
            }
            l->holders[at].delay_ms = delay;
            i += 3;
        } else if (mc_is_word(argv[i], "SHARED")) {
            if (i + 2 > argc || l->nholders == 0 || mc_parse_u64(argv[i + 1], 0, l->nholders - 1, &at) ||
                l->holders[at].shared) {
                *err = "expected SHARED holder-index (once per holder) after the holders";
                return -1;
            }
            l->holders[at].shared = 1;
            i += 2;
        } else if (mc_is_word(argv[i], "TAKE")) {
            uint64_t k;
            if (i + 3 > argc || l->nholders == 0 || mc_parse_u64(argv[i + 1], 0, l->nholders - 1, &at) ||
                mc_parse_u64(argv[i + 2], 2, LOCK_MAX_PERMITS, &k) || l->holders[at].weight != 1) {
                *err = "expected TAKE holder-index k (2 to 1024, once per holder) after the holders";
                return -1;
            }
            l->holders[at].weight = (uint32_t)k;
            i += 3;
        } else if (mc_is_word(argv[i], "ADJUST")) {
            long long a;
            if (i + 2 > argc || adjust_seen || RedisModule_StringToLongLong(argv[i + 1], &a) != REDISMODULE_OK ||
                a < -LOCK_MAX_PERMITS || a > LOCK_MAX_PERMITS) {
                *err = "expected ADJUST a (-1024 to 1024, once) after the holders";
                return -1;
            }
            l->adjust = (int32_t)a;
            adjust_seen = 1;
            i += 2;
        } else {
            return -1; /* *err: the syntax */
        }
    }
    return 0;
}

lockv *lock_from_args(RedisModuleString **argv, int argc, const char **err) {
    uint64_t permits, last, n;
    static const char *syntax = "expected permits last_token nholders [owner expires_ms count token]... "
                                "[DELAY index ms]... [SHARED index]... [TAKE index k]... [ADJUST a] [EPHEMERAL]";
    *err = syntax;
    int ephemeral = argc > 0 && mc_is_word(argv[argc - 1], "EPHEMERAL");
    if (ephemeral) argc--;
    if (argc < 3) return NULL;
    if (mc_parse_u64(argv[1], 0, LOCK_MAX_TOKEN, &last)) {
        *err = "last_token must be an integer from 0 to 4611686018427387904 (2^62, the largest fencing token)";
        return NULL;
    }
    if (mc_parse_u64(argv[0], 1, LOCK_MAX_PERMITS, &permits) || mc_parse_u64(argv[2], 0, LOCK_MAX_PERMITS, &n) ||
        (uint64_t)argc < 3 + 4 * n)
        return NULL;
    lockv *l = lock_new((uint32_t)permits);
    l->last_token = last;
    l->ephemeral = (uint32_t)ephemeral;
    *err = "holders need distinct non-empty owners, counts >= 1 (0: a lock-delay) and tokens from 1 to last_token";
    for (uint64_t i = 0; i < n; i++) {
        RedisModuleString **h = argv + 3 + 4 * i;
        uint64_t expires, count, token;
        size_t len;
        const char *owner = RedisModule_StringPtrLen(h[0], &len);
        if (mc_parse_u64(h[1], 0, LOCK_MAX_TIME_MS, &expires) || mc_parse_u64(h[2], 0, UINT32_MAX, &count) ||
            mc_parse_u64(h[3], 1, LOCK_MAX_TOKEN, &token) ||
            lock_restore_holder(l, owner, len, expires, (uint32_t)count, token, 0, 1) != 0) {
            lock_free(l);
            return NULL;
        }
    }
    *err = syntax;
    if (holder_options_from_args(l, argv + 3 + 4 * n, argc - 3 - 4 * (int)n, err) != 0) {
        lock_free(l);
        return NULL;
    }
    if (lock_check(l) != 0) {
        *err = "a holder with count 0 (a lock-delay) needs its DELAY; a concurrency limit (EPHEMERAL) has no DELAY, "
               "SHARED, TAKE nor ADJUST; SHARED holders only with permits 1, no exclusive holder and no ADJUST; TAKE k "
               "up to permits";
        lock_free(l);
        return NULL;
    }
    return l;
}

static void LockAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    size_t n;
    RedisModuleString **args = lock_state_args(value, &n);
    RedisModule_EmitAOF(aof, CMD_LOCK_STATE, "sv", key, args, n);
    mc_free_args(args, n);
}

static void LockDigest(RedisModuleDigest *md, void *value) {
    lockv *l = value;
    RedisModule_DigestAddLongLong(md, l->permits);
    RedisModule_DigestAddLongLong(md, (long long)l->last_token);
    RedisModule_DigestAddLongLong(md, l->ephemeral);
    if (l->adjust) { /* tagged, and only when set: an unadjusted lock's digest is as before */
        RedisModule_DigestAddStringBuffer(md, "adjust", 6);
        RedisModule_DigestAddLongLong(md, l->adjust);
    }
    for (uint32_t i = 0; i < l->nholders; i++) {
        lock_holder *h = &l->holders[i];
        RedisModule_DigestAddStringBuffer(md, h->owner, h->owner_len);
        RedisModule_DigestAddLongLong(md, (long long)h->expires_ms);
        RedisModule_DigestAddLongLong(md, h->count);
        RedisModule_DigestAddLongLong(md, (long long)h->token);
        /* optional fields, each tagged so that one cannot pass for another */
        if (h->delay_ms) {
            RedisModule_DigestAddStringBuffer(md, "delay", 5);
            RedisModule_DigestAddLongLong(md, (long long)h->delay_ms);
        }
        if (h->shared) RedisModule_DigestAddStringBuffer(md, "shared", 6);
        if (h->weight != 1) {
            RedisModule_DigestAddStringBuffer(md, "weight", 6);
            RedisModule_DigestAddLongLong(md, h->weight);
        }
    }
    RedisModule_DigestEndSequence(md);
}

static size_t LockMemUsage(const void *value) {
    return lock_mem_usage(value);
}

static void LockFree(void *value) {
    if (lock_free_hook) lock_free_hook(value);
    lock_free(value);
}

/* The value left its key: its lease timer follows it or goes (leases.c), and
 * the key's waiters are served just after the command. */
static void LockUnlink(RedisModuleKeyOptCtx *ctx, const void *value) {
    int db = RedisModule_GetDbIdFromOptCtx(ctx);
    const RedisModuleString *key = RedisModule_GetKeyNameFromOptCtx(ctx);
    if (lock_unlink_hook) lock_unlink_hook((lockv *)value, db, key);
    waitq_key_gone(db, key);
}

static void *LockCopy(RedisModuleKeyOptCtx *ctx, const void *value) {
    lockv *l = lock_dup(value);
    if (l && lock_load_hook)
        lock_load_hook(l, RedisModule_GetToDbIdFromOptCtx(ctx), RedisModule_GetToKeyNameFromOptCtx(ctx));
    return l;
}

int lock_type_register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = LockRdbLoad,
        .rdb_save = LockRdbSave,
        .aof_rewrite = LockAofRewrite,
        .mem_usage = LockMemUsage,
        .digest = LockDigest,
        .free = LockFree,
        .unlink2 = LockUnlink,
        .copy2 = LockCopy,
    };
    LockType = RedisModule_CreateDataType(ctx, LOCK_TYPE_NAME, LOCK_ENCVER_LATEST, &tm);
    return LockType ? REDISMODULE_OK : REDISMODULE_ERR;
}
