/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_rdb_load.c -- the RDB loaders of the module types, fed through an
 * in-memory stand-in for RedisModule_Load* (see fuzz_stubs.h for the stream
 * format: LEB128 varints and length-prefixed buffers).
 *
 * The glue files are included into this translation unit so that their static
 * type callbacks are reachable; src/ is not modified.
 *
 * Input: byte 0 selects the type and the encver, byte 1 sets the clock the
 * legacy captcha loader uses (mc_now_ms) and the IO's db, the rest is the RDB stream:
 *   b0 % 3:        b0 & 0x80 clear: 0 captcha (mcaptmcap), 1 challenge (mcaptchal),
 *                  2 legacy (mcaptbuck / mcaptsafe: same callbacks);
 *                  b0 & 0x80 set: 0 GCRA (mcap-gcra), 1 window (mcap-wndw),
 *                  2 lock (mcap-lock; ratelimit_type.c, lock_type.c)
 *   (b0 >> 2) % 4: encver 0, 1, 2 (unknown but for the lock), or a wild one
 *                  (b0 >> 4) * 1000 - 7000 (1000..8000 for the newer types),
 *                  except for the lock when b0 & 0x10: its encver 3, or 4
 *                  when b0 & 0x20 too
 *   b0 & 0x40:     a key name is available from the IO (legacy, lock)
 * On a successful load: invariants of the value, then rdb_save into a buffer,
 * reload it with the current encver (it must be consumed exactly and give
 * the same digest), aof_rewrite (its CAPTCHA_SET / CHALLENGE_SET arguments
 * must parse back to the same value), copy, mem_usage, free. The legacy
 * loader's pending-key list is drained with drop_pending(ctx, 0) after each run.
 * GCRA, window and lock: the same, with their invariants; the window's and the
 * lock's AOF forms (RL.WINDOW_SET, LOCK.STATE) go through window_from_args /
 * lock_from_args, the GCRA's RL.GCRA_SET numbers must equal the value (and be
 * ones RL.GCRA_SET accepts: finding F3). The lock type's load hook (set by
 * lock/leases.c in the module) is a stub here
 * that records its calls; so are the wait queues' waitq_key_gone (called by
 * the unlink callbacks, not exercised here) and the key-options context of
 * the lock's copy2 callback (the COPY target's db and name).
 */
#include "../../src/captcha/captcha_type.c"
#include "../../src/captcha/legacy_type.c"
#include "../../src/ratelimit/ratelimit_type.c"
#include "../../src/lock/lock_type.c"

#include "fuzz_stubs.h"

/* The lock type's load hook (lock/leases.c's lock_loaded raises the token
 * floor and arms the lease timer); here it records what it was given. */
static int g_lock_loaded_calls;
static int g_lock_loaded_db;
static const RedisModuleString *g_lock_loaded_key;
static void lock_loaded(const lockv *l, int db, const RedisModuleString *key) {
    FUZZ_CHECK(l != NULL && l->last_token <= LOCK_MAX_TOKEN);
    g_lock_loaded_calls++;
    g_lock_loaded_db = db;
    g_lock_loaded_key = key;
}

/* server/waitq.c's waitq_key_gone: the unlink callbacks are not run here. */
void waitq_key_gone(int db, const RedisModuleString *key) {
    (void)db;
    (void)key;
}

/* The key-options context of a COPY to db 3 (copy2 reads the target db and name). */
static RedisModuleString *g_copy_to;
static int stub_GetToDbIdFromOptCtx(RedisModuleKeyOptCtx *ctx) {
    (void)ctx;
    return 3;
}
static const RedisModuleString *stub_GetToKeyNameFromOptCtx(RedisModuleKeyOptCtx *ctx) {
    (void)ctx;
    return g_copy_to;
}
static void *LockCopyOld(RedisModuleString *from, RedisModuleString *to, const void *value) {
    (void)from;
    g_copy_to = to;
    return LockCopy(NULL, value);
}

enum { T_CAPTCHA, T_CHALLENGE, T_LEGACY, T_GCRA, T_WINDOW, T_LOCK, T_COUNT };

static void digest_of(void (*fn)(RedisModuleDigest *, void *), void *v, RedisModuleDigest *md) {
    memset(md, 0, sizeof(*md));
    fn(md, v);
}

