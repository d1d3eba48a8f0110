/* SPDX-License-Identifier: BSD-3-Clause */
/* policy.c -- stored limit policies: named GCRA or WINDOW definitions kept once
 * per node, so that RL.GCRA / RL.WINDOW (and their _PEEK forms) can say
 * `POLICY name` instead of the numbers, and a limit changes in one place.
 *
 *   RL.POLICY_SET <name> GCRA <rate> <period ms> [BURST <capacity>]
 *   RL.POLICY_SET <name> WINDOW <limit> <window ms>
 *   RL.POLICY_GET <name>      RL.POLICY_DEL <name>      RL.POLICY_LIST
 *
 * Policies are node-wide, like Redis Functions, not keys: FLUSHALL keeps them,
 * a cluster needs them on every primary. SET and DEL replicate verbatim (so the
 * AOF has them too); the RDB carries the table as module aux data of the type
 * `mcap-plcy`, written before the keys:
 *   encver 1: count, then per policy: name (string), kind, rate, period_ms, burst
 * The aux loader checks every read and field and builds a new table, which
 * replaces the old one only when all of it loaded: after DEBUG RELOAD, a
 * restart or a replica's full sync the node has exactly the file's policies.
 * The table is written even when empty (aux_save, not 7.2's aux_save2, which
 * skips an empty one -- then a load would not run aux_load and could not clear
 * a stale table): an RDB written here needs the module, as one with its keys does.
 * An AOF rewritten without the RDB preamble cannot carry aux data, so SET is
 * refused while appendonly is on with aof-use-rdb-preamble no, and a rewrite
 * started that way while policies exist logs a warning.
 *
 * The definition and its ranges are core/policy.c's; the commands resolve a
 * name into the explicit numbers (rl_policy_resolve_or_reply), so replication
 * of RL.GCRA / RL.WINDOW never depends on the replica's policies. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/bucket.h"
#include "ratelimit/ratelimit_glue.h"
#include "server/args.h"
#include "server/rdb_load.h"

#define SHOWN_NAME_MAX 64 /* bytes of a name quoted in an error */

static RedisModuleDict *policies; /* name -> policy_def (RedisModule_Alloc) */
static RedisModuleType *PolicyType;

/* Free a table and its definitions. */
static void free_table(RedisModuleDict *d) {
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(d, "^", NULL, 0);
    void *val;
    while (RedisModule_DictNextC(it, NULL, &val)) RedisModule_Free(val);
    RedisModule_DictIteratorStop(it);
    RedisModule_FreeDict(NULL, d);
}

/* `name` as an error quotes it: at most SHOWN_NAME_MAX bytes, bytes outside
 * printable ASCII as '?', "..." when cut. */
static void show_name(const char *p, size_t len, char *out) {
    size_t n = len > SHOWN_NAME_MAX ? SHOWN_NAME_MAX : len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        out[i] = c >= 0x20 && c < 0x7f && c != '\'' ? (char)c : '?';
    }
    if (len > SHOWN_NAME_MAX) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

static const char *kind_word(policy_kind k) {
    return k == POLICY_GCRA ? "GCRA" : "WINDOW";
}

int rl_policy_resolve_or_reply(RedisModuleCtx *ctx, RedisModuleString *name, policy_kind kind, const char *cmd,
                               policy_def *out) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(name, &len);
    policy_def *d = RedisModule_DictGet(policies, name, NULL);
    char shown[SHOWN_NAME_MAX + 4], buf[256];
    if (d == NULL) {
        show_name(p, len, shown);
        snprintf(buf, sizeof(buf), "ERR no such policy '%s' (RL.POLICY_SET defines it)", shown);
        return RedisModule_ReplyWithError(ctx, buf), -1;
    }
    if (d->kind != kind) {
        show_name(p, len, shown);
        snprintf(buf, sizeof(buf), "ERR policy '%s' is a %s policy; %s takes a %s policy", shown, kind_word(d->kind),
                 cmd, kind_word(kind));
        return RedisModule_ReplyWithError(ctx, buf), -1;
    }
    *out = *d;
    return 0;
}

/* Whether the AOF is on and rewritten without the RDB preamble: such a rewrite
 * keeps no module aux data, hence no policy. 1: yes; 0: no; -1: the AOF is on
 * but aof-use-rdb-preamble cannot be read (CONFIG renamed or disabled). */
static int aof_without_preamble(RedisModuleCtx *ctx) {
    if (!(RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_AOF)) return 0;
    RedisModuleCallReply *r = RedisModule_Call(ctx, "CONFIG", "cc", "GET", "aof-use-rdb-preamble");
    int no = -1;
    if (r && RedisModule_CallReplyType(r) == REDISMODULE_REPLY_ARRAY && RedisModule_CallReplyLength(r) == 2) {
        size_t len;
        const char *v = RedisModule_CallReplyStringPtr(RedisModule_CallReplyArrayElement(r, 1), &len);
        if (v) no = len == 2 && strncasecmp(v, "no", 2) == 0;
    }
    if (r) RedisModule_FreeCallReply(r);
    return no;
}

