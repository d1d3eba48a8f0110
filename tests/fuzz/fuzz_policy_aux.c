/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_policy_aux.c -- the stored policies' RDB aux loader (src/ratelimit/policy.c,
 * PolicyAuxLoad) fed through fuzz_stubs.h's in-memory RedisModule_Load* (varints,
 * length-prefixed buffers, HANDLE_IO_ERRORS semantics), with a small sorted-array
 * stand-in for RedisModuleDict.
 *
 * Input: byte 0 picks the encver (b0 & 1: the current one, else (b0 >> 1) % 4)
 * and the trigger (b0 & 0x10: after the keys, which the type never asks for);
 * the rest is the aux stream.
 * A refused load must leave the node's table as it was (same dict, same size).
 * An accepted one must have come with the current encver, before the keys,
 * without an IO error, and hold only valid policies (names 1..256 bytes,
 * policy_check OK, at most POLICY_COUNT_MAX); then aux_save -> aux_load must
 * consume the saved bytes exactly, log nothing, and save the same bytes again,
 * and aux_save after the keys must write nothing. */
#include "../../src/ratelimit/policy.c"

#include "fuzz_stubs.h"

/* ---- What server/commands.c and ratelimit_info.c define (not reached here) ---- */
mc_cmdinfo ratelimit_cmdinfo[] = {{NULL}};
int mc_register_commands(RedisModuleCtx *ctx, const mc_command *cmds, size_t n, mc_cmdinfo *infos) {
    (void)ctx;
    (void)cmds;
    (void)n;
    (void)infos;
    return REDISMODULE_OK;
}

/* ---- RedisModuleDict: a sorted array of (key, value) ---- */
typedef struct dentry {
    char *key;
    size_t len;
    void *val;
} dentry;
struct RedisModuleDict {
    dentry *e;
    size_t n, cap;
};
struct RedisModuleDictIter {
    RedisModuleDict *d;
    size_t i;
};

static int dcmp(const char *a, size_t alen, const char *b, size_t blen) {
    int c = memcmp(a, b, alen < blen ? alen : blen);
    return c ? c : (alen < blen ? -1 : alen > blen);
}

/* Index of `key`, or of where it would go (*found 0). */
static size_t dfind(RedisModuleDict *d, const char *key, size_t len, int *found) {
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = dcmp(d->e[mid].key, d->e[mid].len, key, len);
        if (c == 0) return *found = 1, mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return *found = 0, lo;
}

static RedisModuleDict *stub_CreateDict(RedisModuleCtx *ctx) {
    (void)ctx;
    return calloc(1, sizeof(RedisModuleDict));
}
static void stub_FreeDict(RedisModuleCtx *ctx, RedisModuleDict *d) {
    (void)ctx;
    for (size_t i = 0; i < d->n; i++) free(d->e[i].key);
    free(d->e);
    free(d);
}
static uint64_t stub_DictSize(RedisModuleDict *d) { return d->n; }
static int stub_DictSetC(RedisModuleDict *d, void *key, size_t len, void *val) {
    int found;
    size_t i = dfind(d, key, len, &found);
    if (found) return REDISMODULE_ERR;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->e = realloc(d->e, d->cap * sizeof(dentry));
    }
    memmove(d->e + i + 1, d->e + i, (d->n - i) * sizeof(dentry));
    d->e[i].key = malloc(len ? len : 1);
    memcpy(d->e[i].key, key, len);
    d->e[i].len = len;
    d->e[i].val = val;
    d->n++;
    return REDISMODULE_OK;
}
static int stub_DictSet(RedisModuleDict *d, RedisModuleString *key, void *val) {
    size_t len;
    const char *p = stub_StringPtrLen(key, &len);
    return stub_DictSetC(d, (void *)p, len, val);
}
static void *stub_DictGet(RedisModuleDict *d, RedisModuleString *key, int *nokey) {
    size_t len;
    const char *p = stub_StringPtrLen(key, &len);
    int found;
    size_t i = dfind(d, p, len, &found);
    if (nokey) *nokey = !found;
    return found ? d->e[i].val : NULL;
}
static RedisModuleDictIter *stub_DictIteratorStartC(RedisModuleDict *d, const char *op, void *key, size_t len) {
    FUZZ_CHECK(strcmp(op, "^") == 0 && key == NULL && len == 0); /* only "from the first" is used */
    RedisModuleDictIter *it = calloc(1, sizeof(*it));
    it->d = d;
    return it;
}
static void *stub_DictNextC(RedisModuleDictIter *it, size_t *len, void **val) {
    if (it->i >= it->d->n) return NULL;
    dentry *e = &it->d->e[it->i++];
    if (len) *len = e->len;
    if (val) *val = e->val;
    return e->key;
}
static void stub_DictIteratorStop(RedisModuleDictIter *it) { free(it); }