static void check_bucket(const lbucket *b) {
    FUZZ_CHECK(b->last_ms <= LB_MAX_TIME_MS);
    FUZZ_CHECK(lb_mem_usage(b) <= 4096);
    if (b->total) {
        FUZZ_CHECK(b->ring != NULL);
        FUZZ_CHECK(b->tail <= b->head && b->head - b->tail < b->nslots);
        FUZZ_CHECK(b->head <= b->last_ms / b->slot_ms);
        uint64_t sum = 0;
        for (uint64_t s = b->tail; s <= b->head; s++) sum += b->ring[s % b->nslots];
        FUZZ_CHECK(sum == b->total);
    }
}

static void check_gcra_value(const gcra_value *v) {
    const gcra_params *p = &v->params;
    FUZZ_CHECK(p->emission_us >= 1 && p->emission_us <= GCRA_MAX_PERIOD_US);
    FUZZ_CHECK(p->limit >= 1);
    uint64_t dvt;
    FUZZ_CHECK(!__builtin_mul_overflow(p->emission_us, p->limit, &dvt) && dvt == p->dvt_us);
    FUZZ_CHECK(p->dvt_us <= GCRA_MAX_TIME_US);
    FUZZ_CHECK(v->tat_us <= GCRA_MAX_TIME_US);
}

static void check_window_value(const window_value *v) {
    FUZZ_CHECK(v->limit >= 1 && v->limit <= UINT32_MAX);
    FUZZ_CHECK(v->hits.window_ms >= LB_MIN_WINDOW_MS && v->hits.window_ms <= LB_MAX_WINDOW_MS);
    check_bucket(&v->hits);
    FUZZ_CHECK(WindowMemUsage(v) <= 4096);
}

static void check_lock_value(const lockv *l) {
    FUZZ_CHECK(l->permits >= 1 && l->permits <= LOCK_MAX_PERMITS);
    FUZZ_CHECK(l->nholders <= LOCK_MAX_PERMITS);
    FUZZ_CHECK(l->last_token <= LOCK_MAX_TOKEN);
    FUZZ_CHECK(l->ephemeral == 0 || l->ephemeral == 1);
    FUZZ_CHECK(l->adjust >= -LOCK_MAX_PERMITS && l->adjust <= LOCK_MAX_PERMITS);
    FUZZ_CHECK(l->adjust == 0 || !l->ephemeral);
    FUZZ_CHECK(lock_size(l) <= LOCK_MAX_PERMITS);
    FUZZ_CHECK(l->nholders == 0 || l->holders != NULL);
    for (uint32_t i = 0; i < l->nholders; i++) {
        const lock_holder *h = &l->holders[i];
        FUZZ_CHECK(h->token >= 1 && h->token <= l->last_token);
        FUZZ_CHECK(h->owner != NULL && h->owner_len >= 1 && h->owner_len <= LOCK_MAX_OWNER_BYTES);
        FUZZ_CHECK(h->count >= 1 || h->delay_ms >= 1); /* count 0: a lock-delay slot, with its delay */
        FUZZ_CHECK(h->delay_ms <= LOCK_MAX_LEASE_MS);
        FUZZ_CHECK(!l->ephemeral || h->delay_ms == 0);
        FUZZ_CHECK(h->shared <= 1);
        FUZZ_CHECK(!h->shared || (l->permits == 1 && !l->ephemeral && l->adjust == 0));
        FUZZ_CHECK(h->shared == l->holders[0].shared); /* readers, or exclusive entries: never both */
        FUZZ_CHECK(h->weight >= 1 && h->weight <= l->permits && (h->weight == 1 || !l->ephemeral));
        FUZZ_CHECK(h->expires_ms <= LOCK_MAX_TIME_MS);
        FUZZ_CHECK(h->client_id == 0);
        for (uint32_t j = 0; j < i && h->count > 0; j++) /* live holders: distinct owners */
            FUZZ_CHECK(l->holders[j].count == 0 || l->holders[j].owner_len != h->owner_len ||
                       memcmp(l->holders[j].owner, h->owner, h->owner_len) != 0);
    }
    size_t mem = sizeof(*l) + (size_t)l->nholders * sizeof(lock_holder);
    for (uint32_t i = 0; i < l->nholders; i++) mem += l->holders[i].owner_len;
    FUZZ_CHECK(lock_mem_usage(l) == mem);
}

