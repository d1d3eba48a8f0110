/* fuzz_cmd_args.c -- captcha_from_args, the parser of the internal
 * MCAPTCHA_CACHE.CAPTCHA_SET command's arguments (AOF and replication), on an
 * argv made by splitting the input on spaces (so seeds read like the command:
 * "30 2 10 100 20 1000 1700000000000 1 6640624998 3").
 *
 * argv is a malloc'ed array of exactly argc stand-in RedisModuleStrings (ASan
 * catches a read past it); RedisModule_StringToLongLong follows Redis'
 * string2ll. On success: the captcha's invariants, then its text form
 * (captcha_state_args) must parse back to the same digest, an RDB save/load
 * round trip must too, and the restored counter must keep working. */
#include "../../src/captcha/captcha_type.c"

#include "fuzz_stubs.h"

#define MAX_ARGS 4096

static void digest_of(void *v, RedisModuleDigest *md) {
    memset(md, 0, sizeof(*md));
    CaptchaDigest(md, v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int init;
    if (!init) {
        fuzz_install_stubs();
        init = 1;
    }
    long long strings_before = g_live_strings;

    /* Split on ' ' (every byte, empty fields included). */
    size_t argc = 1;
    for (size_t i = 0; i < size; i++) argc += data[i] == ' ';
    if (argc > MAX_ARGS) return 0;
    RedisModuleString **argv = malloc(argc * sizeof(*argv));
    size_t start = 0, k = 0;
    for (size_t i = 0; i <= size; i++) {
        if (i == size || data[i] == ' ') {
            argv[k++] = stub_CreateString(NULL, (const char *)data + start, i - start);
            start = i + 1;
        }
    }
    FUZZ_CHECK(k == argc);

    const char *err = NULL;
    captcha *c = captcha_from_args(argv, (int)argc, &err);
    if (c == NULL) {
        FUZZ_CHECK(err != NULL && strlen(err) < 256);
    } else {
        /* invariants */
        FUZZ_CHECK(c->duration_s >= 1 && c->nlevels >= 1 && c->nlevels <= CAPTCHA_MAX_LEVELS);
        FUZZ_CHECK(c->levels[0].difficulty_factor > 0);
        for (uint32_t i = 1; i < c->nlevels; i++) {
            FUZZ_CHECK(c->levels[i].visitor_threshold > c->levels[i - 1].visitor_threshold);
            FUZZ_CHECK(c->levels[i].difficulty_factor >= c->levels[i - 1].difficulty_factor);
        }
        const lbucket *b = &c->visits;
        FUZZ_CHECK(b->window_ms == (uint64_t)c->duration_s * 1000 && b->last_ms <= LB_MAX_TIME_MS);
        FUZZ_CHECK(captcha_mem_usage(c) <= 4096 + c->nlevels * sizeof(captcha_level));
        if (b->total) {
            FUZZ_CHECK(b->ring && b->tail <= b->head && b->head - b->tail < b->nslots);
            FUZZ_CHECK(b->head <= b->last_ms / b->slot_ms);
        }
        RedisModuleDigest d1, d2;
        digest_of(c, &d1);

        /* text form round trip (what AOF rewrite and replication send) */
        size_t n = 0;
        RedisModuleString **args = captcha_state_args(c, &n);
        FUZZ_CHECK(n + 2 >= 8 && n <= INT32_MAX);
        const char *err2 = NULL;
        captcha *c2 = captcha_from_args(args, (int)n, &err2);
        if (c2 == NULL) fprintf(stderr, "state args refused: %s\n", err2);
        FUZZ_CHECK(c2 != NULL);
        digest_of(c2, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c2);
        mc_free_args(args, n);

        /* RDB round trip */
        RedisModuleIO saver;
        fio_reader(&saver, NULL, 0);
        CaptchaRdbSave(&saver, c);
        RedisModuleIO re;
        fio_reader(&re, saver.out, saver.out_len);
        captcha *c3 = CaptchaRdbLoad(&re, CAPTCHA_ENCVER_LATEST);
        FUZZ_CHECK(c3 != NULL && !re.error && re.pos == re.in_len);
        digest_of(c3, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        fio_free(&saver);

        /* the restored counter keeps working, and both copies agree */
        uint64_t t0 = c->visits.last_ms, cnt1 = 0, cnt3 = 0;
        FUZZ_CHECK(lb_count(&c->visits, t0) == lb_count(&c3->visits, t0));
        lb_status s1 = lb_add(&c->visits, t0 + 1, 1, &cnt1);
        lb_status s3 = lb_add(&c3->visits, t0 + 1, 1, &cnt3);
        FUZZ_CHECK(s1 == s3 && cnt1 == cnt3);
        FUZZ_CHECK(s1 == LB_OK || s1 == LB_ERR_FULL);
        FUZZ_CHECK(lb_count(&c->visits, t0 + b->window_ms + 2 * b->slot_ms + 1) == 0);
        FUZZ_CHECK(captcha_difficulty(c, cnt1) > 0);
        captcha_free(c3);
        dig_free(&d1);
        captcha_free(c);
    }
    for (size_t i = 0; i < argc; i++) stub_FreeString(NULL, argv[i]);
    free(argv);
    FUZZ_CHECK(g_live_strings == strings_before);
    return 0;
}
