/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha_cmd.c -- the nine MCAPTCHA_CACHE.* commands of the mCaptcha cache
 * protocol (docs/protocol.md, "Commands"), and the three internal
 * commands that replication and the AOF use to carry absolute times.
 *
 * Each public command takes a captcha name and opens the key derived from it
 * (the original module's layout, so its data can be adopted):
 *   captcha    mcap:captcha::{<name>}
 *   challenge  mcap:CHALLENGE:{<name>}:<challenge>
 * The hash tag puts both in the slot of <name>, which is where a cluster client
 * routes the command; a name whose key would hash elsewhere is refused in
 * cluster mode.
 *
 * Replication: a command that changed something replicates one deterministic
 * command that carries the time it used (never the clock-reading command itself):
 *   ADD_CAPTCHA -> CAPTCHA_SET key <state>      ADD_VISITOR -> MC.VISIT_AT key <now ms>
 *   ADD_CHALLENGE -> MC.CHALLENGE_SET key .. PXAT   RENAME_CAPTCHA -> RENAME old new (TTL kept)
 * (MC.* are the short names of MCAPTCHA_CACHE.VISIT_AT and .CHALLENGE_SET, which
 * older builds sent and which stay accepted: captcha_glue.h.)
 *   DELETE_CAPTCHA, GET_CHALLENGE, DELETE_CHALLENGE -> DEL key
 * Reads replicate nothing. Every write also signals the declared name for
 * CLIENT TRACKING and WATCH (tracking.c). */
#include <stdio.h>
#include <string.h>

#include "captcha/captcha_glue.h"
#include "captcha/errors.h"
#include "core/decimal.h"
#include "core/keyslot.h"
#include "server/args.h"
#include "server/clock.h"
#include "server/cluster.h"
#include "server/internal.h"
#include "server/keys.h"
#include "server/replargs.h"

/* INFO `captcha` counters (captcha_info). */
static struct {
    long long added, deleted, visits, not_found, challenges_added, challenges_refused, challenges_served,
        challenges_deleted, challenges_missed;
} cstats;

/* ==== Helpers ==== */

/* Build the key `prefix` + name + "}" + suffix. In cluster mode, reply with an
 * error and return NULL when that key would hash to another slot than the name
 * (the slot clients route on). The caller frees the returned string. */
static RedisModuleString *derived_key_or_reply(RedisModuleCtx *ctx, const char *prefix,
                                               RedisModuleString *name, const char *suffix,
                                               size_t suffix_len) {
    size_t plen = strlen(prefix), nlen;
    const char *n = RedisModule_StringPtrLen(name, &nlen);
    size_t len = plen + nlen + 1 + suffix_len;
    char stackbuf[256];
    char *buf = len <= sizeof(stackbuf) ? stackbuf : RedisModule_Alloc(len);
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, n, nlen);
    buf[plen + nlen] = '}';
    if (suffix_len) memcpy(buf + plen + nlen + 1, suffix, suffix_len);
    RedisModuleString *key = NULL;
    if (mc_cluster_enabled && keyslot_of(buf, len) != keyslot_of(n, nlen)) {
        RedisModule_ReplyWithError(ctx, ERR_NAME_SLOT);
    } else {
        key = RedisModule_CreateString(ctx, buf, len);
    }
    if (buf != stackbuf) RedisModule_Free(buf);
    return key;
}

static RedisModuleString *captcha_key_or_reply(RedisModuleCtx *ctx, RedisModuleString *name) {
    return derived_key_or_reply(ctx, CAPTCHA_KEY_PREFIX, name, NULL, 0);
}

static RedisModuleString *challenge_key_or_reply(RedisModuleCtx *ctx, RedisModuleString *name,
                                                 const char *challenge, size_t len) {
    /* mcap:CHALLENGE:{<name>}:<challenge> */
    char small[CHALLENGE_MAX_STRING_BYTES + 2];
    char *suffix = len + 1 <= sizeof(small) ? small : RedisModule_Alloc(len + 1);
    suffix[0] = ':';
    memcpy(suffix + 1, challenge, len);
    RedisModuleString *key = derived_key_or_reply(ctx, CHALLENGE_KEY_PREFIX, name, suffix, len + 1);
    if (suffix != small) RedisModule_Free(suffix);
    return key;
}