/* Parse RL.POLICY_SET's definition (argv[2..]) into *d; on an error reply and
 * return -1. The ranges are RL.GCRA's and RL.WINDOW's, with their messages. */
static int parse_def_or_reply(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, policy_def *d) {
    memset(d, 0, sizeof(*d));
    if (mc_is_word(argv[2], "GCRA")) {
        d->kind = POLICY_GCRA;
        if (mc_parse_u64(argv[3], 1, POLICY_GCRA_RATE_MAX, &d->rate))
            return mc_reply_range(ctx, "rate", 1, POLICY_GCRA_RATE_MAX), -1;
        if (mc_parse_u64(argv[4], 1, POLICY_GCRA_PERIOD_MS_MAX, &d->period_ms))
            return mc_reply_range(ctx, "period (milliseconds)", 1, POLICY_GCRA_PERIOD_MS_MAX), -1;
        for (int i = 5; i < argc; i += 2) {
            if (!mc_is_word(argv[i], "BURST"))
                return mc_reply_unknown_option(ctx, "RL.POLICY_SET", argv[i], "BURST capacity"), -1;
            if (i + 1 >= argc) return mc_reply_needs_value(ctx, "BURST", "capacity"), -1;
            if (mc_parse_u64(argv[i + 1], 1, POLICY_GCRA_BURST_MAX, &d->burst))
                return mc_reply_range(ctx, "BURST", 1, POLICY_GCRA_BURST_MAX), -1;
        }
    } else if (mc_is_word(argv[2], "WINDOW")) {
        d->kind = POLICY_WINDOW;
        if (mc_parse_u64(argv[3], 1, POLICY_WINDOW_LIMIT_MAX, &d->rate))
            return mc_reply_range(ctx, "limit", 1, POLICY_WINDOW_LIMIT_MAX), -1;
        if (mc_parse_u64(argv[4], 1, LB_MAX_WINDOW_MS, &d->period_ms))
            return mc_reply_range(ctx, "window (milliseconds)", 1, LB_MAX_WINDOW_MS), -1;
        if (argc > 5)
            return mc_reply_unknown_option(ctx, "RL.POLICY_SET", argv[5], "no option after WINDOW limit window-ms"), -1;
    } else {
        return RedisModule_ReplyWithError(ctx, "ERR policy type must be GCRA or WINDOW"), -1;
    }
    switch (policy_check(d)) {
    case POLICY_OK: return 0;
    case POLICY_ERR_TOO_LARGE: return RedisModule_ReplyWithError(ctx, "ERR burst * period / rate is too large"), -1;
    default: return RedisModule_ReplyWithError(ctx, "ERR window out of range"), -1;
    }
}

/* RL.POLICY_SET <name> GCRA <rate> <period ms> [BURST <capacity>]
 * RL.POLICY_SET <name> WINDOW <limit> <window ms>
 * Stores the policy <name> (1 to 256 bytes, binary-safe), replacing one of the
 * same name. Reply: OK. Refused, storing nothing, on bad input, beyond 65536
 * policies, and while appendonly is yes with aof-use-rdb-preamble no. */
static int PolicySet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 5) return RedisModule_WrongArity(ctx);
    size_t len;
    RedisModule_StringPtrLen(argv[1], &len);
    if (len < 1 || len > POLICY_NAME_MAX) return RedisModule_ReplyWithError(ctx, "ERR policy name must be 1 to 256 bytes");
    policy_def d;
    if (parse_def_or_reply(ctx, argv, argc, &d) != 0) return REDISMODULE_OK;
    policy_def *have = RedisModule_DictGet(policies, argv[1], NULL);
    if (have == NULL && RedisModule_DictSize(policies) >= POLICY_COUNT_MAX)
        return RedisModule_ReplyWithError(ctx, "ERR too many policies (at most 65536 per node)");
    /* Replayed from the primary or the AOF: what was accepted there is kept. */
    int replayed = RedisModule_GetContextFlags(ctx) & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING);
    int no_preamble = replayed ? 0 : aof_without_preamble(ctx);
    if (no_preamble < 0)
        RedisModule_Log(ctx, "warning", "mcaptcha_cache: RL.POLICY_SET could not read aof-use-rdb-preamble (CONFIG "
                        "renamed?); stored policies survive an AOF rewrite only with the RDB preamble (yes, the "
                        "default)");
    if (no_preamble > 0)
        return RedisModule_ReplyWithError(ctx, "ERR policies are kept in the RDB (and the AOF's RDB preamble), but "
                                               "appendonly is yes with aof-use-rdb-preamble no: an AOF rewrite would "
                                               "drop them; set aof-use-rdb-preamble yes first");
    if (have) {
        *have = d;
    } else {
        policy_def *v = RedisModule_Alloc(sizeof(*v));
        *v = d;
        RedisModule_DictSet(policies, argv[1], v);
    }
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

