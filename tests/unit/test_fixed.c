/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fixed.c -- unit tests of the fixed-window counter (src/core/fixed.c):
 * parsing a stored count as INCRBY does, and one hit's count and end, for the
 * fixed strategy (the first hit sets the end) and the elastic one (every hit). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "fixed.h"

#define NOW 1700000000000ULL /* Unix milliseconds */

static int parse(const char *s, int64_t *v) { return fw_parse_count(s, strlen(s), v); }

static void test_parse_accepts_what_incrby_reads(void **state) {
    (void)state;
    int64_t v = 7;
    assert_int_equal(parse("0", &v), FW_OK);
    assert_int_equal(v, 0);
    assert_int_equal(parse("42", &v), FW_OK);
    assert_int_equal(v, 42);
    assert_int_equal(parse("-17", &v), FW_OK);
    assert_int_equal(v, -17);
    assert_int_equal(parse("9223372036854775807", &v), FW_OK);
    assert_true(v == INT64_MAX);
    assert_int_equal(parse("-9223372036854775808", &v), FW_OK);
    assert_true(v == INT64_MIN);
}

static void test_parse_refuses_the_rest(void **state) {
    (void)state;
    int64_t v = 7;
    const char *bad[] = {"", "-", "01", "-0", "+1", " 1", "1 ", "1a", "abc", "1.5",
                         "9223372036854775808", "-9223372036854775809", "99999999999999999999",
                         "123456789012345678901"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(parse(bad[i], &v), FW_ERR_NOT_INTEGER);
        assert_int_equal(v, 7); /* untouched */
    }
    assert_int_equal(fw_parse_count("12", 1, &v), FW_OK); /* only len bytes are read */
    assert_int_equal(v, 1);
}

/* The first hit starts the window; later hits add and keep its end. */
static void test_fixed_window_keeps_its_end(void **state) {
    (void)state;
    int64_t c, e;
    assert_int_equal(fw_hit(0, 0, FW_NO_END, 1, 1000, NOW, 0, &c, &e), FW_OK);
    assert_int_equal(c, 1);
    assert_int_equal(e, NOW + 1000);
    assert_int_equal(fw_hit(1, 1, (int64_t)NOW + 1000, 3, 1000, NOW + 400, 0, &c, &e), FW_OK);
    assert_int_equal(c, 4);
    assert_int_equal(e, NOW + 1000);
    /* a stale count under a missing key does not count */
    assert_int_equal(fw_hit(0, 99, (int64_t)NOW, 2, 1000, NOW + 5000, 0, &c, &e), FW_OK);
    assert_int_equal(c, 2);
    assert_int_equal(e, NOW + 6000);
}

/* Elastic: every hit moves the end to now + window. */
static void test_elastic_moves_the_end(void **state) {
    (void)state;
    int64_t c, e;
    assert_int_equal(fw_hit(1, 5, (int64_t)NOW + 1000, 1, 1000, NOW + 900, 1, &c, &e), FW_OK);
    assert_int_equal(c, 6);
    assert_int_equal(e, NOW + 1900);
}

/* A key without an expiry gets one: a window that never ends is no window. */
static void test_no_expiry_gets_one(void **state) {
    (void)state;
    int64_t c, e;
    assert_int_equal(fw_hit(1, 10, FW_NO_END, 1, 500, NOW, 0, &c, &e), FW_OK);
    assert_int_equal(c, 11);
    assert_int_equal(e, NOW + 500);
}

/* A key still shown after its end (a MULTI or a script on Redis 7.0) is a window that is
 * over: the hit starts a new one, never an end in the past. */
static void test_an_ended_window_starts_again(void **state) {
    (void)state;
    int64_t c, e;
    assert_int_equal(fw_hit(1, 9, (int64_t)NOW, 1, 1000, NOW, 0, &c, &e), FW_OK); /* end == now: over */
    assert_int_equal(c, 1);
    assert_int_equal(e, NOW + 1000);
    assert_int_equal(fw_hit(1, 9, (int64_t)NOW - 5, 2, 1000, NOW, 0, &c, &e), FW_OK);
    assert_int_equal(c, 2);
    assert_int_equal(e, NOW + 1000);
    assert_int_equal(fw_hit(1, 9, (int64_t)NOW + 1, 1, 1000, NOW, 0, &c, &e), FW_OK); /* 1 ms left: kept */
    assert_int_equal(c, 10);
    assert_int_equal(e, NOW + 1);
    /* an ended window's count is not added to: no overflow from it either */
    assert_int_equal(fw_hit(1, INT64_MAX, (int64_t)NOW - 1, 1, 1000, NOW, 0, &c, &e), FW_OK);
    assert_int_equal(c, 1);
    assert_true(fw_live(1, FW_NO_END, NOW));
    assert_false(fw_live(0, FW_NO_END, NOW));
    assert_false(fw_live(1, (int64_t)NOW, NOW));
}

static void test_overflow_fills_nothing(void **state) {
    (void)state;
    int64_t c = 3, e = 4;
    assert_int_equal(fw_hit(1, INT64_MAX, (int64_t)NOW + 10, 1, 1000, NOW, 0, &c, &e), FW_ERR_OVERFLOW);
    assert_int_equal(fw_hit(1, INT64_MAX - 4294967294LL, (int64_t)NOW + 10, 4294967295ULL, 1000, NOW, 0, &c, &e),
                     FW_ERR_OVERFLOW);
    assert_int_equal(c, 3);
    assert_int_equal(e, 4);
    assert_int_equal(fw_hit(1, INT64_MAX - 4294967295LL, (int64_t)NOW + 10, 4294967295ULL, 1000, NOW, 0, &c, &e),
                     FW_OK);
    assert_true(c == INT64_MAX);
    assert_int_equal(fw_hit(1, -5, (int64_t)NOW + 10, 2, 1000, NOW, 0, &c, &e), FW_OK); /* DECR'd below 0 */
    assert_int_equal(c, -3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts_what_incrby_reads), cmocka_unit_test(test_parse_refuses_the_rest),
        cmocka_unit_test(test_fixed_window_keeps_its_end),      cmocka_unit_test(test_elastic_moves_the_end),
        cmocka_unit_test(test_no_expiry_gets_one),              cmocka_unit_test(test_overflow_fills_nothing),
        cmocka_unit_test(test_an_ended_window_starts_again),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
