/* SPDX-License-Identifier: BSD-3-Clause */
/* test_gcra.c -- unit tests of the GCRA core (src/core/gcra.c) against redis-cell's
 * documented behaviour, with an injected clock; and of lb_fits_at, the
 * sliding window's "when does it fit" (src/core/bucket.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bucket.h"
#include "gcra.h"

#define NOW 1700000000000000ULL /* Unix microseconds */
#define SEC 1000000ULL

static void test_params(void **state) {
    (void)state;
    gcra_params p;
    assert_int_equal(gcra_params_init(&p, 5, 1, SEC), 0); /* max_burst 4, 1 per second */
    assert_int_equal(p.emission_us, SEC);
    assert_int_equal(p.dvt_us, 5 * SEC);
    assert_int_equal(p.limit, 5);
    assert_int_equal(gcra_params_init(&p, 1, 3, SEC), 0); /* rounded to the nearest us */
    assert_int_equal(p.emission_us, 333333);
    assert_int_equal(gcra_params_init(&p, 1, 8000000, SEC), 0); /* sub-us: at least 1 */
    assert_int_equal(p.emission_us, 1);
    assert_int_equal(gcra_params_init(&p, 0, 1, SEC), -1);
    assert_int_equal(gcra_params_init(&p, 1, 0, SEC), -1);
    assert_int_equal(gcra_params_init(&p, 1, 1, 0), -1);
    assert_int_equal(gcra_params_init(&p, 1, 1, GCRA_MAX_PERIOD_US + 1), -1);
    assert_int_equal(gcra_params_init(&p, UINT64_MAX, 1, SEC), -1); /* T * capacity overflows */
}

/* redis-cell: a fresh key admits max_burst + 1 at once, then one per T. */
static void test_burst_then_rate(void **state) {
    (void)state;
    gcra_params p;
    gcra_params_init(&p, 5, 1, SEC);
    uint64_t tat = 0;
    gcra_result r;
    for (uint64_t i = 0; i < 5; i++) {
        assert_int_equal(gcra_apply(&p, tat, NOW, 1, &r), 0);
        assert_int_equal(r.limited, 0);
        assert_int_equal(r.limit, 5);
        assert_int_equal(r.remaining, 4 - i);
        assert_int_equal(r.retry_after_us, -1);
        assert_int_equal(r.reset_after_us, (i + 1) * SEC);
        tat = r.tat_us;
    }
    assert_int_equal(gcra_apply(&p, tat, NOW, 1, &r), 0);
    assert_int_equal(r.limited, 1);
    assert_int_equal(r.remaining, 0);
    assert_int_equal(r.retry_after_us, SEC);
    assert_int_equal(gcra_ceil_s((uint64_t)r.retry_after_us), 1);
    assert_int_equal(r.tat_us, tat); /* refused: unchanged */
    /* One emission interval later one more fits, and only one. */
    assert_int_equal(gcra_apply(&p, tat, NOW + SEC, 1, &r), 0);
    assert_int_equal(r.limited, 0);
    tat = r.tat_us;
    assert_int_equal(gcra_apply(&p, tat, NOW + SEC, 1, &r), 0);
    assert_int_equal(r.limited, 1);
}

static void test_quantity_edges(void **state) {
    (void)state;
    gcra_params p;
    gcra_params_init(&p, 5, 1, SEC);
    gcra_result r;
    /* Above the limit: refused, never satisfiable (-1), fresh state reported. */
    assert_int_equal(gcra_apply(&p, 0, NOW, 6, &r), 0);
    assert_int_equal(r.limited, 1);
    assert_int_equal(r.retry_after_us, -1);
    assert_int_equal(r.remaining, 5);
    assert_int_equal(r.reset_after_us, 0);
    /* Exactly the limit fits on a fresh key. */
    assert_int_equal(gcra_apply(&p, 0, NOW, 5, &r), 0);
    assert_int_equal(r.limited, 0);
    assert_int_equal(r.remaining, 0);
    /* Quantity 0 is a peek: allowed, TAT unchanged. */
    uint64_t tat = NOW + 2 * SEC;
    assert_int_equal(gcra_apply(&p, tat, NOW, 0, &r), 0);
    assert_int_equal(r.limited, 0);
    assert_int_equal(r.tat_us, tat);
    assert_int_equal(r.remaining, 3);
    assert_int_equal(gcra_apply(&p, 0, NOW, 0, &r), 0);
    assert_int_equal(r.tat_us, 0);
    /* Overflowing quantity. */
    assert_int_equal(gcra_apply(&p, 0, NOW, UINT64_MAX / 2, &r), -1);
}

static void test_backwards_clock_and_refund(void **state) {
    (void)state;
    gcra_params p;
    gcra_params_init(&p, 2, 1, SEC);
    gcra_result r;
    assert_int_equal(gcra_apply(&p, 0, NOW, 2, &r), 0);
    uint64_t tat = r.tat_us;
    /* The clock steps back 10 s: still refused, no underflow, retry bounded. */
    assert_int_equal(gcra_apply(&p, tat, NOW - 10 * SEC, 1, &r), 0);
    assert_int_equal(r.limited, 1);
    assert_true(r.retry_after_us > 0 && (uint64_t)r.retry_after_us <= 11 * SEC);
    /* Refunds move the TAT back, never below now. */
    assert_int_equal(gcra_refund(&p, tat, NOW, 1), tat - SEC);
    assert_int_equal(gcra_refund(&p, tat, NOW, 5), NOW);
    assert_int_equal(gcra_refund(&p, NOW - 1, NOW, 1), NOW - 1);
    assert_int_equal(gcra_refund(&p, tat, NOW, UINT64_MAX), NOW);
}

static void test_window_fits_at(void **state) {
    (void)state;
    lbucket b;
    const uint64_t T = 1700000000000ULL;
    assert_int_equal(lb_init(&b, 1000), LB_OK);
    assert_int_equal(lb_fits_at(&b, T, 3, 1), T);
    assert_int_equal(lb_fits_at(&b, T, 3, 4), UINT64_MAX);
    assert_int_equal(lb_add(&b, T, 2, NULL), LB_OK);
    assert_int_equal(lb_add(&b, T + 300, 1, NULL), LB_OK);
    assert_int_equal(lb_fits_at(&b, T + 300, 3, 0), T + 300);
    /* One more needs the first two to leave: at their slot's expiry. */
    uint64_t at = lb_fits_at(&b, T + 300, 3, 1);
    assert_true(at >= T + 1000 && at <= T + 1000 + 1000 / 256);
    assert_int_equal(lb_count(&b, at) + 1, 2);
    assert_true(lb_count(&b, at - 1) + 1 > 3);
    /* Three more need all three gone. */
    at = lb_fits_at(&b, T + 300, 3, 3);
    assert_true(at >= T + 1300 && at <= T + 1300 + 1000 / 256);
    assert_int_equal(lb_count(&b, at), 0);
    lb_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_burst_then_rate),
        cmocka_unit_test(test_quantity_edges),
        cmocka_unit_test(test_backwards_clock_and_refund),
        cmocka_unit_test(test_window_fits_at),
    };
    return cmocka_run_group_tests_name("gcra", tests, NULL, NULL);
}