/* RL.POLICY_GET <name>
 * Reply: the definition as RL.POLICY_SET takes it -- [GCRA, rate, period_ms]
 * (then BURST, capacity, when it was given) or [WINDOW, limit, window_ms] --
 * or nil when there is no such policy. */
static int PolicyGet_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    policy_def *d = RedisModule_DictGet(policies, argv[1], NULL);
    if (d == NULL) return RedisModule_ReplyWithNull(ctx);
    RedisModule_ReplyWithArray(ctx, d->burst ? 5 : 3);
    const char *w = kind_word(d->kind);
    RedisModule_ReplyWithStringBuffer(ctx, w, strlen(w));
    RedisModule_ReplyWithLongLong(ctx, (long long)d->rate);
    RedisModule_ReplyWithLongLong(ctx, (long long)d->period_ms);
    if (d->burst) {
        RedisModule_ReplyWithStringBuffer(ctx, "BURST", 5);
        RedisModule_ReplyWithLongLong(ctx, (long long)d->burst);
    }
    return REDISMODULE_OK;
}

/* RL.POLICY_DEL <name>
 * Removes the policy. Reply: 1, or 0 when there was none (nothing replicated).
 * Keys limited under it keep their state; later calls naming it are refused. */
static int PolicyDel_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    void *old = NULL;
    if (RedisModule_DictDel(policies, argv[1], &old) != REDISMODULE_OK) return RedisModule_ReplyWithLongLong(ctx, 0);
    RedisModule_Free(old);
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithLongLong(ctx, 1);
}

/* RL.POLICY_LIST
 * Reply: the names of all policies, in byte order (definitions: RL.POLICY_GET). */
static int PolicyList_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    RedisModule_ReplyWithArray(ctx, (long)RedisModule_DictSize(policies));
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(policies, "^", NULL, 0);
    size_t len;
    char *name;
    while ((name = RedisModule_DictNextC(it, &len, NULL)) != NULL) RedisModule_ReplyWithStringBuffer(ctx, name, len);
    RedisModule_DictIteratorStop(it);
    return REDISMODULE_OK;
}

/* ==== RDB: module aux data, before the keys ==== */

static void PolicyAuxSave(RedisModuleIO *rdb, int when) {
    if (when != REDISMODULE_AUX_BEFORE_RDB) return;
    RedisModule_SaveUnsigned(rdb, RedisModule_DictSize(policies));
    RedisModuleDictIter *it = RedisModule_DictIteratorStartC(policies, "^", NULL, 0);
    size_t len;
    char *name;
    policy_def *d;
    while ((name = RedisModule_DictNextC(it, &len, (void **)&d)) != NULL) {
        RedisModule_SaveStringBuffer(rdb, name, len);
        RedisModule_SaveUnsigned(rdb, (uint64_t)d->kind);
        RedisModule_SaveUnsigned(rdb, d->rate);
        RedisModule_SaveUnsigned(rdb, d->period_ms);
        RedisModule_SaveUnsigned(rdb, d->burst);
    }
    RedisModule_DictIteratorStop(it);
}

/* Load the table into a new dict; on success it replaces the current one (a
 * load never merges), on any bad read or field the load fails, logging which,
 * and the current table stays. */
