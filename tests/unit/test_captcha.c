/* SPDX-License-Identifier: BSD-3-Clause */
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
    /* No level cap of its own (the original had none): 200 levels pass; only
     * the JSON size bounds a config. */
    size_t at = (size_t)sprintf(buf, "{\"duration\":1,\"levels\":[");
    for (int i = 0; i < 200; i++) at += (size_t)sprintf(buf + at, "%s{\"visitor_threshold\":%d,\"difficulty_factor\":%d}", i ? "," : "", i, i + 1);
    sprintf(buf + at, "]}");
    assert_true(strlen(buf) <= CAPTCHA_MAX_CONFIG_BYTES);
    assert_null(captcha_parse_config(buf, strlen(buf), &c, &je, eb, sizeof(eb)));
    assert_int_equal(c->nlevels, 200);
    assert_int_equal(captcha_difficulty(c, 150), 150);
    captcha_free(c);
    c = NULL;
    /* A duration beyond u32 seconds (the original took a u64) is kept as the longest. */
    const char *longd = "{\"duration\":9000000000,\"levels\":[{\"visitor_threshold\":1,\"difficulty_factor\":1}]}";
    assert_null(captcha_parse_config(longd, strlen(longd), &c, &je, eb, sizeof(eb)));
    assert_int_equal(c->duration_s, 4294967295u);
    captcha_free(c);
    c = NULL;
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
        "{\"difficulty\":1,\"duration\":9223372036854775808,\"challenge\":\"a\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_non_null(challenge_parse(bad[i], strlen(bad[i]), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)));
    /* Above u32 seconds, up to 2^63 - 1: kept as 4294967295 s (as a captcha's duration). */
    const char *longer[] = {"{\"difficulty\":1,\"duration\":4294967295,\"challenge\":\"a\"}",
                            "{\"difficulty\":1,\"duration\":4294967296,\"challenge\":\"a\"}",
                            "{\"difficulty\":1,\"duration\":9223372036854775807,\"challenge\":\"a\"}"};
    for (size_t i = 0; i < sizeof(longer) / sizeof(longer[0]); i++) {
        assert_null(challenge_parse(longer[i], strlen(longer[i]), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)));
        assert_int_equal(ch.duration_s, 4294967295u);
        challenge_json_release(holder);
    }
}

/* The limits are settable (the module's configs): smaller ones refuse what the
 * defaults took, naming the new size; larger ones take what they refused. */
static void test_settable_limits(void **state) {
    (void)state;
    captcha_limits def = captcha_get_limits();
    assert_int_equal(def.max_config_bytes, CAPTCHA_MAX_CONFIG_BYTES);
    assert_int_equal(def.max_challenge_json_bytes, CHALLENGE_MAX_JSON_BYTES);
    assert_int_equal(def.max_challenge_string_bytes, CHALLENGE_MAX_STRING_BYTES);
    const char *cfg = "{\"levels\":[{\"visitor_threshold\":0,\"difficulty_factor\":1}],\"duration\":1}";
    const char *chj = "{\"difficulty\":1,\"duration\":1,\"challenge\":\"abcdef\"}";
    captcha *c = NULL;
    challenge ch;
    const char *s;
    size_t sl;
    void *holder;
    int je;
    char eb[200];
    captcha_limits small = {strlen(cfg) - 1, strlen(chj), 5};
    captcha_set_limits(&small);
    assert_string_equal(captcha_parse_config(cfg, strlen(cfg), &c, &je, eb, sizeof(eb)),
                        "invalid config: the JSON is larger than 70 bytes");
    assert_null(c);
    assert_string_equal(challenge_parse(chj, strlen(chj), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)),
                        "invalid challenge: the challenge string is longer than 5 bytes");
    small.max_challenge_json_bytes = strlen(chj) - 1;
    small.max_challenge_string_bytes = 6;
    captcha_set_limits(&small);
    assert_string_equal(challenge_parse(chj, strlen(chj), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)),
                        "invalid challenge: the JSON is larger than 49 bytes");
    small = (captcha_limits){strlen(cfg), strlen(chj), 6}; /* exactly at each limit: accepted */
    captcha_set_limits(&small);
    assert_null(captcha_parse_config(cfg, strlen(cfg), &c, &je, eb, sizeof(eb)));
    captcha_free(c);
    assert_null(challenge_parse(chj, strlen(chj), &ch, &s, &sl, &holder, &je, eb, sizeof(eb)));
    challenge_json_release(holder);
    captcha_set_limits(&def);
}