/* The arguments RL.GCRA_SET (GcraSet_RedisCommand, ratelimit_state_cmd.c) accepts:
 * <key> <tat 1..2^60> <emission 1..2^50> <limit 1..2^40> with
 * gcra_params_init(limit, 1, emission) succeeding; the value it would store. */
static int gcra_set_accepts(RedisModuleString **argv, size_t argc, gcra_value *out) {
    uint64_t tat, t, limit;
    if (argc != 4) return 0;
    if (mc_parse_u64(argv[1], 1, GCRA_MAX_TIME_US, &tat)) return 0;
    if (mc_parse_u64(argv[2], 1, GCRA_MAX_PERIOD_US, &t)) return 0;
    if (mc_parse_u64(argv[3], 1, (1ULL << 40), &limit) || gcra_params_init(&out->params, limit, 1, t) != 0) return 0;
    out->tat_us = tat;
    return 1;
}

/* The loaded counter keeps working: a hit at and after its clock. */
static void exercise_bucket(lbucket *b) {
    uint64_t count = 0, t0 = b->last_ms;
    uint64_t before = lb_count(b, t0);
    lb_status st = lb_add(b, t0, 1, &count);
    FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL);
    if (st == LB_OK) FUZZ_CHECK(count == before + 1);
    if (t0 + b->window_ms / 2 + 1 <= LB_MAX_TIME_MS) {
        st = lb_add(b, t0 + b->window_ms / 2 + 1, 1, &count);
        FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL);
    }
    uint64_t later = t0 + 2 * b->window_ms + b->slot_ms + 2;
    if (later <= LB_MAX_TIME_MS) FUZZ_CHECK(lb_count(b, later) == 0);
}

static void check_captcha_value(const captcha *c) {
    if (c->legacy) { /* kept as its bytes: nothing else set */
        FUZZ_CHECK(c->nlevels == 0 && c->duration_s == 0 && c->levels == NULL && c->visits.total == 0);
        return;
    }
    FUZZ_CHECK(c->duration_s >= 1);
    FUZZ_CHECK(c->nlevels >= 1 && c->nlevels <= CAPTCHA_MAX_LEVELS);
    FUZZ_CHECK(c->levels[0].difficulty_factor > 0);
    for (uint32_t i = 1; i < c->nlevels; i++) {
        FUZZ_CHECK(c->levels[i].visitor_threshold > c->levels[i - 1].visitor_threshold);
        FUZZ_CHECK(c->levels[i].difficulty_factor >= c->levels[i - 1].difficulty_factor);
    }
    const lbucket *b = &c->visits;
    FUZZ_CHECK(b->window_ms == (uint64_t)c->duration_s * 1000);
    FUZZ_CHECK(b->last_ms <= LB_MAX_TIME_MS);
    FUZZ_CHECK(captcha_mem_usage(c) <= 4096 + c->nlevels * sizeof(captcha_level));
    if (b->total) {
        FUZZ_CHECK(b->ring != NULL);
        FUZZ_CHECK(b->tail <= b->head && b->head - b->tail < b->nslots);
        FUZZ_CHECK(b->head <= b->last_ms / b->slot_ms);
        uint64_t sum = 0;
        for (uint64_t s = b->tail; s <= b->head; s++) sum += b->ring[s % b->nslots];
        FUZZ_CHECK(sum == b->total);
    }
}

/* An unreadable captcha or challenge holds exactly the bytes of the stored
 * string, and only when they cannot be interpreted: encver 0, the original's
 * JSON that captcha_parse_legacy / challenge_parse_legacy refuses; encver 1, the
 * string after the marker (captcha: duration 0; challenge: difficulty 2^32).
 * A readable value is never kept as bytes. */
