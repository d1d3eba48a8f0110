/* SPDX-License-Identifier: BSD-3-Clause */
/* test_policy.c -- unit tests of the stored-policy check (src/core/policy.c):
 * every range edge of a GCRA and a WINDOW definition, and that a GCRA policy's
 * parameters are exactly those RL.GCRA derives from the same explicit numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bucket.h"
#include "policy.h"

static policy_def gcra(uint64_t rate, uint64_t period_ms, uint64_t burst) {
    return (policy_def){.kind = POLICY_GCRA, .rate = rate, .period_ms = period_ms, .burst = burst};
}

static policy_def window(uint64_t limit, uint64_t window_ms) {
    return (policy_def){.kind = POLICY_WINDOW, .rate = limit, .period_ms = window_ms};
}

static void test_gcra_ranges(void **state) {
    (void)state;
    policy_def d = gcra(10, 1000, 0);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = gcra(0, 1000, 0);
    assert_int_equal(policy_check(&d), POLICY_ERR_RATE);
    d = gcra(POLICY_GCRA_RATE_MAX, 1000, 0);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = gcra(POLICY_GCRA_RATE_MAX + 1, 1000, 0);
    assert_int_equal(policy_check(&d), POLICY_ERR_RATE);
    d = gcra(10, 0, 0);
    assert_int_equal(policy_check(&d), POLICY_ERR_PERIOD);
    d = gcra(10, POLICY_GCRA_PERIOD_MS_MAX, 0);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = gcra(10, POLICY_GCRA_PERIOD_MS_MAX + 1, 0);
    assert_int_equal(policy_check(&d), POLICY_ERR_PERIOD);
    d = gcra(10, 1000, POLICY_GCRA_BURST_MAX + 1);
    assert_int_equal(policy_check(&d), POLICY_ERR_BURST);
    d = gcra(1, POLICY_GCRA_PERIOD_MS_MAX, POLICY_GCRA_BURST_MAX); /* T * capacity overflows */
    assert_int_equal(policy_check(&d), POLICY_ERR_TOO_LARGE);
}

static void test_window_ranges(void **state) {
    (void)state;
    policy_def d = window(5, 60000);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = window(0, 60000);
    assert_int_equal(policy_check(&d), POLICY_ERR_RATE);
    d = window(POLICY_WINDOW_LIMIT_MAX, 60000);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = window(POLICY_WINDOW_LIMIT_MAX + 1, 60000);
    assert_int_equal(policy_check(&d), POLICY_ERR_RATE);
    d = window(5, 0);
    assert_int_equal(policy_check(&d), POLICY_ERR_PERIOD);
    d = window(5, LB_MAX_WINDOW_MS);
    assert_int_equal(policy_check(&d), POLICY_OK);
    d = window(5, LB_MAX_WINDOW_MS + 1);
    assert_int_equal(policy_check(&d), POLICY_ERR_PERIOD);
    d = window(5, 60000);
    d.burst = 3; /* a window has no burst */
    assert_int_equal(policy_check(&d), POLICY_ERR_BURST);
}

static void test_kind(void **state) {
    (void)state;
    policy_def d = gcra(10, 1000, 0);
    d.kind = (policy_kind)0;
    assert_int_equal(policy_check(&d), POLICY_ERR_KIND);
    d.kind = (policy_kind)3;
    assert_int_equal(policy_check(&d), POLICY_ERR_KIND);
    gcra_params p;
    d = window(5, 1000);
    assert_int_equal(policy_gcra_params(&d, &p), -1);
}

/* The parameters are RL.GCRA's: capacity = BURST, else the rate. */
static void test_gcra_params_match_explicit(void **state) {
    (void)state;
    gcra_params got, want;
    policy_def d = gcra(100, 60000, 0);
    assert_int_equal(policy_gcra_params(&d, &got), 0);
    assert_int_equal(gcra_params_init(&want, 100, 100, 60000 * 1000ULL), 0);
    assert_memory_equal(&got, &want, sizeof(got));
    d = gcra(3, 1000, 20);
    assert_int_equal(policy_gcra_params(&d, &got), 0);
    assert_int_equal(gcra_params_init(&want, 20, 3, 1000 * 1000ULL), 0);
    assert_memory_equal(&got, &want, sizeof(got));
    assert_int_equal(got.limit, 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gcra_ranges),
        cmocka_unit_test(test_window_ranges),
        cmocka_unit_test(test_kind),
        cmocka_unit_test(test_gcra_params_match_explicit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
