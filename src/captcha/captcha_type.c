/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha_type.c -- the two module types, `mcaptmcap` (a captcha) and
 * `mcaptchal` (a challenge): RDB save and load, AOF rewrite, digest, memory
 * usage, copy and free; and the text form of a captcha's state that the
 * internal MCAPTCHA_CACHE.CAPTCHA_SET command carries (AOF and replication).
 *
 * RDB layouts (every integer with RedisModule_SaveUnsigned):
 *   captcha, encver 1: duration_s, nlevels, nlevels x (threshold, difficulty),
 *     then the leaky bucket (bucket_io.c): last_ms, nslots, nslots x (slot
 *     number, count) -- its non-zero slots, oldest first; absolute times, so the
 *     state means the same on any node at any time.
 *   challenge, encver 1: difficulty_factor, duration_s (the key's TTL is kept by
 *     Redis itself as an absolute time).
 *   encver 0 of both: the original Rust module's JSON (RedisModule_SaveStringBuffer),
 *     read so that its RDB files load in place, normalised where the original
 *     let odd values through (captcha.h). A value that cannot be interpreted at
 *     all is kept as its bytes ("unreadable", captcha.h), saved in encver 1 as
 *     a marker no readable value has, then the bytes as one string:
 *       captcha: duration_s 0;  challenge: difficulty 2^32.
 * The loaders set nothing from unchecked input: every read is checked with
 * RedisModule_IsIOError, every value is range-checked before use, a half-built
 * value is freed, and an unknown encver is refused. A challenge of duration 0
 * (which earlier versions could keep from the original's data) loads as 1 s. */
#include <string.h>

#include "captcha/captcha_glue.h"
#include "captcha/errors.h"
#include "server/args.h"
#include "server/bucket_io.h"
#include "server/clock.h"
#include "server/rdb_load.h"

RedisModuleType *CaptchaType;
RedisModuleType *ChallengeType;

/* ==== Captcha state as command arguments ==== */

/* The arguments after the key of a CAPTCHA_SET that rebuilds `c` exactly:
 * duration_s nlevels [threshold difficulty]... last_ms nslots [slot count]...
 * Returns a RedisModule_Alloc'ed array of *n strings; free with mc_free_args. */
RedisModuleString **captcha_state_args(const captcha *c, size_t *n) {
    if (c->legacy) {
        RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * 2);
        argv[0] = RedisModule_CreateString(NULL, "UNREADABLE", 10);
        argv[1] = RedisModule_CreateString(NULL, c->legacy, c->legacy_len);
        *n = 2;
        return argv;
    }
    size_t cap = 2 + 2 * (size_t)c->nlevels + 2 + 2 * bucket_nonzero_slots(&c->visits);
    RedisModuleString **argv = RedisModule_Alloc(sizeof(*argv) * cap);
    size_t at = 0;
    argv[at++] = RedisModule_CreateStringFromLongLong(NULL, c->duration_s);
    argv[at++] = RedisModule_CreateStringFromLongLong(NULL, c->nlevels);
    for (uint32_t i = 0; i < c->nlevels; i++) {
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, c->levels[i].visitor_threshold);
        argv[at++] = RedisModule_CreateStringFromLongLong(NULL, c->levels[i].difficulty_factor);
    }
    at += bucket_args_fill(&c->visits, argv + at);
    *n = at;
    return argv;
}

/* Build a captcha from CAPTCHA_SET's arguments (those after the key). On
 * failure returns NULL and points *err at a message (without the ERR code). */