/* Open `keyname` and check that it is empty or holds `type`. On a key of another
 * type reply WRONGTYPE and return -1; else return 0 with *key open (NULL when a
 * read-only open found no key) and *empty telling whether the key is empty. */
static int open_typed_or_reply(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode,
                               RedisModuleType *type, RedisModuleKey **key, int *empty) {
    if (mc_open_typed_empty(ctx, keyname, mode, type, key, empty) != 0) {
        RedisModule_ReplyWithError(ctx, REDISMODULE_ERRORMSG_WRONGTYPE);
        return -1;
    }
    return 0;
}

/* The captcha commands declare the *name* as their key, which never exists as a
 * Redis key, so while its slot migrates the cluster sends every call to the
 * importing node (ASK). There a missing derived key may still be on the source:
 * reply TRYAGAIN (the client retries) rather than "not found" or creating a
 * second copy. Returns 1 when it replied. Outside a cluster, or when this node
 * owns the slot, a missing key is simply missing. */
static int missing_elsewhere_or_reply(RedisModuleCtx *ctx, RedisModuleString *name) {
    if (!mc_cluster_enabled) return 0;
    size_t len;
    const char *n = RedisModule_StringPtrLen(name, &len);
    if (mc_slot_is_mine(ctx, keyslot_of(n, len))) return 0;
    RedisModule_ReplyWithError(ctx, ERR_TRYAGAIN);
    return 1;
}

/* Reply "ERR <msg>". */
static int reply_err(RedisModuleCtx *ctx, const char *msg) {
    char buf[512];
    snprintf(buf, sizeof(buf), "ERR %s", msg);
    return RedisModule_ReplyWithError(ctx, buf);
}

static int parse_time_ms(RedisModuleString *s, uint64_t *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < 0 || (unsigned long long)v > LB_MAX_TIME_MS)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

/* The captcha at an open key, ready for a visit: its ring in its own allocation
 * (captcha_with_ring; the key's value is replaced when the captcha moved).
 * NULL when out of memory (the key is unchanged). */
static captcha *captcha_for_visit(RedisModuleKey *key, captcha *c) {
    if (c->legacy || c->visits.ring_inline) return c;
    captcha *d = captcha_with_ring(c);
    if (d != NULL && d != c) RedisModule_ModuleTypeReplaceValue(key, CaptchaType, d, NULL);
    return d;
}

static void replicate_captcha_state(RedisModuleCtx *ctx, RedisModuleString *key, const captcha *c) {
    size_t n;
    RedisModuleString **args = captcha_state_args(c, &n);
    RedisModule_Replicate(ctx, CMD_CAPTCHA_SET, "sv", key, args, n);
    mc_free_args(args, n);
}

/* ==== Captcha commands ==== */

/* MCAPTCHA_CACHE.ADD_CAPTCHA <name> <json config> */
static int AddCaptcha_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = captcha_key_or_reply(ctx, argv[1]);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &key, &empty) != 0) goto out;
    if (!empty) {
        RedisModule_ReplyWithError(ctx, ERR_CAPTCHA_EXISTS);
    } else if (missing_elsewhere_or_reply(ctx, argv[1])) {
        /* replied TRYAGAIN */
    } else {
        size_t len;
        const char *json = RedisModule_StringPtrLen(argv[2], &len);
        captcha *c = NULL;
        int json_error;
        char errbuf[200];
        const char *err = captcha_parse_config(json, len, &c, &json_error, errbuf, sizeof(errbuf));
        if (err) {
            reply_err(ctx, err);
        } else {
            RedisModule_ModuleTypeSetValue(key, CaptchaType, c);
            replicate_captcha_state(ctx, keyname, c);
            captcha_touched(ctx, argv[1], keyname);
            cstats.added++;
            RedisModule_ReplyWithSimpleString(ctx, "OK");
        }
    }
    RedisModule_CloseKey(key);