static void test_legacy_formats(void **state) {
    (void)state;
    const char *j = "{\"m\":{\"visitor_threshold\":7,\"defense\":{\"levels\":[{\"visitor_threshold\":50,"
                    "\"difficulty_factor\":50},{\"visitor_threshold\":500,\"difficulty_factor\":500}],"
                    "\"current_visitor_threshold\":0},\"duration\":30}}";
    captcha *c = NULL;
    uint32_t live = 0;
    char note[200];
    assert_null(captcha_parse_legacy(j, strlen(j), &c, &live, note, sizeof(note)));
    assert_int_equal(live, 7);
    assert_int_equal(c->duration_s, 30);
    assert_int_equal(c->nlevels, 2);
    assert_string_equal(note, "");
    captcha_free(c);
    assert_non_null(captcha_parse_legacy("{}", 2, &c, &live, note, sizeof(note)));
    challenge ch = {0};
    const char *cj = "{\"duration\":30,\"difficulty_factor\":9}";
    assert_null(challenge_parse_legacy(cj, strlen(cj), &ch, note, sizeof(note)));
    assert_int_equal(ch.difficulty_factor, 9);
    assert_non_null(challenge_parse_legacy("{\"duration\":1}", 14, &ch, note, sizeof(note)));
}

/* What the original could store but our rules refuse is normalised, never
 * refused: each rule of captcha.h once. */
static void test_legacy_normalised(void **state) {
    (void)state;
    const char *j = "{\"m\":{\"visitor_threshold\":5000000000,\"defense\":{\"levels\":["
                    "{\"visitor_threshold\":500,\"difficulty_factor\":20},"
                    "{\"visitor_threshold\":50,\"difficulty_factor\":0},"
                    "{\"visitor_threshold\":50,\"difficulty_factor\":30},"
                    "{\"visitor_threshold\":900,\"difficulty_factor\":5},"
                    "{\"visitor_threshold\":6000000000,\"difficulty_factor\":7000000000}],"
                    "\"current_visitor_threshold\":0},\"duration\":0}}";
    captcha *c = NULL;
    uint32_t live = 0;
    char note[200];
    assert_null(captcha_parse_legacy(j, strlen(j), &c, &live, note, sizeof(note)));
    assert_int_equal(live, 4294967295u);
    assert_int_equal(c->duration_s, 1);
    assert_int_equal(c->nlevels, 4);
    uint32_t th[] = {50, 500, 900, 4294967295u}, df[] = {30, 30, 30, 4294967295u};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(c->levels[i].visitor_threshold, th[i]);
        assert_int_equal(c->levels[i].difficulty_factor, df[i]);
    }
    assert_non_null(strstr(note, "duplicate"));
    assert_non_null(strstr(note, "decreasing"));
    assert_non_null(strstr(note, "duration 0"));
    captcha_free(c);
    /* 300 levels and a u64 duration */
    static char buf[40000];
    size_t at = (size_t)sprintf(buf, "{\"m\":{\"visitor_threshold\":0,\"duration\":99999999999,\"defense\":{\"levels\":[");
    for (int i = 0; i < 300; i++) at += (size_t)sprintf(buf + at, "%s{\"visitor_threshold\":%d,\"difficulty_factor\":%d}", i ? "," : "", i, i + 1);
    sprintf(buf + at, "]}}}");
    assert_null(captcha_parse_legacy(buf, strlen(buf), &c, &live, note, sizeof(note)));
    assert_int_equal(c->nlevels, 300);
    assert_int_equal(c->duration_s, 4294967295u);
    captcha_free(c);
    /* no levels, or not JSON: cannot be read (the caller keeps the bytes) */
    const char *none = "{\"m\":{\"visitor_threshold\":0,\"duration\":5,\"defense\":{\"levels\":[]}}}";
    assert_non_null(captcha_parse_legacy(none, strlen(none), &c, &live, note, sizeof(note)));
    captcha *u = captcha_unreadable(none, strlen(none));
    assert_non_null(u);
    assert_int_equal(u->legacy_len, strlen(none));
    captcha *d = captcha_dup(u);
    assert_memory_equal(d->legacy, none, strlen(none));
    assert_int_equal(captcha_mem_usage(d), captcha_mem_usage(u));
    captcha_free(d);
    captcha_free(u);
    /* a challenge of duration 0 (already expired when loaded) and a huge one */
    challenge ch = {0};
    const char *z = "{\"duration\":0,\"difficulty_factor\":9}";
    assert_null(challenge_parse_legacy(z, strlen(z), &ch, note, sizeof(note)));
    assert_int_equal(ch.duration_s, 1);
    const char *h = "{\"duration\":99999999999,\"difficulty_factor\":9}";
    assert_null(challenge_parse_legacy(h, strlen(h), &ch, note, sizeof(note)));
    assert_int_equal(ch.duration_s, 4294967295u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_difficulty_example),
        cmocka_unit_test(test_difficulty_three_levels),
        cmocka_unit_test(test_config_rejections),
        cmocka_unit_test(test_config_limits),
        cmocka_unit_test(test_challenge_parse),
        cmocka_unit_test(test_settable_limits),
        cmocka_unit_test(test_legacy_formats),
        cmocka_unit_test(test_legacy_normalised),
    };
    return cmocka_run_group_tests_name("captcha", tests, NULL, NULL);
}
