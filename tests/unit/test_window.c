/* SPDX-License-Identifier: BSD-3-Clause */
/* test_window.c -- unit tests of the rate limiters' sparse window counter
 * (src/core/window.c), with an injected clock: the slot widths (at most 1 s),
 * exact edges (a hit counts at D, is gone by D + w), a retry one slot late, a
 * request of exactly the limit, exactly enough freed, refunds newest first,
 * restore checks, carrying hits into another window (sw_rewidth), the memory
 * bound, and a randomized comparison against an exact model of every hit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "window.h"

#define T0 1700000000000ULL
#define HOUR 3600000ULL

static void test_widths(void **state) {
    (void)state;
    assert_int_equal(sw_legacy_width(HOUR), 14062);
    assert_int_equal(sw_fine_width(HOUR), 1000);
    assert_int_equal(sw_fine_width(1000), 3);      /* short windows: window/256, as before */
    assert_int_equal(sw_fine_width(100), 1);
    assert_int_equal(sw_fine_width(256000), 1000);
    assert_int_equal(sw_fine_width(24 * HOUR), 1000);
    assert_int_equal(sw_fine_width(131072000), 1000); /* the longest window with 1 s slots (~36 h) */
    assert_int_equal(sw_fine_width(131072001), 1001);
    for (uint64_t w = 1; w <= SW_MAX_WINDOW_MS; w = w * 3 + 1) {
        swindow b;
        assert_int_equal(sw_init(&b, w, sw_fine_width(w)), SW_OK);
        assert_true(w / b.slot_ms + 2 <= SW_MAX_SPAN + 2);
        assert_int_equal(sw_init(&b, w, sw_legacy_width(w)), SW_OK);
    }
    swindow b;
    assert_int_equal(sw_init(&b, 0, 1), SW_ERR_RANGE);
    assert_int_equal(sw_init(&b, SW_MAX_WINDOW_MS + 1, 1 << 30), SW_ERR_RANGE);
    assert_int_equal(sw_init(&b, HOUR, 1), SW_ERR_RANGE); /* 3.6 M slots: too many */
    assert_int_equal(sw_init(&b, HOUR, 0), SW_ERR_RANGE);
}

/* A one-hour hit counts at t + 1 h and is gone by t + 1 h + 1 s, wherever t falls in its slot. */
static void test_hour_edges(void **state) {
    (void)state;
    for (uint64_t off = 0; off < 1000; off += 37) {
        swindow b;
        sw_init(&b, HOUR, sw_fine_width(HOUR));
        uint64_t t = T0 + off, c;
        assert_int_equal(sw_add(&b, t, 1, &c), SW_OK);
        assert_int_equal(c, 1);
        assert_int_equal(sw_count(&b, t + HOUR), 1);
        assert_int_equal(sw_count(&b, t + HOUR + 1000), 0);
        uint64_t e = sw_empty_at(&b, t);
        assert_true(e > t + HOUR && e <= t + HOUR + 1000);
        assert_int_equal(sw_count(&b, e - 1), 1);
        assert_int_equal(sw_count(&b, e), 0);
        sw_free(&b);
    }
}

/* A retry one slot late, and one ms early: exactly at the slot's expiry it fits. */
static void test_retry_one_slot_late(void **state) {
    (void)state;
    swindow b;
    sw_init(&b, 60000, sw_fine_width(60000)); /* w = 234 */
    uint64_t w = b.slot_ms;
    assert_int_equal(sw_add(&b, T0, 2, NULL), SW_OK);
    assert_int_equal(sw_add(&b, T0 + 5 * w, 1, NULL), SW_OK);
    uint64_t at = sw_fits_at(&b, T0 + 5 * w, 3, 1);
    assert_int_equal(at, (T0 / w + 1) * w + 60000);
    assert_int_equal(sw_fits_at(&b, at - 1, 3, 1), at);     /* still that time */
    assert_int_equal(sw_fits_at(&b, at, 3, 1), at);         /* fits exactly then */
    assert_int_equal(sw_fits_at(&b, at + w, 3, 1), at + w); /* a slot late: fits at once */
    assert_int_equal(sw_count(&b, at + w), 1);
    sw_free(&b);
}

/* A request of exactly the limit fits an empty window, one more never. */
static void test_exactly_the_limit(void **state) {
    (void)state;
    swindow b;
    sw_init(&b, 1000, sw_fine_width(1000));
    assert_int_equal(sw_fits_at(&b, T0, 5, 5), T0);
    assert_int_equal(sw_fits_at(&b, T0, 5, 6), UINT64_MAX);
    uint64_t c;
    assert_int_equal(sw_add(&b, T0, 5, &c), SW_OK);
    assert_int_equal(c, 5);
    assert_int_equal(sw_fits_at(&b, T0, 5, 0), T0);
    assert_true(sw_fits_at(&b, T0, 5, 1) > T0);
    /* the whole limit again: when all five have left */
    assert_int_equal(sw_fits_at(&b, T0, 5, 5), sw_empty_at(&b, T0));
    sw_free(&b);
}