captcha *captcha_from_args(RedisModuleString **argv, int argc, const char **err) {
    uint64_t duration, nlevels;
    if (argc == 2 && mc_is_word(argv[0], "UNREADABLE")) {
        size_t len;
        const char *bytes = RedisModule_StringPtrLen(argv[1], &len);
        *err = "out of memory";
        return captcha_unreadable(bytes, len);
    }
    *err = "wrong number of arguments";
    if (argc < 6) return NULL;
    if (mc_parse_u64(argv[0], 0, CAPTCHA_MAX_DURATION_S, &duration) || duration == 0) {
        *err = "duration_s must be an integer from 1 to 4294967295";
        return NULL;
    }
    if (mc_parse_u64(argv[1], 0, CAPTCHA_MAX_LEVELS, &nlevels) || nlevels == 0) {
        *err = "nlevels must be an integer from 1 to 1048576";
        return NULL;
    }
    if ((uint64_t)argc < 4 + 2 * nlevels) return NULL;
    captcha_level *levels = RedisModule_Alloc(nlevels * sizeof(*levels));
    for (uint64_t i = 0; i < nlevels; i++) {
        uint64_t th, df;
        if (mc_parse_u64(argv[2 + 2 * i], 0, UINT32_MAX, &th) || mc_parse_u64(argv[3 + 2 * i], 0, UINT32_MAX, &df)) {
            *err = "levels must be integers from 0 to 4294967295";
            RedisModule_Free(levels);
            return NULL;
        }
        levels[i].visitor_threshold = (uint32_t)th;
        levels[i].difficulty_factor = (uint32_t)df;
    }
    captcha *c = NULL;
    const char *verr = captcha_new((uint32_t)duration, levels, (uint32_t)nlevels, &c);
    RedisModule_Free(levels);
    if (verr) {
        *err = verr;
        return NULL;
    }
    int at = 2 + 2 * (int)nlevels;
    if (bucket_args_parse(&c->visits, argv + at, argc - at, err) != 0) {
        captcha_free(c);
        return NULL;
    }
    return c;
}

/* ==== Captcha type callbacks ==== */

static void CaptchaRdbSave(RedisModuleIO *rdb, void *value) {
    captcha *c = value;
    if (c->legacy) {
        RedisModule_SaveUnsigned(rdb, 0); /* the unreadable marker */
        RedisModule_SaveStringBuffer(rdb, c->legacy, c->legacy_len);
        return;
    }
    RedisModule_SaveUnsigned(rdb, c->duration_s);
    RedisModule_SaveUnsigned(rdb, c->nlevels);
    for (uint32_t i = 0; i < c->nlevels; i++) {
        RedisModule_SaveUnsigned(rdb, c->levels[i].visitor_threshold);
        RedisModule_SaveUnsigned(rdb, c->levels[i].difficulty_factor);
    }
    bucket_rdb_save(rdb, &c->visits);
}


/* An unreadable value's bytes (after its marker); NULL after logging. */
static captcha *load_unreadable(RedisModuleIO *rdb) {
    size_t len = 0;
    char *buf = RedisModule_LoadStringBuffer(rdb, &len);
    if (RedisModule_IsIOError(rdb) || buf == NULL) {
        if (buf) RedisModule_Free(buf);
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value truncated at field legacy_bytes");
        return NULL;
    }
    captcha *c = captcha_unreadable(buf, len);
    RedisModule_Free(buf);
    return c;
}

static void *captcha_load_binary(RedisModuleIO *rdb) {
    captcha *c = NULL;
    uint64_t duration, nlevels;
    captcha_level *levels = NULL;
    LOAD_FIELD(duration, 0, CAPTCHA_MAX_DURATION_S, "duration");
    if (duration == 0) return load_unreadable(rdb);
    LOAD_FIELD(nlevels, 1, CAPTCHA_MAX_LEVELS, "nlevels");
    levels = RedisModule_Alloc(nlevels * sizeof(*levels));
    for (uint64_t i = 0; i < nlevels; i++) {
        uint64_t th, df;
        LOAD_FIELD(th, 0, UINT32_MAX, "visitor_threshold");
        LOAD_FIELD(df, 0, UINT32_MAX, "difficulty_factor");
        levels[i].visitor_threshold = (uint32_t)th;
        levels[i].difficulty_factor = (uint32_t)df;
    }
    const char *err = captcha_new((uint32_t)duration, levels, (uint32_t)nlevels, &c);
    if (err) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field levels: %s", err);
        goto fail;
    }
    if (bucket_rdb_load(rdb, &c->visits) != 0) goto fail;
    RedisModule_Free(levels);
    return c;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated captcha value");
    if (levels) RedisModule_Free(levels);
    captcha_free(c);
    return NULL;
}