static void check_unreadable(int which, const char *legacy, size_t legacy_len, const uint8_t *stream, size_t len,
                             int encver) {
    RedisModuleIO io;
    fio_reader(&io, stream, len);
    int binary = which == 0 ? CAPTCHA_ENCVER_BINARY : CHALLENGE_ENCVER_BINARY;
    int json = which == 0 ? CAPTCHA_ENCVER_LEGACY_JSON : CHALLENGE_ENCVER_LEGACY_JSON;
    FUZZ_CHECK(encver == binary || encver == json);
    if (encver == binary) /* the marker */
        FUZZ_CHECK(RedisModule_LoadUnsigned(&io) == (which == 0 ? 0 : CHALLENGE_UNREADABLE_MARKER));
    size_t blen = 0;
    char *bytes = RedisModule_LoadStringBuffer(&io, &blen);
    FUZZ_CHECK(bytes != NULL && !io.error);
    FUZZ_CHECK(blen == legacy_len && memcmp(bytes, legacy, blen) == 0);
    if (encver == json) {
        char note[200];
        if (which == 0) {
            captcha *parsed = NULL;
            uint32_t live = 0;
            FUZZ_CHECK(captcha_parse_legacy(bytes, blen, &parsed, &live, note, sizeof(note)) != NULL);
            FUZZ_CHECK(parsed == NULL);
        } else {
            challenge parsed = {0};
            FUZZ_CHECK(challenge_parse_legacy(bytes, blen, &parsed, note, sizeof(note)) != NULL);
        }
    }
    RedisModule_Free(bytes);
}

/* The checks ChallengeSet_RedisCommand (captcha_cmd.c) applies to the arguments
 * ChallengeAofRewrite emits: <key> <difficulty 0..2^32-1> <duration 1..2^32-1>. */
static int challenge_set_accepts(RedisModuleString **argv, size_t argc, challenge *out) {
    long long df, dur;
    if (argc != 3) return 0;
    if (argv[1]->len == 10 && memcmp(argv[1]->ptr, "UNREADABLE", 10) == 0) {
        out->legacy = argv[2]->ptr; /* compared by bytes below */
        out->legacy_len = argv[2]->len;
        return 1;
    }
    if (RedisModule_StringToLongLong(argv[1], &df) != REDISMODULE_OK || df < 0 || df > UINT32_MAX) return 0;
    if (RedisModule_StringToLongLong(argv[2], &dur) != REDISMODULE_OK || dur < 1 || dur > UINT32_MAX) return 0;
    out->difficulty_factor = (uint32_t)df;
    out->duration_s = (uint32_t)dur;
    return 1;
}

typedef struct type_ops {
    void *(*load)(RedisModuleIO *, int);
    void (*save)(RedisModuleIO *, void *);
    void (*aof)(RedisModuleIO *, RedisModuleString *, void *);
    size_t (*mem)(const void *);
    void (*digest)(RedisModuleDigest *, void *);
    void (*free)(void *);
    void *(*copy)(RedisModuleString *, RedisModuleString *, const void *);
    int latest;
} type_ops;

