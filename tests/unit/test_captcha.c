/* test_captcha.c -- unit tests of core/captcha.c: config validation, the
 * difficulty rule, challenge JSON, the original module's JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "captcha.h"

static captcha *parse_ok(const char *json) {
    captcha *c = NULL;
    int je;
    char buf[200];
    const char *err = captcha_parse_config(json, strlen(json), &c, &je, buf, sizeof(buf));
    if (err) fail_msg("%s: %s", json, err);
    return c;
}

static void test_difficulty_example(void **state) {
    (void)state;
    /* Levels [(50,50),(500,500)]: counts 1..500 -> 50, 501 and up -> 500. */
    captcha *c = parse_ok("{\"levels\":[{\"visitor_threshold\":500,\"difficulty_factor\":500},"
                          "{\"visitor_threshold\":50,\"difficulty_factor\":50}],\"duration\":30}");
    assert_int_equal(c->nlevels, 2);
    assert_int_equal(c->levels[0].visitor_threshold, 50); /* kept sorted */
    assert_int_equal(captcha_difficulty(c, 0), 50);
    assert_int_equal(captcha_difficulty(c, 1), 50);
    assert_int_equal(captcha_difficulty(c, 50), 50);
    assert_int_equal(captcha_difficulty(c, 51), 50);
    assert_int_equal(captcha_difficulty(c, 52), 50);
    assert_int_equal(captcha_difficulty(c, 500), 50);
    assert_int_equal(captcha_difficulty(c, 501), 500);
    assert_int_equal(captcha_difficulty(c, 554), 500);
    assert_int_equal(captcha_difficulty(c, UINT64_MAX), 500);
    assert_int_equal(c->duration_s, 30);
    assert_int_equal(c->visits.window_ms, 30000);
    captcha_free(c);
}

static void test_difficulty_three_levels(void **state) {
    (void)state;
    captcha *c = parse_ok("{\"levels\":[{\"visitor_threshold\":0,\"difficulty_factor\":10},"
                          "{\"visitor_threshold\":5,\"difficulty_factor\":20},"
                          "{\"visitor_threshold\":10,\"difficulty_factor\":20},"
                          "{\"visitor_threshold\":20,\"difficulty_factor\":40}],\"duration\":5,\"extra\":1}");
    uint32_t want[] = {10, 10, 10, 10, 10, 10, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 40};
    for (uint64_t n = 0; n < sizeof(want) / sizeof(want[0]); n++) {
        uint32_t got = captcha_difficulty(c, n);
        if (n == 0) assert_int_equal(got, 10); /* no level below 0: the lowest */
        else assert_int_equal(got, want[n]);
    }
    captcha *d = captcha_dup(c);
    assert_non_null(d);
    assert_ptr_not_equal(d->levels, c->levels);
    assert_int_equal(captcha_difficulty(d, 21), 40);
    assert_true(captcha_mem_usage(c) < 4096);
    captcha_free(c);
    captcha_free(d);
}

typedef struct bad_case {
    const char *json;
    const char *want; /* substring of the message */
    int json_error;
} bad_case;

static void test_config_rejections(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"nope", "invalid JSON", 1},
        {"", "invalid JSON", 1},
        {"{\"levels\":[", "invalid JSON", 1},
        {"[1,2]", "expected", 0},
        {"\"levels\"", "expected", 0},
        {"{\"duration\":5}", "expected", 0},
        {"{\"levels\":{},\"duration\":5}", "expected", 0},
        {"{\"levels\":[],\"duration\":5}", "at least one level", 0},
        {"{\"levels\":[1],\"duration\":5}", "expected", 0},
        {"{\"levels\":[{\"visitor_threshold\":1}],\"duration\":5}", "difficulty_factor must be an integer", 0},
        {"{\"levels\":[{\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold must be an integer", 0},
        {"{\"levels\":[{\"visitor_threshold\":\"1\",\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":1.5,\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":true,\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":-1,\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":4294967296,\"difficulty_factor\":1}],\"duration\":5}", "visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":9223372036854775807}],\"duration\":5}", "difficulty_factor", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":18446744073709551616}],\"duration\":5}", "invalid JSON", 1},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}],\"duration\":0}", "duration must be greater than zero", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}],\"duration\":-5}", "duration", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}]}", "duration", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":0}],\"duration\":5}", "difficulty_factor must be greater than zero", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":5},{\"visitor_threshold\":1,\"difficulty_factor\":6}],\"duration\":5}", "duplicate visitor_threshold", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":5},{\"visitor_threshold\":2,\"difficulty_factor\":4}],\"duration\":5}", "must not decrease", 0},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}],\"duration\":5,\"duration\":6}", "invalid JSON", 1},
        {"{\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}],\"duration\":5,\"x\":\"\xff\"}", "invalid JSON", 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        captcha *c = NULL;
        int je = -1;
        char buf[200];
        const char *err = captcha_parse_config(cases[i].json, strlen(cases[i].json), &c, &je, buf, sizeof(buf));
        if (err == NULL) fail_msg("accepted: %s", cases[i].json);
        if (strstr(err, cases[i].want) == NULL) fail_msg("%s: got '%s', want '%s'", cases[i].json, err, cases[i].want);
        if (je != cases[i].json_error) fail_msg("%s: json_error %d", cases[i].json, je);
        assert_null(c);
    }
}