static void *captcha_load_legacy(RedisModuleIO *rdb) {
    size_t len = 0;
    char *buf = RedisModule_LoadStringBuffer(rdb, &len);
    if (RedisModule_IsIOError(rdb) || buf == NULL) {
        if (buf) RedisModule_Free(buf);
        return NULL;
    }
    captcha *c = NULL;
    uint32_t live = 0;
    char note[200];
    const char *err = captcha_parse_legacy(buf, len, &c, &live, note, sizeof(note));
    if (err) {
        /* Never refuse the original's data: keep it, unread (captcha.h). */
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: %s; the value is kept as it is (unreadable; "
                               "DELETE_CAPTCHA removes it)", err);
        c = captcha_unreadable(buf, len);
        RedisModule_Free(buf);
        return c;
    }
    RedisModule_Free(buf);
    if (note[0]) RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: legacy captcha normalised: %s", note);
    /* The original kept pending decrements in timers that did not survive the
     * restart: its live count comes back as visits made now, which leave after
     * `duration` like any other. */
    if (live > 0 && lb_add(&c->visits, mc_now_ms(), live, NULL) != LB_OK)
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: legacy captcha: live count %u not restored", live);
    return c;
}

static void *CaptchaRdbLoad(RedisModuleIO *rdb, int encver) {
    if (encver == CAPTCHA_ENCVER_BINARY) return captcha_load_binary(rdb);
    if (encver == CAPTCHA_ENCVER_LEGACY_JSON) return captcha_load_legacy(rdb);
    RedisModule_LogIOError(rdb, "warning",
                           "mcaptcha_cache: captcha encoding version %d is newer than this module "
                           "reads (%d); upgrade the module",
                           encver, CAPTCHA_ENCVER_LATEST);
    return NULL;
}

static void CaptchaAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    size_t n;
    RedisModuleString **args = captcha_state_args(value, &n);
    RedisModule_EmitAOF(aof, CMD_CAPTCHA_SET, "sv", key, args, n);
    mc_free_args(args, n);
}

static void CaptchaDigest(RedisModuleDigest *md, void *value) {
    captcha *c = value;
    if (c->legacy) RedisModule_DigestAddStringBuffer(md, c->legacy, c->legacy_len);
    RedisModule_DigestAddLongLong(md, c->duration_s);
    for (uint32_t i = 0; i < c->nlevels; i++) {
        RedisModule_DigestAddLongLong(md, c->levels[i].visitor_threshold);
        RedisModule_DigestAddLongLong(md, c->levels[i].difficulty_factor);
    }
    bucket_digest(md, &c->visits);
    RedisModule_DigestEndSequence(md);
}

static size_t CaptchaMemUsage(const void *value) {
    return captcha_mem_usage(value);
}

static void CaptchaFree(void *value) {
    captcha_free(value);
}

static void *CaptchaCopy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value) {
    (void)fromkey;
    (void)tokey;
    return captcha_dup(value);
}

/* ==== Challenge type callbacks ==== */

#define CHALLENGE_UNREADABLE_MARKER (1ULL << 32) /* in the difficulty field */

static void ChallengeRdbSave(RedisModuleIO *rdb, void *value) {
    challenge *ch = value;
    if (ch->legacy) {
        RedisModule_SaveUnsigned(rdb, CHALLENGE_UNREADABLE_MARKER);
        RedisModule_SaveStringBuffer(rdb, ch->legacy, ch->legacy_len);
        return;
    }
    RedisModule_SaveUnsigned(rdb, ch->difficulty_factor);
    RedisModule_SaveUnsigned(rdb, ch->duration_s);
}

/* A challenge kept as the original's bytes (legacy or after the marker). */
challenge *challenge_unreadable(const char *bytes, size_t len) {
    challenge *ch = RedisModule_Calloc(1, sizeof(*ch));
    ch->legacy = RedisModule_Alloc(len ? len : 1);
    memcpy(ch->legacy, bytes, len);
    ch->legacy_len = len;
    return ch;
}

/* The bytes after the marker, or of an encver 0 value: NULL after logging. */
static char *load_bytes(RedisModuleIO *rdb, size_t *len) {
    char *buf = RedisModule_LoadStringBuffer(rdb, len);
    if (RedisModule_IsIOError(rdb) || buf == NULL) {
        if (buf) RedisModule_Free(buf);
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value truncated at field challenge_bytes");
        return NULL;
    }
    return buf;
}