out:
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.ADD_VISITOR <name>
 * Reply: {"duration":<s>,"difficulty_factor":<n>} for the count after this visit. */
static int AddVisitor_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = captcha_key_or_reply(ctx, argv[1]);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &key, &empty) != 0) goto out;
    if (empty) {
        if (!missing_elsewhere_or_reply(ctx, argv[1])) {
            cstats.not_found++;
            RedisModule_ReplyWithError(ctx, ERR_CAPTCHA_NOT_FOUND);
        }
    } else {
        captcha *c = captcha_for_visit(key, RedisModule_ModuleTypeGetValue(key));
        uint64_t count;
        lb_status st = c == NULL ? LB_ERR_NOMEM : c->legacy ? LB_OK : lb_add(&c->visits, mc_now_ms(), 1, &count);
        if (c != NULL && c->legacy) {
            RedisModule_ReplyWithError(ctx, ERR_UNREADABLE_CAPTCHA);
        } else if (st != LB_OK) {
            RedisModule_ReplyWithError(ctx, st == LB_ERR_FULL ? ERR_COUNT_FULL : ERR_NOMEM);
        } else {
            /* {"duration":<s>,"difficulty_factor":<n>}, built without printf (hot path) */
            char buf[80];
            size_t n = sizeof("{\"duration\":") - 1;
            memcpy(buf, "{\"duration\":", n);
            n += mc_dec_write(c->duration_s, buf + n);
            memcpy(buf + n, ",\"difficulty_factor\":", sizeof(",\"difficulty_factor\":") - 1);
            n += sizeof(",\"difficulty_factor\":") - 1;
            n += mc_dec_write(captcha_difficulty(c, count), buf + n);
            buf[n++] = '}';
            RedisModule_ReplyWithStringBuffer(ctx, buf, n);
            static mc_carg at; /* visits within one millisecond replicate the same time */
            RedisModule_Replicate(ctx, CMD_VISIT_AT_SHORT, "ss", keyname, mc_carg_of(&at, (long long)c->visits.last_ms));
            captcha_touched(ctx, argv[1], keyname);
            cstats.visits++;
        }
    }
    RedisModule_CloseKey(key);
out:
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.GET <name>
 * Reply: integer, the visits still counting now. */
static int Get_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = captcha_key_or_reply(ctx, argv[1]);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ, CaptchaType, &key, &empty) != 0) goto out;
    if (empty) {
        if (!missing_elsewhere_or_reply(ctx, argv[1])) {
            cstats.not_found++;
            RedisModule_ReplyWithError(ctx, ERR_CAPTCHA_NOT_FOUND);
        }
    } else {
        captcha *c = RedisModule_ModuleTypeGetValue(key);
        if (c->legacy) RedisModule_ReplyWithError(ctx, ERR_UNREADABLE_CAPTCHA);
        else RedisModule_ReplyWithLongLong(ctx, (long long)lb_count(&c->visits, mc_now_ms()));
    }
    RedisModule_CloseKey(key);
out:
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.CAPTCHA_EXISTS <name>
 * Reply: 0 when the captcha exists, 1 when it does not (inverted, as the
 * protocol requires). */