static int PolicyAuxLoad(RedisModuleIO *rdb, int encver, int when) {
    if (encver != POLICY_ENCVER_1 || when != REDISMODULE_AUX_BEFORE_RDB) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: policy table encoding version %d (when %d) is not one "
                               "this module reads (%d, before the keys)", encver, when, POLICY_ENCVER_LATEST);
        return REDISMODULE_ERR;
    }
    RedisModuleDict *loaded = RedisModule_CreateDict(NULL);
    char *name = NULL;
    uint64_t n;
    LOAD_FIELD(n, 0, POLICY_COUNT_MAX, "policy count");
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        name = RedisModule_LoadStringBuffer(rdb, &len);
        if (RedisModule_IsIOError(rdb) || name == NULL) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value truncated at field policy name");
            goto fail;
        }
        if (len < 1 || len > POLICY_NAME_MAX) {
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: policy name of %zu bytes, "
                                   "not 1 to %d", len, POLICY_NAME_MAX);
            goto fail;
        }
        uint64_t kind;
        policy_def d;
        LOAD_FIELD(kind, POLICY_GCRA, POLICY_WINDOW, "policy kind");
        LOAD_FIELD(d.rate, 0, UINT64_MAX, "policy rate");           /* ranges: policy_check below */
        LOAD_FIELD(d.period_ms, 0, UINT64_MAX, "policy period_ms");
        LOAD_FIELD(d.burst, 0, UINT64_MAX, "policy burst");
        d.kind = (policy_kind)kind;
        char shown[SHOWN_NAME_MAX + 4];
        if (policy_check(&d) != POLICY_OK) {
            show_name(name, len, shown);
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: policy '%s' (%s %llu %llu "
                                   "burst %llu) is out of range", shown, kind_word(d.kind), (unsigned long long)d.rate,
                                   (unsigned long long)d.period_ms, (unsigned long long)d.burst);
            goto fail;
        }
        policy_def *v = RedisModule_Alloc(sizeof(*v));
        *v = d;
        if (RedisModule_DictSetC(loaded, name, len, v) != REDISMODULE_OK) {
            RedisModule_Free(v);
            show_name(name, len, shown);
            RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: policy '%s' twice", shown);
            goto fail;
        }
        RedisModule_Free(name);
        name = NULL;
    }
    free_table(policies);
    policies = loaded;
    return REDISMODULE_OK;
fail:
    if (name) RedisModule_Free(name);
    free_table(loaded);
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: corrupt or truncated policy table (mcap-plcy)");
    return REDISMODULE_ERR;
}

/* The type holds no key: rdb_load refuses, the rest have nothing to do. */
static void *PolicyRdbLoad(RedisModuleIO *rdb, int encver) {
    (void)encver;
    RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: a key of type mcap-plcy (policies are not keys)");
    return NULL;
}

static void PolicyRdbSave(RedisModuleIO *rdb, void *value) {
    (void)rdb;
    (void)value;
}

static void PolicyFree(void *value) {
    (void)value;
}

/* A rewrite of the AOF without the RDB preamble is about to drop the table. */
static void on_persistence(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    (void)e;
    (void)data;
    if (sub != REDISMODULE_SUBEVENT_PERSISTENCE_AOF_START && sub != REDISMODULE_SUBEVENT_PERSISTENCE_SYNC_AOF_START)
        return;
    uint64_t n = RedisModule_DictSize(policies);
    int no_preamble = n > 0 ? aof_without_preamble(ctx) : 0;
    if (no_preamble < 0)
        RedisModule_Log(ctx, "warning", "mcaptcha_cache: could not read aof-use-rdb-preamble (CONFIG renamed?): if "
                        "it is no, this AOF rewrite drops the %llu stored rate-limit policies", (unsigned long long)n);
    if (no_preamble > 0)
        RedisModule_Log(ctx, "warning", "mcaptcha_cache: this AOF rewrite has no RDB preamble (aof-use-rdb-preamble "
                        "no), so the rewritten AOF drops the %llu stored rate-limit policies; set "
                        "aof-use-rdb-preamble yes and rewrite again (BGREWRITEAOF)", (unsigned long long)n);
}

void rl_policy_info(RedisModuleInfoCtx *ctx) {
    RedisModule_InfoAddFieldULongLong(ctx, "rl_policies", RedisModule_DictSize(policies));
}

static const mc_command commands[] = {
    {"RL.POLICY_SET", PolicySet_RedisCommand, "write deny-oom", 0, 0, 0},
    {"RL.POLICY_GET", PolicyGet_RedisCommand, "readonly fast", 0, 0, 0},
    {"RL.POLICY_DEL", PolicyDel_RedisCommand, "write fast", 0, 0, 0},
    {"RL.POLICY_LIST", PolicyList_RedisCommand, "readonly", 0, 0, 0},
};

int ratelimit_policy_register(RedisModuleCtx *ctx) {
    policies = RedisModule_CreateDict(NULL);
    RedisModuleTypeMethods tm = {
        .version = REDISMODULE_TYPE_METHOD_VERSION,
        .rdb_load = PolicyRdbLoad,
        .rdb_save = PolicyRdbSave,
        .free = PolicyFree,
        .aux_load = PolicyAuxLoad,
        .aux_save = PolicyAuxSave,
        .aux_save_triggers = REDISMODULE_AUX_BEFORE_RDB,
    };
    PolicyType = RedisModule_CreateDataType(ctx, POLICY_TYPE_NAME, POLICY_ENCVER_LATEST, &tm);
    if (PolicyType == NULL) return REDISMODULE_ERR;
    if (RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Persistence, on_persistence) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return mc_register_commands(ctx, commands, sizeof(commands) / sizeof(commands[0]), ratelimit_cmdinfo);
}
