/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_cmd_args.c -- captcha_from_args, the parser of the internal
 * MCAPTCHA_CACHE.CAPTCHA_SET command's arguments (AOF and replication), on an
 * argv made by splitting the input on spaces (so seeds read like the command:
 * "30 2 10 100 20 1000 1700000000000 1 6640624998 3").
 *
 * argv is a malloc'ed array of exactly argc stand-in RedisModuleStrings (ASan
 * catches a read past it); RedisModule_StringToLongLong follows Redis'
 * string2ll. On success: the captcha's invariants, then its text form
 * (captcha_state_args) must parse back to the same digest, an RDB save/load
 * round trip must too, and the restored counter must keep working.
 *
 * The AOF form of a value of the original that cannot be read (docs/protocol.md,
 * "Upgrading in place") is `UNREADABLE <bytes>`: exactly those two arguments
 * (the word in any case, as mc_is_word) give an unreadable captcha holding
 * exactly <bytes> (any, empty included) and nothing else; it is never counted
 * (the commands answer an error before touching its visits), and its text form,
 * RDB round trip (marker duration 0) and copy give it back byte for byte. */
#include "../../src/captcha/captcha_type.c"

#include "fuzz_stubs.h"

#include <strings.h>

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
    int unreadable_form = argc == 2 && argv[0]->len == 10 && strncasecmp(argv[0]->ptr, "UNREADABLE", 10) == 0;
    captcha *c = captcha_from_args(argv, (int)argc, &err);
    if (c == NULL) {
        FUZZ_CHECK(err != NULL && strlen(err) < 256);
        FUZZ_CHECK(!unreadable_form); /* only out of memory refuses it (libc here) */
    } else if (c->legacy) {
        /* kept as its bytes: nothing else set */
        FUZZ_CHECK(unreadable_form);
        FUZZ_CHECK(c->nlevels == 0 && c->duration_s == 0 && c->levels == NULL && c->visits.total == 0);
        FUZZ_CHECK(c->legacy_len == argv[1]->len && memcmp(c->legacy, argv[1]->ptr, c->legacy_len) == 0);
        FUZZ_CHECK(captcha_mem_usage(c) <= 4096 + c->legacy_len);
        RedisModuleDigest d1, d2;
        digest_of(c, &d1);

        /* text form: UNREADABLE <the same bytes>, parsed back to the same value */
        size_t n = 0;
        RedisModuleString **args = captcha_state_args(c, &n);
        FUZZ_CHECK(n == 2 && args[0]->len == 10 && memcmp(args[0]->ptr, "UNREADABLE", 10) == 0);
        FUZZ_CHECK(args[1]->len == c->legacy_len && memcmp(args[1]->ptr, c->legacy, c->legacy_len) == 0);
        const char *err2 = NULL;
        captcha *c2 = captcha_from_args(args, (int)n, &err2);
        FUZZ_CHECK(c2 != NULL && c2->legacy != NULL);
        digest_of(c2, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c2);
        mc_free_args(args, n);

        /* RDB round trip: the marker (duration 0), then the bytes */
        RedisModuleIO saver;
        fio_reader(&saver, NULL, 0);
        CaptchaRdbSave(&saver, c);
        FUZZ_CHECK(saver.out_len >= 1 && saver.out[0] == 0);
        RedisModuleIO re;
        fio_reader(&re, saver.out, saver.out_len);
        captcha *c3 = CaptchaRdbLoad(&re, CAPTCHA_ENCVER_LATEST);
        FUZZ_CHECK(c3 != NULL && !re.error && re.pos == re.in_len && re.nlogged == 0);
        FUZZ_CHECK(c3->legacy != NULL && c3->legacy_len == c->legacy_len &&
                   memcmp(c3->legacy, c->legacy, c->legacy_len) == 0);
        digest_of(c3, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c3);
        fio_free(&saver);

        /* copy (COPY, captcha_dup): the same bytes, its own buffer */
        captcha *c4 = CaptchaCopy(NULL, NULL, c);
        FUZZ_CHECK(c4 != NULL && c4->legacy != NULL && c4->legacy != c->legacy);
        FUZZ_CHECK(captcha_mem_usage(c4) == captcha_mem_usage(c));
        digest_of(c4, &d2);
        FUZZ_CHECK(dig_equal(&d1, &d2));
        dig_free(&d2);
        captcha_free(c4);
        dig_free(&d1);
        captcha_free(c);
    } else {
        FUZZ_CHECK(!unreadable_form);
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