static int CaptchaExists_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = captcha_key_or_reply(ctx, argv[1]);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ, CaptchaType, &key, &empty) == 0) {
        if (!empty || !missing_elsewhere_or_reply(ctx, argv[1])) RedisModule_ReplyWithLongLong(ctx, empty ? 1 : 0);
        RedisModule_CloseKey(key);
    }
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.DELETE_CAPTCHA <name> */
static int DeleteCaptcha_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    RedisModuleString *keyname = captcha_key_or_reply(ctx, argv[1]);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &key, &empty) == 0) {
        if (empty) {
            if (!missing_elsewhere_or_reply(ctx, argv[1])) {
                cstats.not_found++;
                RedisModule_ReplyWithError(ctx, ERR_CAPTCHA_NOT_FOUND);
            }
        } else {
            RedisModule_DeleteKey(key);
            RedisModule_Replicate(ctx, "DEL", "s", keyname);
            captcha_touched(ctx, argv[1], keyname);
            cstats.deleted++;
            RedisModule_ReplyWithSimpleString(ctx, "OK");
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.RENAME_CAPTCHA <old name> <new name>
 * Moves the whole state, live count included, and its TTL (as RENAME does, which
 * is what replicas and the AOF get). OK when <old> does not exist (as the original
 * did); an error when <new> exists. */
static int RenameCaptcha_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleString *oldname = captcha_key_or_reply(ctx, argv[1]);
    if (oldname == NULL) return REDISMODULE_OK;
    RedisModuleString *newname = captcha_key_or_reply(ctx, argv[2]);
    if (newname == NULL) {
        RedisModule_FreeString(ctx, oldname);
        return REDISMODULE_OK;
    }
    int old_empty, new_empty;
    RedisModuleKey *from = NULL, *to = NULL;
    if (open_typed_or_reply(ctx, oldname, REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &from, &old_empty) != 0)
        goto out;
    if (old_empty) {
        if (!missing_elsewhere_or_reply(ctx, argv[1])) RedisModule_ReplyWithSimpleString(ctx, "OK");
        goto out;
    }
    if (RedisModule_StringCompare(oldname, newname) == 0) {
        RedisModule_ReplyWithSimpleString(ctx, "OK"); /* onto itself: nothing to do */
        goto out;
    }
    if (open_typed_or_reply(ctx, newname, REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &to, &new_empty) != 0) goto out;
    if (!new_empty) {
        RedisModule_ReplyWithError(ctx, ERR_TARGET_EXISTS);
        goto out;
    }
    if (missing_elsewhere_or_reply(ctx, argv[2])) goto out;
    captcha *moved = captcha_dup(RedisModule_ModuleTypeGetValue(from));
    if (moved == NULL) {
        RedisModule_ReplyWithError(ctx, ERR_NOMEM);
        goto out;
    }
    mstime_t expire_at = RedisModule_GetAbsExpire(from);
    RedisModule_ModuleTypeSetValue(to, CaptchaType, moved);
    if (expire_at != REDISMODULE_NO_EXPIRE) RedisModule_SetAbsExpire(to, expire_at);
    RedisModule_DeleteKey(from);
    RedisModule_Replicate(ctx, "RENAME", "ss", oldname, newname);
    captcha_touched(ctx, argv[1], oldname);
    captcha_touched(ctx, argv[2], newname);
    RedisModule_ReplyWithSimpleString(ctx, "OK");
out:
    RedisModule_CloseKey(from);
    RedisModule_CloseKey(to);
    RedisModule_FreeString(ctx, oldname);
    RedisModule_FreeString(ctx, newname);
    return REDISMODULE_OK;
}

/* ==== Challenge commands ==== */

/* MCAPTCHA_CACHE.ADD_CHALLENGE <name> <json {"difficulty":n,"duration":s,"challenge":"..."}>
 * The captcha need not exist. The challenge expires `duration` seconds from now. */
static int AddChallenge_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    size_t len;
    const char *json = RedisModule_StringPtrLen(argv[2], &len);
    challenge ch = {0};
    const char *str;
    size_t slen;
    void *holder;
    int json_error;
    char errbuf[200];
    const char *err = challenge_parse(json, len, &ch, &str, &slen, &holder, &json_error, errbuf, sizeof(errbuf));
    if (err) return reply_err(ctx, err);
    RedisModuleString *keyname = challenge_key_or_reply(ctx, argv[1], str, slen);
    challenge_json_release(holder);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, ChallengeType, &key, &empty) == 0) {
        if (!empty) {
            cstats.challenges_refused++;
            RedisModule_ReplyWithError(ctx, ERR_CHALLENGE_EXISTS);
        } else if (missing_elsewhere_or_reply(ctx, argv[1])) {
            /* replied TRYAGAIN */
        } else {
            challenge *v = RedisModule_Alloc(sizeof(*v));
            *v = ch;
            long long expire_at = (long long)mc_now_ms() + (long long)ch.duration_s * 1000;
            RedisModule_ModuleTypeSetValue(key, ChallengeType, v);
            RedisModule_SetAbsExpire(key, expire_at);
            mc_dec f = mc_dec_of((long long)ch.difficulty_factor), d = mc_dec_of((long long)ch.duration_s),
                   at = mc_dec_of(expire_at);
            RedisModule_Replicate(ctx, CMD_CHALLENGE_SET_SHORT, "sbbcb", keyname, MC_DEC_ARG(f), MC_DEC_ARG(d), "PXAT",
                                  MC_DEC_ARG(at));
            captcha_touched(ctx, argv[1], keyname);
            cstats.challenges_added++;
            RedisModule_ReplyWithSimpleString(ctx, "OK");
        }
        RedisModule_CloseKey(key);
    }
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* Shared by GET_CHALLENGE (reply with the challenge) and DELETE_CHALLENGE (reply OK):
 * both remove the challenge; a missing one is "Challenge not found". */
