/* SPDX-License-Identifier: BSD-3-Clause */
/* test_histogram.c -- unit tests of core/histogram.c: the sqrt(2) bucket
 * boundaries, recording, percentiles (never below the true value, at most
 * sqrt(2) above it, capped at the maximum) and the reset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "histogram.h"

/* isqrt by bisection, for checking the bucket table. */
static uint64_t isqrt(uint64_t n) {
    uint64_t lo = 0, hi = 1ULL << 32;
    while (lo + 1 < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (mid * mid <= n) lo = mid;
        else hi = mid;
    }
    return lo;
}

static void test_boundaries(void **state) {
    (void)state;
    assert_int_equal(hist_bucket(0), 0);
    assert_int_equal(hist_bucket(1), 1);
    assert_int_equal(hist_bucket(2), 3);
    assert_int_equal(hist_bucket(3), 4);
    assert_int_equal(hist_bucket(4), 5);
    assert_int_equal(hist_bucket(5), 5);
    assert_int_equal(hist_bucket(6), 6);
    assert_int_equal(hist_bucket(7), 6);
    assert_int_equal(hist_bucket(8), 7);
    assert_int_equal(hist_bucket(1000), 2 * 9 + 2); /* 2^9 * 1.414 = 724 < 1000 < 1024 */
    assert_int_equal(hist_bucket((1ULL << 31) - 1), 62);
    assert_int_equal(hist_bucket(1ULL << 31), HIST_BUCKETS - 1);
    assert_int_equal(hist_bucket(UINT64_MAX), HIST_BUCKETS - 1);
    /* the odd buckets end at floor(2^k * sqrt(2)) = isqrt(2^(2k+1)) */
    for (unsigned k = 0; k <= 30; k++) {
        uint64_t top = isqrt(2ULL << (2 * k));
        assert_int_equal(hist_bucket_max(2 * k + 1), top);
        assert_int_equal(hist_bucket(top), 2 * k + 1);
        assert_int_equal(hist_bucket(top + 1), k == 0 ? 3 : 2 * k + 2); /* bucket 2 holds no whole value */
        assert_int_equal(hist_bucket_min(2 * k + 1), 1ULL << k);
    }
    /* every bucket's whole values map back to it, and the buckets tile 0.. */
    uint64_t next = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        uint64_t lo = hist_bucket_min(i), hi = hist_bucket_max(i);
        if (lo > hi) { /* no whole value (only [1.41, 2)) */
            assert_int_equal(i, 2);
            continue;
        }
        assert_int_equal(lo, next);
        assert_int_equal(hist_bucket(lo), i);
        assert_int_equal(hist_bucket(hi), i);
        next = hi + 1;
    }
    assert_int_equal(next, 0); /* the last bucket ends at UINT64_MAX */
    /* each bucket spans at most a factor sqrt(2): hi * hi <= 2 * lo * lo */
    for (unsigned i = 1; i < HIST_BUCKETS - 1; i++) {
        uint64_t lo = hist_bucket_min(i), hi = hist_bucket_max(i);
        if (lo <= hi) assert_true(hi * hi <= 2 * lo * lo);
    }
}

static void test_percentiles(void **state) {
    (void)state;
    histogram h;
    hist_reset(&h);
    assert_int_equal(hist_percentile(&h, 500), 0);
    assert_int_equal(hist_percentile(&h, 990), 0);
    hist_record(&h, 250);
    /* one value: every percentile is it (the bucket's top is capped at the max) */
    assert_int_equal(hist_percentile(&h, 500), 250);
    assert_int_equal(hist_percentile(&h, 990), 250);
    assert_int_equal(h.max, 250);
    assert_int_equal(h.total, 1);
    hist_reset(&h);
    for (uint64_t v = 1; v <= 1000; v++) hist_record(&h, v);
    uint64_t p50 = hist_percentile(&h, 500), p99 = hist_percentile(&h, 990), p100 = hist_percentile(&h, 1000);
    assert_true(p50 >= 500 && p50 * p50 <= 2 * 500 * 500);
    assert_true(p99 >= 990 && p99 <= 1000);
    assert_int_equal(p100, 1000);
    /* 99 fast and 1 slow: p50 and p99 stay fast, the max shows the slow one */
    hist_reset(&h);
    for (int i = 0; i < 99; i++) hist_record(&h, 3);
    hist_record(&h, 5000);
    assert_int_equal(hist_percentile(&h, 500), 3);
    assert_int_equal(hist_percentile(&h, 990), 3);
    assert_int_equal(hist_percentile(&h, 1000), 5000);
    assert_int_equal(h.max, 5000);
    /* 98 fast and 2 slow: p99 is slow (rank 99) */
    hist_record(&h, 4000);
    h.counts[hist_bucket(3)]--, h.total--; /* drop one fast value: 98 + 2 */
    assert_true(hist_percentile(&h, 990) >= 4000);
    /* zeros, and per-mille outside 1..1000 clamped */
    hist_reset(&h);
    hist_record(&h, 0);
    hist_record(&h, 0);
    assert_int_equal(hist_percentile(&h, 0), 0);
    assert_int_equal(hist_percentile(&h, 5000), 0);
    /* the last bucket answers the exact maximum */
    hist_record(&h, 1ULL << 40);
    assert_int_equal(hist_percentile(&h, 1000), 1ULL << 40);
    /* huge counts do not overflow the rank */
    hist_reset(&h);
    h.counts[hist_bucket(10)] = UINT64_MAX / 2;
    h.total = UINT64_MAX / 2;
    h.max = 10;
    assert_int_equal(hist_percentile(&h, 990), 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_boundaries),
        cmocka_unit_test(test_percentiles),
    };
    return cmocka_run_group_tests_name("histogram", tests, NULL, NULL);
}