/* Exactly enough freed: the request fits when the hits leaving make exactly the room. */
static void test_exactly_enough_freed(void **state) {
    (void)state;
    swindow b;
    sw_init(&b, 10000, sw_fine_width(10000)); /* w = 39 */
    uint64_t w = b.slot_ms;
    sw_add(&b, T0, 2, NULL);
    sw_add(&b, T0 + 3 * w, 3, NULL);
    sw_add(&b, T0 + 6 * w, 1, NULL); /* 6 of 6 */
    uint64_t first = (T0 / w + 1) * w + 10000, second = ((T0 + 3 * w) / w + 1) * w + 10000;
    assert_int_equal(sw_fits_at(&b, T0 + 6 * w, 6, 2), first);  /* exactly the 2 that leave first */
    assert_int_equal(sw_fits_at(&b, T0 + 6 * w, 6, 3), second); /* one more needs the next slot */
    assert_int_equal(sw_fits_at(&b, T0 + 6 * w, 6, 5), second);
    assert_int_equal(sw_count(&b, first), 4);
    assert_int_equal(sw_count(&b, second), 1);
    sw_free(&b);
}

static void test_remove_newest_first_and_backwards_clock(void **state) {
    (void)state;
    swindow b;
    sw_init(&b, 60000, sw_fine_width(60000));
    sw_add(&b, T0, 2, NULL);
    sw_add(&b, T0 + 1000, 3, NULL);
    assert_int_equal(sw_remove(&b, T0 + 1000, 4), 4);
    assert_int_equal(sw_count(&b, T0 + 1000), 1);
    /* the one left is the oldest: it leaves with the first slot */
    assert_int_equal(sw_empty_at(&b, T0 + 1000), (T0 / b.slot_ms + 1) * b.slot_ms + 60000);
    /* a clock that steps back counts at the latest time seen */
    uint64_t c;
    assert_int_equal(sw_add(&b, T0 - 5000, 1, &c), SW_OK);
    assert_int_equal(c, 2);
    assert_int_equal(b.last_ms, T0 + 1000);
    assert_int_equal(sw_remove(&b, T0 + 1000, 10), 2);
    assert_int_equal(sw_slots(&b), 0);
    assert_null(b.e); /* an empty counter holds no array */
    sw_free(&b);
}

static void test_restore_checks(void **state) {
    (void)state;
    swindow b;
    uint64_t w = 1000, s0 = T0 / w;
    sw_init(&b, HOUR, w);
    assert_int_equal(sw_restore_begin(&b, T0), SW_OK);
    assert_int_equal(sw_restore_slot(&b, s0 - 100, 2), SW_OK);
    assert_int_equal(sw_restore_slot(&b, s0 - 100, 1), SW_ERR_CORRUPT); /* not ascending */
    assert_int_equal(sw_restore_slot(&b, s0 + 1, 1), SW_ERR_CORRUPT);   /* after the clock */
    assert_int_equal(sw_restore_slot(&b, s0, 0), SW_ERR_CORRUPT);       /* zero */
    assert_int_equal(sw_restore_slot(&b, s0, 3), SW_OK);
    assert_int_equal(sw_restore_end(&b), SW_OK);
    assert_int_equal(sw_count(&b, T0), 5);
    sw_free(&b);
    sw_init(&b, HOUR, w);
    sw_restore_begin(&b, T0);
    assert_int_equal(sw_restore_slot(&b, s0 - HOUR / w - 2, 1), SW_OK);
    assert_int_equal(sw_restore_slot(&b, s0, 1), SW_ERR_CORRUPT); /* wider than a window */
    sw_free(&b);
    assert_int_equal(sw_restore_begin(&b, SW_MAX_TIME_MS + 1), SW_ERR_RANGE);
}