static void test_config_limits(void **state) {
    (void)state;
    static char buf[CAPTCHA_MAX_CONFIG_BYTES * 2];
    int je;
    char eb[200];
    captcha *c = NULL;
    /* 128 levels pass, 129 do not. */
    for (int n = 128; n <= 129; n++) {
        size_t at = (size_t)sprintf(buf, "{\"duration\":1,\"levels\":[");
        for (int i = 0; i < n; i++) at += (size_t)sprintf(buf + at, "%s{\"visitor_threshold\":%d,\"difficulty_factor\":%d}", i ? "," : "", i, i + 1);
        sprintf(buf + at, "]}");
        const char *err = captcha_parse_config(buf, strlen(buf), &c, &je, eb, sizeof(eb));
        if (n == 128) {
            assert_null(err);
            assert_int_equal(c->nlevels, 128);
            assert_true(captcha_mem_usage(c) + 335 * 4 <= 4096);
            captcha_free(c);
            c = NULL;
        } else {
            assert_non_null(err);
            assert_non_null(strstr(err, "at most 128 levels"));
        }
    }
    memset(buf, ' ', sizeof(buf));
    assert_non_null(captcha_parse_config(buf, CAPTCHA_MAX_CONFIG_BYTES + 1, &c, &je, eb, sizeof(eb)));
    assert_null(c);
}

static void test_challenge_parse(void **state) {
    (void)state;
    challenge ch;
    const char *s;
    size_t sl;
    void *holder;
    int je;
    char eb[200];
    const char *ok = "{\"difficulty\":50,\"duration\":30,\"challenge\":\"abc\"}";
    assert_null(challenge_parse(ok, strlen(ok), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)));
    assert_int_equal(ch.difficulty_factor, 50);
    assert_int_equal(ch.duration_s, 30);
    assert_int_equal(sl, 3);
    assert_memory_equal(s, "abc", 3);
    challenge_json_release(holder);
    const char *bad[] = {
        "x", "[]", "{\"difficulty\":50,\"duration\":30}", "{\"difficulty\":50,\"duration\":0,\"challenge\":\"a\"}",
        "{\"difficulty\":-1,\"duration\":3,\"challenge\":\"a\"}", "{\"difficulty\":1,\"duration\":3,\"challenge\":5}",
        "{\"difficulty\":1,\"duration\":4294967296,\"challenge\":\"a\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_non_null(challenge_parse(bad[i], strlen(bad[i]), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)));
}

static void test_legacy_formats(void **state) {
    (void)state;
    const char *j = "{\"m\":{\"visitor_threshold\":7,\"defense\":{\"levels\":[{\"visitor_threshold\":50,"
                    "\"difficulty_factor\":50},{\"visitor_threshold\":500,\"difficulty_factor\":500}],"
                    "\"current_visitor_threshold\":0},\"duration\":30}}";
    captcha *c = NULL;
    uint32_t live = 0;
    assert_null(captcha_parse_legacy(j, strlen(j), &c, &live));
    assert_int_equal(live, 7);
    assert_int_equal(c->duration_s, 30);
    assert_int_equal(c->nlevels, 2);
    captcha_free(c);
    assert_non_null(captcha_parse_legacy("{}", 2, &c, &live));
    challenge ch;
    const char *cj = "{\"duration\":30,\"difficulty_factor\":9}";
    assert_null(challenge_parse_legacy(cj, strlen(cj), &ch));
    assert_int_equal(ch.difficulty_factor, 9);
    assert_non_null(challenge_parse_legacy("{\"duration\":1}", 14, &ch));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_difficulty_example),
        cmocka_unit_test(test_difficulty_three_levels),
        cmocka_unit_test(test_config_rejections),
        cmocka_unit_test(test_config_limits),
        cmocka_unit_test(test_challenge_parse),
        cmocka_unit_test(test_legacy_formats),
    };
    return cmocka_run_group_tests_name("captcha", tests, NULL, NULL);
}