static const type_ops TYPES[T_COUNT] = {
    {CaptchaRdbLoad, CaptchaRdbSave, CaptchaAofRewrite, CaptchaMemUsage, CaptchaDigest, CaptchaFree,
     CaptchaCopy, CAPTCHA_ENCVER_LATEST},
    {ChallengeRdbLoad, ChallengeRdbSave, ChallengeAofRewrite, ChallengeMemUsage, ChallengeDigest,
     ChallengeFree, ChallengeCopy, CHALLENGE_ENCVER_LATEST},
    {LegacyRdbLoad, LegacyRdbSave, LegacyAofRewrite, LegacyMemUsage, LegacyDigest, LegacyFree, LegacyCopy,
     LEGACY_ENCVER},
    {GcraRdbLoad, GcraRdbSave, GcraAofRewrite, GcraMemUsage, GcraDigest, GcraFree, GcraCopy, GCRA_ENCVER_LATEST},
    {WindowRdbLoad, WindowRdbSave, WindowAofRewrite, WindowMemUsage, WindowDigest, WindowFree, WindowCopy,
     WINDOW_ENCVER_LATEST},
    {LockRdbLoad, LockRdbSave, LockAofRewrite, LockMemUsage, LockDigest, LockFree, LockCopyOld, LOCK_ENCVER_LATEST},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        fuzz_install_stubs();
        RedisModule_GetToDbIdFromOptCtx = stub_GetToDbIdFromOptCtx;
        RedisModule_GetToKeyNameFromOptCtx = stub_GetToKeyNameFromOptCtx;
        lock_load_hook = lock_loaded;
        init = 1;
    }
    if (size < 2) return 0;
    uint8_t b0 = data[0];
    int which = b0 % 3 + ((b0 & 0x80) ? 3 : 0);
    int encver;
    switch ((b0 >> 2) % 4) {
    case 0: encver = 0; break;
    case 1: encver = 1; break;
    case 2: encver = 2; break;
    default:
        encver = (which == T_LOCK && (b0 & 0x10)) ? ((b0 & 0x20) ? LOCK_ENCVER_4 : LOCK_ENCVER_3)
                                                  : (b0 >> 4) * 1000 - 7000;
        break;
    }
    g_fuzz_now_ms = 1700000000000ULL + (uint64_t)data[1] * 977;
    const type_ops *t = &TYPES[which];
    long long strings_before = g_live_strings;

    RedisModuleString *keyname = stub_CreateString(NULL, "mcap:bucket:{n1}:1700000000", 27);
    RedisModuleIO io;
    fio_reader(&io, data + 2, size - 2);
    io.key = (b0 & 0x40) ? keyname : NULL;
    io.dbid = data[1] % 16;
    g_lock_loaded_calls = 0;

    void *v = t->load(&io, encver);
    if (v == NULL) {
        FUZZ_CHECK(g_lock_loaded_calls == 0);
        goto out; /* refused: nothing may leak (LeakSanitizer) */
    }
    FUZZ_CHECK(!io.error);
    FUZZ_CHECK(which != 0 || encver == CAPTCHA_ENCVER_BINARY || encver == CAPTCHA_ENCVER_LEGACY_JSON);
    FUZZ_CHECK(which != 1 || encver == CHALLENGE_ENCVER_BINARY || encver == CHALLENGE_ENCVER_LEGACY_JSON);
    FUZZ_CHECK(which != 2 || encver == LEGACY_ENCVER);
    FUZZ_CHECK(which != T_GCRA || encver == GCRA_ENCVER_1);
    FUZZ_CHECK(which != T_WINDOW || encver == WINDOW_ENCVER_1);
    FUZZ_CHECK(which != T_LOCK || encver == LOCK_ENCVER_1 || encver == LOCK_ENCVER_2 || encver == LOCK_ENCVER_3 ||
               encver == LOCK_ENCVER_4);
    if (which == T_LOCK) {
        /* lock_loaded once, with the IO's db and key name */
        FUZZ_CHECK(g_lock_loaded_calls == 1 && g_lock_loaded_db == io.dbid && g_lock_loaded_key == io.key);
        FUZZ_CHECK(encver >= LOCK_ENCVER_2 || ((lockv *)v)->ephemeral == 0);
        FUZZ_CHECK(encver >= LOCK_ENCVER_3 || !lock_has_delays(v));
        FUZZ_CHECK(encver >= LOCK_ENCVER_4 || ((lockv *)v)->adjust == 0);
    } else {
        FUZZ_CHECK(g_lock_loaded_calls == 0);
    }

    if (which == 0) {
        const captcha *c = v;
        check_captcha_value(c);
        if (c->legacy) check_unreadable(0, c->legacy, c->legacy_len, data + 2, size - 2, encver);
    }
    if (which == T_GCRA) check_gcra_value(v);
    if (which == T_WINDOW) check_window_value(v);
    if (which == T_LOCK) check_lock_value(v);
    if (which == 1) {
        /* duration_s >= 1 is the type's invariant (captcha.h, CHALLENGE_SET):
         * the loaders raise a stored 0 to 1; an unreadable value has neither. */
        const challenge *ch = v;
        FUZZ_CHECK(ch->legacy ? (ch->duration_s == 0 && ch->difficulty_factor == 0) : ch->duration_s >= 1);
        if (ch->legacy) check_unreadable(1, ch->legacy, ch->legacy_len, data + 2, size - 2, encver);
    }

    RedisModuleDigest d1, d2;
    digest_of(t->digest, v, &d1);
    size_t mem = t->mem(v);
    if (which == T_LOCK)
        FUZZ_CHECK(mem == lock_mem_usage(v) &&
                   mem <= sizeof(lockv) + LOCK_MAX_PERMITS * (sizeof(lock_holder) + LOCK_MAX_OWNER_BYTES));
    else if (which == T_GCRA)
        FUZZ_CHECK(mem == sizeof(gcra_value));
    else
        FUZZ_CHECK(mem > 0 && mem <= (which == 2 ? size + 64 : 4096 + size * sizeof(captcha_level)));

    /* rdb_save -> reload with the latest encver: same digest, buffer consumed. */
    RedisModuleIO saver;
    fio_reader(&saver, NULL, 0);
    t->save(&saver, v);
    RedisModuleIO re;
    fio_reader(&re, saver.out, saver.out_len);
    g_lock_loaded_calls = 0;
    void *v2 = t->load(&re, t->latest);
    FUZZ_CHECK(v2 != NULL);
    FUZZ_CHECK(g_lock_loaded_calls == (which == T_LOCK));
    FUZZ_CHECK(!re.error && re.pos == re.in_len && re.nlogged == 0);
    digest_of(t->digest, v2, &d2);
    FUZZ_CHECK(dig_equal(&d1, &d2));
    FUZZ_CHECK(t->mem(v2) <= mem); /* a reloaded captcha has a ring only if it has slots */
    t->free(v2);
    dig_free(&d2);
    fio_free(&saver);

    /* copy */
    g_lock_loaded_calls = 0;
    void *v3 = t->copy(keyname, keyname, v);
    FUZZ_CHECK(v3 != NULL && v3 != v);
    if (which == T_LOCK) /* COPY: lock_loaded with the target's db and key */
        FUZZ_CHECK(g_lock_loaded_calls == 1 && g_lock_loaded_db == 3 && g_lock_loaded_key == keyname);
    else
        FUZZ_CHECK(g_lock_loaded_calls == 0);
    digest_of(t->digest, v3, &d2);
    FUZZ_CHECK(dig_equal(&d1, &d2));
    FUZZ_CHECK(t->mem(v3) == mem);
    dig_free(&d2);

    /* aof_rewrite -> the internal command it emits must rebuild the same value */
    RedisModuleIO aof;
    fio_reader(&aof, NULL, 0);
    t->aof(&aof, keyname, v);
    if (which == 0) {
        FUZZ_CHECK(aof.aof_emits == 1 && strcmp(aof.aof_cmd, CMD_CAPTCHA_SET) == 0);
        const char *err = NULL;
        /* CaptchaSet_RedisCommand: argc (with the command name) >= 8, or 4 for UNREADABLE <bytes> */
        FUZZ_CHECK(aof.aof_argc + 1 >= (((captcha *)v)->legacy ? 4 : 8));
        captcha *c2 = captcha_from_args(aof.aof_argv + 1, (int)aof.aof_argc - 1, &err);
        if (c2 == NULL) fprintf(stderr, "CAPTCHA_SET refused: %s\n", err);
        FUZZ_CHECK(c2 != NULL);
        digest_of(t->digest, c2, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c2);
    } else if (which == 1) {
        FUZZ_CHECK(aof.aof_emits == 1 && strcmp(aof.aof_cmd, CMD_CHALLENGE_SET) == 0);
        challenge back = {0};
        const challenge *ch = v;
        FUZZ_CHECK(challenge_set_accepts(aof.aof_argv, aof.aof_argc, &back));
        if (ch->legacy)
            FUZZ_CHECK(back.legacy_len == ch->legacy_len && memcmp(back.legacy, ch->legacy, ch->legacy_len) == 0);
        else
            FUZZ_CHECK(back.difficulty_factor == ch->difficulty_factor && back.duration_s == ch->duration_s);
    } else if (which == T_GCRA) {
        const gcra_value *g = v;
        FUZZ_CHECK(aof.aof_emits == 1 && strcmp(aof.aof_cmd, CMD_GCRA_SET) == 0);
        FUZZ_CHECK(aof.aof_argc == 4 && aof.aof_argv[0]->len == keyname->len &&
                   memcmp(aof.aof_argv[0]->ptr, keyname->ptr, keyname->len) == 0);
        /* the emitted numbers are the value's */
        long long n[3];
        for (int i = 0; i < 3; i++) FUZZ_CHECK(stub_StringToLongLong(aof.aof_argv[1 + i], &n[i]) == REDISMODULE_OK);
        FUZZ_CHECK((uint64_t)n[0] == g->tat_us && (uint64_t)n[1] == g->params.emission_us &&
                   (uint64_t)n[2] == g->params.limit);
        gcra_value back;
        int ok = gcra_set_accepts(aof.aof_argv, aof.aof_argc, &back);
        if (ok) {
            FUZZ_CHECK(memcmp(&back, g, sizeof(back)) == 0);
        } else if (!fuzz_skip_known()) {
            /* Finding F3: a loaded GCRA value whose AOF form RL.GCRA_SET refuses
             * (tat 0, or limit above MAX_BURST + 1 = 2^40). */
            fprintf(stderr, "RL.GCRA_SET refuses tat=%llu emission=%llu limit=%llu\n",
                    (unsigned long long)g->tat_us, (unsigned long long)g->params.emission_us,
                    (unsigned long long)g->params.limit);
            FUZZ_CHECK(ok);
        }
    } else if (which == T_WINDOW || which == T_LOCK) {
        const char *want = which == T_WINDOW ? CMD_WINDOW_SET : CMD_LOCK_STATE;
        FUZZ_CHECK(aof.aof_emits == 1 && strcmp(aof.aof_cmd, want) == 0);
        FUZZ_CHECK(aof.aof_argc >= 1 && aof.aof_argv[0]->len == keyname->len &&
                   memcmp(aof.aof_argv[0]->ptr, keyname->ptr, keyname->len) == 0);
        /* the command's arity: RL.WINDOW_SET argc >= 6, LOCK.STATE argc >= 5 (with the name) */
        FUZZ_CHECK(aof.aof_argc + 1 >= (which == T_WINDOW ? 6u : 5u));
        const char *err = NULL;
        void *back = which == T_WINDOW ? (void *)window_from_args(aof.aof_argv + 1, (int)aof.aof_argc - 1, &err)
                                       : (void *)lock_from_args(aof.aof_argv + 1, (int)aof.aof_argc - 1, &err);
        if (back == NULL) fprintf(stderr, "%s refused: %s\n", want, err);
        FUZZ_CHECK(back != NULL);
        digest_of(t->digest, back, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        if (which == T_WINDOW) {
            check_window_value(back);
            FUZZ_CHECK(t->mem(back) <= mem);
        } else {
            check_lock_value(back);
            FUZZ_CHECK(t->mem(back) == mem);
        }
        t->free(back);
    } else {
        FUZZ_CHECK(aof.aof_emits == 0);
    }
    fio_free(&aof);

    /* The loaded window keeps counting; its copy is untouched. */
    if (which == T_WINDOW) {
        window_value *w = v;
        exercise_bucket(&w->hits);
        check_window_value(w);
        digest_of(t->digest, v3, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
    }

    /* An unreadable captcha (the original's bytes, docs/protocol.md "Upgrading
     * in place") is never counted: ADD_VISITOR, VISIT_AT and GET answer
     * ERR_UNREADABLE_CAPTCHA before touching its visits (captcha_cmd.c), so it
     * stays exactly as loaded; only a readable one is given visits below. */
    if (which == 0 && ((captcha *)v)->legacy) {
        check_captcha_value(v);
        digest_of(t->digest, v, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
    }

    /* The loaded captcha must keep working: a visit at and after its clock. */
    if (which == 0 && !((captcha *)v)->legacy) {
        captcha *c = v;
        uint64_t count = 0, t0 = c->visits.last_ms;
        uint64_t before = lb_count(&c->visits, t0);
        lb_status st = lb_add(&c->visits, t0, 1, &count);
        FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL);
        if (st == LB_OK) FUZZ_CHECK(count == before + 1);
        uint64_t t1 = t0 + c->visits.window_ms / 2 + 1;
        st = lb_add(&c->visits, t1, 1, &count);
        /* times past LB_MAX_TIME_MS (2^48) are refused by contract */
        FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL || (st == LB_ERR_RANGE && t1 > LB_MAX_TIME_MS));
        FUZZ_CHECK(lb_count(&c->visits, t0 + 2 * c->visits.window_ms + c->visits.slot_ms + 2) == 0);
        check_captcha_value(c);
        /* the copy is untouched by the adds */
        digest_of(t->digest, v3, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
    }
    t->free(v3);
    dig_free(&d1);
    t->free(v);

out:
    drop_pending(NULL, 0);
    FUZZ_CHECK(pending == NULL);
    stub_FreeString(NULL, keyname);
    FUZZ_CHECK(g_live_strings == strings_before);
    return 0;
}