/* Carried into another window: each hit at the latest time it can have been taken. */
static void test_rewidth(void **state) {
    (void)state;
    swindow a, b;
    sw_init(&a, HOUR, sw_legacy_width(HOUR)); /* 14,062 ms slots */
    sw_add(&a, T0, 2, NULL);
    sw_add(&a, T0 + 20 * 60000, 1, NULL);
    uint64_t now = T0 + 40 * 60000;
    /* shorter: 30 min. The first two (taken by the end of their old slot) are gone, the third stays */
    assert_int_equal(sw_rewidth(&b, &a, 30 * 60000, sw_fine_width(30 * 60000), now), SW_OK);
    assert_int_equal(sw_count(&b, now), 1);
    uint64_t latest = ((T0 + 20 * 60000) / 14062 + 1) * 14062 - 1;
    if (latest > T0 + 20 * 60000) latest = T0 + 20 * 60000; /* never after the clock mark */
    assert_int_equal(sw_empty_at(&b, now), (latest / 1000 + 1) * 1000 + 30 * 60000);
    assert_true(sw_empty_at(&b, now) >= T0 + 20 * 60000 + 30 * 60000);
    sw_free(&b);
    /* longer: 2 h. All three carried, none leaves before 2 h after it was taken */
    assert_int_equal(sw_rewidth(&b, &a, 2 * HOUR, sw_fine_width(2 * HOUR), now), SW_OK);
    assert_int_equal(sw_count(&b, now), 3);
    assert_int_equal(sw_count(&b, T0 + 2 * HOUR - 1), 3);
    assert_int_equal(sw_count(&b, T0 + 2 * HOUR + 14062 + 1000), 1);
    sw_free(&b);
    /* the same window, a finer width: the old hits stay as long, at most one new slot more */
    assert_int_equal(sw_rewidth(&b, &a, HOUR, 1000, T0), SW_OK);
    assert_int_equal(sw_count(&b, T0 + HOUR), 3);
    assert_int_equal(sw_count(&b, (T0 / 14062 + 1) * 14062 + HOUR + 1000), 1);
    sw_free(&b);
    sw_free(&a);
}

/* Memory: 8 bytes per slot with hits; never beyond window/w + 2 entries. */
static void test_memory_bound(void **state) {
    (void)state;
    swindow b;
    sw_init(&b, HOUR, sw_fine_width(HOUR));
    sw_add(&b, T0, 1, NULL);
    size_t one = sw_mem_usage(&b);
    assert_true(one <= sizeof(swindow) + 4 * sizeof(sw_entry));
    for (uint64_t i = 0; i < 3 * HOUR / 1000; i++) assert_int_equal(sw_add(&b, T0 + i * 1000, 1, NULL), SW_OK);
    assert_true(sw_slots(&b) <= HOUR / 1000 + 2);
    assert_true(b.cap <= HOUR / 1000 + 2);
    assert_true(sw_mem_usage(&b) <= sizeof(swindow) + (HOUR / 1000 + 2) * sizeof(sw_entry));
    /* quiet for a while: the array shrinks back */
    sw_add(&b, T0 + 3 * HOUR + HOUR - 2000, 0, NULL);
    assert_true(b.cap <= 16);
    sw_free(&b);
    /* a slot is full at 2^32 - 1 */
    sw_init(&b, 1000, 3);
    assert_int_equal(sw_add(&b, T0, UINT32_MAX, NULL), SW_OK);
    assert_int_equal(sw_add(&b, T0, 1, NULL), SW_ERR_FULL);
    assert_int_equal(sw_count(&b, T0), UINT32_MAX);
    sw_free(&b);
}

/* Random hits and refunds against an exact list of every hit's slot. */
static void test_random_against_model(void **state) {
    (void)state;
    srand(7);
    for (int round = 0; round < 40; round++) {
        uint64_t window = 1 + (uint64_t)(rand() % 5000) * (round % 3 ? 1 : 1000);
        swindow b;
        sw_init(&b, window, round % 2 ? sw_fine_width(window) : sw_legacy_width(window));
        uint64_t w = b.slot_ms, now = T0;
        static uint64_t slots[4000];
        int n = 0;
        for (int step = 0; step < 400; step++) {
            now += rand() % 4 == 0 ? (uint64_t)rand() % (window + 10) : (uint64_t)(rand() % 50);
            /* the model's count at now */
            uint64_t cnt = 0;
            for (int i = 0; i < n; i++) cnt += (slots[i] + 1) * w + window > now;
            assert_int_equal(sw_count(&b, now), cnt);
            if (rand() % 5 == 0) {
                uint64_t k = (uint64_t)(rand() % 4);
                uint64_t got = sw_remove(&b, now, k);
                /* drop expired, then the newest k */
                int m = 0;
                for (int i = 0; i < n; i++)
                    if ((slots[i] + 1) * w + window > now) slots[m++] = slots[i];
                n = m;
                uint64_t want = k < (uint64_t)n ? k : (uint64_t)n;
                assert_int_equal(got, want);
                n -= (int)want;
            } else if (n < 3900) {
                uint32_t c = (uint32_t)(1 + rand() % 3);
                assert_int_equal(sw_add(&b, now, c, NULL), SW_OK);
                for (uint32_t i = 0; i < c; i++) slots[n++] = now / w;
            }
        }
        sw_free(&b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widths),
        cmocka_unit_test(test_hour_edges),
        cmocka_unit_test(test_retry_one_slot_late),
        cmocka_unit_test(test_exactly_the_limit),
        cmocka_unit_test(test_exactly_enough_freed),
        cmocka_unit_test(test_remove_newest_first_and_backwards_clock),
        cmocka_unit_test(test_restore_checks),
        cmocka_unit_test(test_rewidth),
        cmocka_unit_test(test_memory_bound),
        cmocka_unit_test(test_random_against_model),
    };
    return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}
