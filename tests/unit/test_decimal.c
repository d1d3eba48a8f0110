/* SPDX-License-Identifier: BSD-3-Clause */
/* test_decimal.c -- unit tests of core/decimal.h: mc_dec_of writes exactly what
 * "%lld" writes, for the edges of every digit count, the extremes and a sweep. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "decimal.h"

static void check(long long v) {
    char want[32];
    int n = snprintf(want, sizeof(want), "%lld", v);
    mc_dec d = mc_dec_of(v);
    assert_int_equal(d.n, n);
    assert_true(d.off + d.n == sizeof(d.s));
    assert_memory_equal(d.s + d.off, want, (size_t)n);
}

static void test_edges(void **state) {
    (void)state;
    check(0);
    check(LLONG_MAX);
    check(LLONG_MIN);
    check(LLONG_MIN + 1);
    long long p = 1;
    for (int digits = 1; digits <= 18; digits++, p *= 10) {
        check(p - 1), check(p), check(p + 1), check(-p), check(-p + 1), check(-p - 1);
    }
    check(1700000000000LL);    /* a time in ms */
    check(1700000000000000LL); /* a time in us */
}

static void test_sweep(void **state) {
    (void)state;
    for (long long v = -20000; v <= 20000; v++) check(v);
    for (long long v = 1; v > 0 && v < LLONG_MAX / 3; v = v * 3 + 1) check(v), check(-v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests_name("decimal", tests, NULL, NULL);
}