static int take_challenge(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int reply_value) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    size_t slen;
    const char *str = RedisModule_StringPtrLen(argv[2], &slen);
    RedisModuleString *keyname = challenge_key_or_reply(ctx, argv[1], str, slen);
    if (keyname == NULL) return REDISMODULE_OK;
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, keyname, REDISMODULE_READ | REDISMODULE_WRITE, ChallengeType, &key, &empty) == 0) {
        if (empty) {
            if (!missing_elsewhere_or_reply(ctx, argv[1])) {
                cstats.challenges_missed++;
                RedisModule_ReplyWithError(ctx, ERR_CHALLENGE_NOT_FOUND);
            }
        } else {
            challenge *ch = RedisModule_ModuleTypeGetValue(key);
            if (ch->legacy && reply_value) {
                RedisModule_ReplyWithError(ctx, ERR_UNREADABLE_CHALLENGE);
                goto close; /* kept: only DELETE_CHALLENGE removes it */
            }
            if (reply_value) {
                char buf[80];
                int n = snprintf(buf, sizeof(buf), "{\"difficulty_factor\":%u,\"duration\":%u}",
                                 ch->difficulty_factor, ch->duration_s);
                RedisModule_ReplyWithStringBuffer(ctx, buf, (size_t)n);
            } else {
                RedisModule_ReplyWithSimpleString(ctx, "OK");
            }
            RedisModule_DeleteKey(key);
            RedisModule_Replicate(ctx, "DEL", "s", keyname);
            captcha_touched(ctx, argv[1], keyname);
            if (reply_value) cstats.challenges_served++;
            else cstats.challenges_deleted++;
        }
    close:
        RedisModule_CloseKey(key);
    }
    RedisModule_FreeString(ctx, keyname);
    return REDISMODULE_OK;
}

/* MCAPTCHA_CACHE.GET_CHALLENGE <name> <challenge>
 * Reply: {"difficulty_factor":<n>,"duration":<s>}; the challenge is deleted (one-shot). */
static int GetChallenge_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return take_challenge(ctx, argv, argc, 1);
}

/* MCAPTCHA_CACHE.DELETE_CHALLENGE <name> <challenge> */
static int DeleteChallenge_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return take_challenge(ctx, argv, argc, 0);
}

/* ==== Internal commands (argument 1 is the real key) ====
 * Clients are refused unless the module was loaded with INTERNAL-COMMANDS yes
 * (server/internal.h). */

/* MCAPTCHA_CACHE.VISIT_AT <key> <unix ms>   (and MC.VISIT_AT, the same)
 * One visit as if the clock read <unix ms>. Reply: integer count after it. */
