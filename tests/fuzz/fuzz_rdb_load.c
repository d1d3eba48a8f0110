/* fuzz_rdb_load.c -- the RDB loaders of the module types, fed through an
 * in-memory stand-in for RedisModule_Load* (see fuzz_stubs.h for the stream
 * format: LEB128 varints and length-prefixed buffers).
 *
 * The glue files are included into this translation unit so that their static
 * type callbacks are reachable; src/ is not modified.
 *
 * Input: byte 0 selects the type and the encver, byte 1 sets the clock the
 * legacy captcha loader uses (mc_now_ms), the rest is the RDB stream:
 *   b0 % 3:        0 captcha (mcaptmcap), 1 challenge (mcaptchal),
 *                  2 legacy (mcaptbuck / mcaptsafe: same callbacks)
 *   (b0 >> 2) % 4: encver 0, 1, 2 (unknown), or a wild one (b0 >> 4) * 1000 - 7000
 *   b0 & 0x40:     (legacy) a key name is available from the IO
 * On a successful load: invariants of the value, then rdb_save into a buffer,
 * reload it with the current encver (it must be consumed exactly and give
 * the same digest), aof_rewrite (its CAPTCHA_SET / CHALLENGE_SET arguments
 * must parse back to the same value), copy, mem_usage, free. The legacy
 * loader's pending-key list is drained with drop_pending(ctx, 0) after each run.
 */
#include "../../src/captcha_type.c"
#include "../../src/legacy_type.c"

#include "fuzz_stubs.h"

static void digest_of(void (*fn)(RedisModuleDigest *, void *), void *v, RedisModuleDigest *md) {
    memset(md, 0, sizeof(*md));
    fn(md, v);
}

static void check_captcha_value(const captcha *c) {
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
    FUZZ_CHECK(captcha_mem_usage(c) <= 4096);
    if (b->total) {
        FUZZ_CHECK(b->ring != NULL);
        FUZZ_CHECK(b->tail <= b->head && b->head - b->tail < b->nslots);
        FUZZ_CHECK(b->head <= b->last_ms / b->slot_ms);
        uint64_t sum = 0;
        for (uint64_t s = b->tail; s <= b->head; s++) sum += b->ring[s % b->nslots];
        FUZZ_CHECK(sum == b->total);
    }
}

/* The checks ChallengeSet_RedisCommand (captcha_cmd.c) applies to the arguments
 * ChallengeAofRewrite emits: <key> <difficulty 0..2^32-1> <duration 1..2^32-1>. */