/* A table's saved form (for comparing tables). */
static void save_table(RedisModuleIO *saver) {
    fio_reader(saver, NULL, 0);
    PolicyAuxSave(saver, REDISMODULE_AUX_BEFORE_RDB);
}

static void check_table(void) {
    FUZZ_CHECK(policies->n <= POLICY_COUNT_MAX);
    for (size_t i = 0; i < policies->n; i++) {
        const dentry *e = &policies->e[i];
        FUZZ_CHECK(e->len >= 1 && e->len <= POLICY_NAME_MAX);
        FUZZ_CHECK(policy_check(e->val) == POLICY_OK);
        gcra_params p;
        const policy_def *d = e->val;
        FUZZ_CHECK(d->kind != POLICY_GCRA || policy_gcra_params(d, &p) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        fuzz_install_stubs();
        RedisModule_CreateDict = stub_CreateDict;
        RedisModule_FreeDict = stub_FreeDict;
        RedisModule_DictSize = stub_DictSize;
        RedisModule_DictSet = stub_DictSet;
        RedisModule_DictSetC = stub_DictSetC;
        RedisModule_DictGet = stub_DictGet;
        RedisModule_DictIteratorStartC = stub_DictIteratorStartC;
        RedisModule_DictNextC = stub_DictNextC;
        RedisModule_DictIteratorStop = stub_DictIteratorStop;
        policies = stub_CreateDict(NULL);
        init = 1;
    }
    if (size < 1) return 0;
    int encver = (data[0] & 1) ? POLICY_ENCVER_1 : (data[0] >> 1) % 4;
    int when = (data[0] & 0x10) ? REDISMODULE_AUX_BEFORE_RDB << 1 : REDISMODULE_AUX_BEFORE_RDB;

    RedisModuleDict *before = policies;
    RedisModuleIO prev;
    save_table(&prev);
    RedisModuleIO io;
    fio_reader(&io, data + 1, size - 1);
    int rc = PolicyAuxLoad(&io, encver, when);
    if (rc != REDISMODULE_OK) {
        /* refused: the table is the one before, unchanged */
        FUZZ_CHECK(rc == REDISMODULE_ERR && policies == before);
        RedisModuleIO now;
        save_table(&now);
        FUZZ_CHECK(now.out_len == prev.out_len && memcmp(now.out, prev.out, now.out_len) == 0);
        fio_free(&now);
        fio_free(&prev);
        return 0;
    }
    fio_free(&prev);
    FUZZ_CHECK(encver == POLICY_ENCVER_1 && when == REDISMODULE_AUX_BEFORE_RDB && !io.error);
    check_table();

    /* aux_save -> aux_load: consumed exactly, nothing logged, the same bytes saved again */
    RedisModuleIO s1, s2, re, after;
    save_table(&s1);
    fio_reader(&re, s1.out, s1.out_len);
    FUZZ_CHECK(PolicyAuxLoad(&re, POLICY_ENCVER_1, REDISMODULE_AUX_BEFORE_RDB) == REDISMODULE_OK);
    FUZZ_CHECK(!re.error && re.pos == re.in_len && re.nlogged == 0);
    save_table(&s2);
    FUZZ_CHECK(s1.out_len == s2.out_len && memcmp(s1.out, s2.out, s1.out_len) == 0);
    fio_reader(&after, NULL, 0);
    PolicyAuxSave(&after, REDISMODULE_AUX_BEFORE_RDB << 1);
    FUZZ_CHECK(after.out_len == 0);
    fio_free(&s1);
    fio_free(&s2);
    fio_free(&after);
    return 0;
}