static int visit_at(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const char *name) {
    if (!mc_internal_allowed_or_reply(ctx, name)) return REDISMODULE_OK;
    if (argc != 3) return RedisModule_WrongArity(ctx);
    uint64_t at;
    if (parse_time_ms(argv[2], &at) != 0) return RedisModule_ReplyWithError(ctx, ERR_BAD_TIME);
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &key, &empty) != 0) return REDISMODULE_OK;
    if (empty) {
        RedisModule_ReplyWithError(ctx, ERR_NO_CAPTCHA_KEY);
    } else {
        captcha *c = captcha_for_visit(key, RedisModule_ModuleTypeGetValue(key));
        uint64_t count;
        lb_status st = c == NULL ? LB_ERR_NOMEM : c->legacy ? LB_OK : lb_add(&c->visits, at, 1, &count);
        if (c != NULL && c->legacy) {
            RedisModule_ReplyWithError(ctx, ERR_UNREADABLE_CAPTCHA);
        } else if (st != LB_OK) {
            RedisModule_ReplyWithError(ctx, st == LB_ERR_FULL ? ERR_COUNT_FULL : ERR_NOMEM);
        } else {
            RedisModule_ReplicateVerbatim(ctx);
            captcha_touched_key(ctx, argv[1]);
            RedisModule_ReplyWithLongLong(ctx, (long long)count);
        }
    }
    RedisModule_CloseKey(key);
    return REDISMODULE_OK;
}

static int VisitAt_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return visit_at(ctx, argv, argc, CMD_VISIT_AT);
}

static int VisitAtShort_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return visit_at(ctx, argv, argc, CMD_VISIT_AT_SHORT);
}

/* MCAPTCHA_CACHE.CAPTCHA_SET <key> <duration s> <nlevels> [<threshold> <difficulty>]...
 *                            <last ms> <nslots> [<slot> <count>]...
 * Replaces <key> with exactly this captcha state (AOF rewrite, replication). */
static int CaptchaSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (!mc_internal_allowed_or_reply(ctx, CMD_CAPTCHA_SET)) return REDISMODULE_OK;
    if (argc < 4) return RedisModule_WrongArity(ctx);
    const char *err;
    captcha *c = captcha_from_args(argv + 2, argc - 2, &err);
    if (c == NULL) {
        char buf[300];
        snprintf(buf, sizeof(buf), ERR_BAD_STATE "%s", err);
        return RedisModule_ReplyWithError(ctx, buf);
    }
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, CaptchaType, &key, &empty) != 0) {
        captcha_free(c);
        return REDISMODULE_OK;
    }
    RedisModule_ModuleTypeSetValue(key, CaptchaType, c);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    captcha_touched_key(ctx, argv[1]);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* MCAPTCHA_CACHE.CHALLENGE_SET <key> <difficulty> <duration s> [PXAT <unix ms>]
 * MCAPTCHA_CACHE.CHALLENGE_SET <key> UNREADABLE <bytes> [PXAT <unix ms>]
 * (and MC.CHALLENGE_SET, the same)
 * Replaces <key> with this challenge (the second form: one of the original's
 * that cannot be read, kept as its bytes), expiring at PXAT (else no TTL). */
static int challenge_set(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, const char *name) {
    if (!mc_internal_allowed_or_reply(ctx, name)) return REDISMODULE_OK;
    if (argc < 4 || argc > 6) return RedisModule_WrongArity(ctx);
    long long df = 0, dur = 0;
    uint64_t pxat = 0;
    int unreadable = mc_is_word(argv[2], "UNREADABLE");
    if (!unreadable && (RedisModule_StringToLongLong(argv[2], &df) != REDISMODULE_OK || df < 0 || df > UINT32_MAX))
        return RedisModule_ReplyWithError(ctx, "ERR difficulty must be an integer from 0 to 4294967295");
    if (!unreadable && (RedisModule_StringToLongLong(argv[3], &dur) != REDISMODULE_OK || dur < 1 || dur > UINT32_MAX))
        return RedisModule_ReplyWithError(ctx, "ERR duration must be an integer from 1 to 4294967295");
    if (argc > 4) {
        if (!mc_is_word(argv[4], "PXAT"))
            return mc_reply_unknown_option(ctx, name, argv[4], "PXAT unix-time-milliseconds");
        if (argc == 5) return mc_reply_needs_value(ctx, "PXAT", "unix-time-milliseconds");
        if (parse_time_ms(argv[5], &pxat) != 0 || pxat == 0)
            return RedisModule_ReplyWithError(ctx, "ERR PXAT must be an integer number of Unix milliseconds from 1 to 2^48");
    }
    int empty;
    RedisModuleKey *key;
    if (open_typed_or_reply(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE, ChallengeType, &key, &empty) != 0) return REDISMODULE_OK;
    challenge *v;
    if (unreadable) {
        size_t blen;
        const char *bytes = RedisModule_StringPtrLen(argv[3], &blen);
        v = challenge_unreadable(bytes, blen);
    } else {
        v = RedisModule_Calloc(1, sizeof(*v));
        v->difficulty_factor = (uint32_t)df;
        v->duration_s = (uint32_t)dur;
    }
    RedisModule_ModuleTypeSetValue(key, ChallengeType, v);
    if (pxat) RedisModule_SetAbsExpire(key, (long long)pxat);
    RedisModule_CloseKey(key);
    RedisModule_ReplicateVerbatim(ctx);
    captcha_touched_key(ctx, argv[1]);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int ChallengeSet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return challenge_set(ctx, argv, argc, CMD_CHALLENGE_SET);
}