static int challenge_set_accepts(RedisModuleString **argv, size_t argc, challenge *out) {
    long long df, dur;
    if (argc != 3) return 0;
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

static const type_ops TYPES[3] = {
    {CaptchaRdbLoad, CaptchaRdbSave, CaptchaAofRewrite, CaptchaMemUsage, CaptchaDigest, CaptchaFree,
     CaptchaCopy, CAPTCHA_ENCVER_LATEST},
    {ChallengeRdbLoad, ChallengeRdbSave, ChallengeAofRewrite, ChallengeMemUsage, ChallengeDigest,
     ChallengeFree, ChallengeCopy, CHALLENGE_ENCVER_LATEST},
    {LegacyRdbLoad, LegacyRdbSave, LegacyAofRewrite, LegacyMemUsage, LegacyDigest, LegacyFree, LegacyCopy,
     LEGACY_ENCVER},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        fuzz_install_stubs();
        init = 1;
    }
    if (size < 2) return 0;
    uint8_t b0 = data[0];
    int which = b0 % 3;
    int encver;
    switch ((b0 >> 2) % 4) {
    case 0: encver = 0; break;
    case 1: encver = 1; break;
    case 2: encver = 2; break;
    default: encver = (b0 >> 4) * 1000 - 7000; break;
    }
    g_fuzz_now_ms = 1700000000000ULL + (uint64_t)data[1] * 977;
    const type_ops *t = &TYPES[which];
    long long strings_before = g_live_strings;

    RedisModuleString *keyname = stub_CreateString(NULL, "mcap:bucket:{n1}:1700000000", 27);
    RedisModuleIO io;
    fio_reader(&io, data + 2, size - 2);
    io.key = (b0 & 0x40) ? keyname : NULL;
    io.dbid = data[1] % 16;

    void *v = t->load(&io, encver);
    if (v == NULL) goto out; /* refused: nothing may leak (LeakSanitizer) */
    FUZZ_CHECK(!io.error);
    FUZZ_CHECK(which != 0 || encver == CAPTCHA_ENCVER_BINARY || encver == CAPTCHA_ENCVER_LEGACY_JSON);
    FUZZ_CHECK(which != 1 || encver == CHALLENGE_ENCVER_BINARY || encver == CHALLENGE_ENCVER_LEGACY_JSON);
    FUZZ_CHECK(which != 2 || encver == LEGACY_ENCVER);

    if (which == 0) check_captcha_value(v);
    if (which == 1 && !fuzz_skip_known()) {
        /* Finding F1 (README): duration_s >= 1 is the type's invariant
         * (captcha.h, CHALLENGE_SET), but the loaders do not check it. */
        FUZZ_CHECK(((challenge *)v)->duration_s >= 1);
    }

    RedisModuleDigest d1, d2;
    digest_of(t->digest, v, &d1);
    size_t mem = t->mem(v);
    FUZZ_CHECK(mem > 0 && mem <= (which == 2 ? size + 64 : 4096));

    /* rdb_save -> reload with the latest encver: same digest, buffer consumed. */
    RedisModuleIO saver;
    fio_reader(&saver, NULL, 0);
    t->save(&saver, v);
    RedisModuleIO re;
    fio_reader(&re, saver.out, saver.out_len);
    void *v2 = t->load(&re, t->latest);
    FUZZ_CHECK(v2 != NULL);
    FUZZ_CHECK(!re.error && re.pos == re.in_len && re.nlogged == 0);
    digest_of(t->digest, v2, &d2);
    FUZZ_CHECK(dig_equal(&d1, &d2));
    FUZZ_CHECK(t->mem(v2) <= mem); /* a reloaded captcha has a ring only if it has slots */
    t->free(v2);
    dig_free(&d2);
    fio_free(&saver);

    /* copy */
    void *v3 = t->copy(keyname, keyname, v);
    FUZZ_CHECK(v3 != NULL && v3 != v);
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
        FUZZ_CHECK(aof.aof_argc >= 1 + 5);
        const char *err = NULL;
        /* CaptchaSet_RedisCommand: argc (with the command name) >= 8 */
        FUZZ_CHECK(aof.aof_argc + 1 >= 8);
        captcha *c2 = captcha_from_args(aof.aof_argv + 1, (int)aof.aof_argc - 1, &err);
        if (c2 == NULL) fprintf(stderr, "CAPTCHA_SET refused: %s\n", err);
        FUZZ_CHECK(c2 != NULL);
        digest_of(t->digest, c2, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c2);
    } else if (which == 1) {
        FUZZ_CHECK(aof.aof_emits == 1 && strcmp(aof.aof_cmd, CMD_CHALLENGE_SET) == 0);
        challenge back;
        int ok = challenge_set_accepts(aof.aof_argv, aof.aof_argc, &back);
        if (ok) {
            FUZZ_CHECK(memcmp(&back, v, sizeof(back)) == 0);
        } else if (!fuzz_skip_known()) {
            /* Finding F1: a loaded challenge whose AOF form CHALLENGE_SET refuses. */
            FUZZ_CHECK(ok);
        }
    } else {
        FUZZ_CHECK(aof.aof_emits == 0);
    }
    fio_free(&aof);

    /* The loaded captcha must keep working: a visit at and after its clock. */
    if (which == 0) {
        captcha *c = v;
        uint64_t count = 0, t0 = c->visits.last_ms;
        uint64_t before = lb_count(&c->visits, t0);
        lb_status st = lb_add(&c->visits, t0, 1, &count);
        FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL);
        if (st == LB_OK) FUZZ_CHECK(count == before + 1);
        st = lb_add(&c->visits, t0 + c->visits.window_ms / 2 + 1, 1, &count);
        FUZZ_CHECK(st == LB_OK || st == LB_ERR_FULL);
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