static void *ChallengeRdbLoad(RedisModuleIO *rdb, int encver) {
    challenge tmp = {0};
    if (encver == CHALLENGE_ENCVER_BINARY) {
        uint64_t df, dur;
        LOAD_FIELD(df, 0, CHALLENGE_UNREADABLE_MARKER, "difficulty_factor");
        if (df == CHALLENGE_UNREADABLE_MARKER) {
            size_t len = 0;
            char *buf = load_bytes(rdb, &len);
            if (buf == NULL) goto fail;
            challenge *ch = challenge_unreadable(buf, len);
            RedisModule_Free(buf);
            return ch;
        }
        LOAD_FIELD(dur, 0, UINT32_MAX, "duration");
        tmp.difficulty_factor = (uint32_t)df;
        tmp.duration_s = dur == 0 ? 1 : (uint32_t)dur; /* see the file comment */
    } else if (encver == CHALLENGE_ENCVER_LEGACY_JSON) {
        size_t len = 0;
        char *buf = load_bytes(rdb, &len);
        if (buf == NULL) goto fail;
        char note[200];
        const char *err = challenge_parse_legacy(buf, len, &tmp, note, sizeof(note));
        if (err) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: %s; the value is kept as it is (unreadable; "
                                   "DELETE_CHALLENGE removes it)", err);
            challenge *ch = challenge_unreadable(buf, len);
            RedisModule_Free(buf);
            return ch;
        }
        RedisModule_Free(buf);
        if (note[0]) RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: legacy challenge normalised: %s", note);
    } else {
        RedisModule_LogIOError(rdb, "warning",
                               "mcaptcha_cache: challenge encoding version %d is newer than this "
                               "module reads (%d); upgrade the module",
                               encver, CHALLENGE_ENCVER_LATEST);
        return NULL;
    }
    challenge *ch = RedisModule_Alloc(sizeof(*ch));
    *ch = tmp;
    return ch;
fail:
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated challenge value");
    return NULL;
}

static void ChallengeAofRewrite(RedisModuleIO *aof, RedisModuleString *key, void *value) {
    challenge *ch = value;
    /* Redis writes the key's TTL after this, as PEXPIREAT. */
    if (ch->legacy) {
        RedisModule_EmitAOF(aof, CMD_CHALLENGE_SET, "scb", key, "UNREADABLE", ch->legacy, ch->legacy_len);
        return;
    }
    RedisModule_EmitAOF(aof, CMD_CHALLENGE_SET, "sll", key, (long long)ch->difficulty_factor,
                        (long long)ch->duration_s);
}

static void ChallengeDigest(RedisModuleDigest *md, void *value) {
    challenge *ch = value;
    if (ch->legacy) RedisModule_DigestAddStringBuffer(md, ch->legacy, ch->legacy_len);
    RedisModule_DigestAddLongLong(md, ch->difficulty_factor);
    RedisModule_DigestAddLongLong(md, ch->duration_s);
    RedisModule_DigestEndSequence(md);
}

static size_t ChallengeMemUsage(const void *value) {
    return sizeof(challenge) + ((const challenge *)value)->legacy_len;
}

static void ChallengeFree(void *value) {
    challenge *ch = value;
    if (ch->legacy) RedisModule_Free(ch->legacy);
    RedisModule_Free(ch);
}

static void *ChallengeCopy(RedisModuleString *fromkey, RedisModuleString *tokey, const void *value) {
    (void)fromkey;
    (void)tokey;
    const challenge *from = value;
    if (from->legacy) return challenge_unreadable(from->legacy, from->legacy_len);
    challenge *ch = RedisModule_Alloc(sizeof(*ch));
    memcpy(ch, value, sizeof(*ch));
    return ch;
}

int captcha_type_register(RedisModuleCtx *ctx) {
    RedisModuleTypeMethods captcha_tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = CaptchaRdbLoad,
        .rdb_save = CaptchaRdbSave,
        .aof_rewrite = CaptchaAofRewrite,
        .mem_usage = CaptchaMemUsage,
        .digest = CaptchaDigest,
        .free = CaptchaFree,
        .copy = CaptchaCopy,
    };
    CaptchaType = RedisModule_CreateDataType(ctx, CAPTCHA_TYPE_NAME, CAPTCHA_ENCVER_LATEST, &captcha_tm);
    RedisModuleTypeMethods challenge_tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = ChallengeRdbLoad,
        .rdb_save = ChallengeRdbSave,
        .aof_rewrite = ChallengeAofRewrite,
        .mem_usage = ChallengeMemUsage,
        .digest = ChallengeDigest,
        .free = ChallengeFree,
        .copy = ChallengeCopy,
    };
    ChallengeType =
        RedisModule_CreateDataType(ctx, CHALLENGE_TYPE_NAME, CHALLENGE_ENCVER_LATEST, &challenge_tm);
    return (CaptchaType && ChallengeType) ? REDISMODULE_OK : REDISMODULE_ERR;
}