static int ChallengeSetShort_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return challenge_set(ctx, argv, argc, CMD_CHALLENGE_SET_SHORT);
}

/* ==== Registration ==== */

static const mc_command commands[] = {
    {"MCAPTCHA_CACHE.ADD_CAPTCHA", AddCaptcha_RedisCommand, "write deny-oom", 1, 1, 1},
    {"MCAPTCHA_CACHE.ADD_VISITOR", AddVisitor_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.GET", Get_RedisCommand, "readonly fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.CAPTCHA_EXISTS", CaptchaExists_RedisCommand, "readonly fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.DELETE_CAPTCHA", DeleteCaptcha_RedisCommand, "write fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.RENAME_CAPTCHA", RenameCaptcha_RedisCommand, "write deny-oom", 1, 2, 1},
    {"MCAPTCHA_CACHE.ADD_CHALLENGE", AddChallenge_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.GET_CHALLENGE", GetChallenge_RedisCommand, "write fast", 1, 1, 1},
    {"MCAPTCHA_CACHE.DELETE_CHALLENGE", DeleteChallenge_RedisCommand, "write fast", 1, 1, 1},
    {CMD_VISIT_AT, VisitAt_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {CMD_CAPTCHA_SET, CaptchaSet_RedisCommand, "write deny-oom", 1, 1, 1},
    {CMD_CHALLENGE_SET, ChallengeSet_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {CMD_VISIT_AT_SHORT, VisitAtShort_RedisCommand, "write deny-oom fast", 1, 1, 1},
    {CMD_CHALLENGE_SET_SHORT, ChallengeSetShort_RedisCommand, "write deny-oom fast", 1, 1, 1},
};

void captcha_info(RedisModuleInfoCtx *ctx) {
    RedisModule_InfoAddSection(ctx, "captcha");
    RedisModule_InfoAddFieldLongLong(ctx, "captchas_added", cstats.added);
    RedisModule_InfoAddFieldLongLong(ctx, "captchas_deleted", cstats.deleted);
    RedisModule_InfoAddFieldLongLong(ctx, "visits", cstats.visits);
    RedisModule_InfoAddFieldLongLong(ctx, "captcha_not_found", cstats.not_found);
    RedisModule_InfoAddFieldLongLong(ctx, "challenges_added", cstats.challenges_added);
    RedisModule_InfoAddFieldLongLong(ctx, "challenges_refused", cstats.challenges_refused);
    RedisModule_InfoAddFieldLongLong(ctx, "challenges_served", cstats.challenges_served);
    RedisModule_InfoAddFieldLongLong(ctx, "challenges_deleted", cstats.challenges_deleted);
    RedisModule_InfoAddFieldLongLong(ctx, "challenges_not_found", cstats.challenges_missed);
}

int captcha_cmd_register(RedisModuleCtx *ctx) {
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), captcha_cmdinfo);
}
