/* SPDX-License-Identifier: BSD-3-Clause */
/* test_bucket.c -- unit tests of the leaky-bucket counter (src/core/bucket.c), with
 * an injected clock: the exact edges (a hit still counts at D, is gone at
 * D + D/256), long idle gaps, a backwards clock, counts near the limit, and a
 * randomized comparison against an exact model of every hit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bucket.h"

#define T0 1700000000000ULL /* a Unix time in ms */

static void test_init_ranges(void **state) {
    (void)state;
    lbucket b;
    assert_int_equal(lb_init(&b, 0), LB_ERR_RANGE);
    assert_int_equal(lb_init(&b, LB_MAX_WINDOW_MS + 1), LB_ERR_RANGE);
    assert_int_equal(lb_init(&b, 1000), LB_OK);
    assert_int_equal(b.slot_ms, 3);
    assert_int_equal(b.nslots, 335);
    assert_int_equal(lb_init(&b, 30000), LB_OK);
    assert_int_equal(b.slot_ms, 117);
    assert_true(b.nslots <= 258);
    assert_int_equal(lb_init(&b, 100), LB_OK); /* below 256 ms: 1 ms slots */
    assert_int_equal(b.slot_ms, 1);
    assert_int_equal(lb_init(&b, LB_MAX_WINDOW_MS), LB_OK);
    /* Memory bound of the header: at most 4 KiB per counter, whatever the window. */
    for (uint64_t w = 1; w < 2000000; w = w * 3 / 2 + 1) {
        assert_int_equal(lb_init(&b, w), LB_OK);
        assert_true(sizeof(lbucket) + b.nslots * sizeof(uint32_t) <= 4096);
    }
}

/* A hit at the start of a slot counts exactly [t, t + D + w): the edges. */
static void test_exact_edges_slot_start(void **state) {
    (void)state;
    lbucket b;
    const uint64_t D = 32000; /* w = 125 = D / 256 exactly */
    assert_int_equal(lb_init(&b, D), LB_OK);
    assert_int_equal(b.slot_ms, D / 256);
    uint64_t t = (T0 / b.slot_ms) * b.slot_ms;
    uint64_t count;
    assert_int_equal(lb_add(&b, t, 1, &count), LB_OK);
    assert_int_equal(count, 1);
    assert_int_equal(lb_count(&b, t), 1);
    assert_int_equal(lb_count(&b, t + D - 1), 1);
    assert_int_equal(lb_count(&b, t + D), 1);               /* exactly at D: still counts */
    assert_int_equal(lb_count(&b, t + D + D / 256 - 1), 1);
    assert_int_equal(lb_count(&b, t + D + D / 256), 0);     /* at D + D/256: gone */
    assert_int_equal(lb_empty_at(&b, t), t + D + D / 256);
    lb_free(&b);
}

/* A hit anywhere inside a slot: counts at D, gone by D + D/256. */
static void test_exact_edges_any_offset(void **state) {
    (void)state;
    const uint64_t windows[] = {1000, 2000, 30000, 32000, 86400000};
    for (size_t wi = 0; wi < sizeof(windows) / sizeof(windows[0]); wi++) {
        uint64_t D = windows[wi];
        for (uint64_t off = 0; off < 400; off += 7) {
            lbucket b;
            assert_int_equal(lb_init(&b, D), LB_OK);
            uint64_t t = T0 + off;
            assert_int_equal(lb_add(&b, t, 1, NULL), LB_OK);
            assert_int_equal(lb_count(&b, t + D), 1);
            assert_int_equal(lb_count(&b, t + D + D / 256), 0);
            lb_free(&b);
        }
    }
}

/* Exact model: every hit's time. */
typedef struct model {
    uint64_t *t;
    size_t n, cap;
} model;

static void model_add(model *m, uint64_t t, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (m->n == m->cap) {
            m->cap = m->cap ? m->cap * 2 : 1024;
            m->t = realloc(m->t, m->cap * sizeof(uint64_t));
        }
        m->t[m->n++] = t;
    }
}

/* Hits that must count at q (added less than D ago) and that may count at q
 * (added less than D + D/256 ago, or 1 ms for windows below 256 ms). */
static void model_bounds(const model *m, uint64_t D, uint64_t q, uint64_t *lo, uint64_t *hi) {
    uint64_t slack = D / 256 ? D / 256 : 1;
    *lo = *hi = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (m->t[i] + D >= q) (*lo)++;
        if (m->t[i] + D + slack > q) (*hi)++;
    }
}

static void run_random(uint64_t D, unsigned seed, int steps, uint64_t max_gap) {
    lbucket b;
    model m = {0};
    assert_int_equal(lb_init(&b, D), LB_OK);
    srand(seed);
    uint64_t now = T0;
    for (int i = 0; i < steps; i++) {
        now += (uint64_t)rand() % (max_gap + 1);
        if (rand() % 3) {
            uint32_t n = 1 + (uint32_t)(rand() % 3);
            uint64_t count;
            assert_int_equal(lb_add(&b, now, n, &count), LB_OK);
            model_add(&m, now, n);
            assert_int_equal(count, lb_count(&b, now));
        }
        uint64_t lo, hi, c = lb_count(&b, now);
        model_bounds(&m, D, now, &lo, &hi);
        if (c < lo || c > hi) fail_msg("window %llu at +%llu ms: count %llu not in [%llu, %llu]",
                                       (unsigned long long)D, (unsigned long long)(now - T0),
                                       (unsigned long long)c, (unsigned long long)lo, (unsigned long long)hi);
        assert_true(lb_mem_usage(&b) <= 4096);
    }
    lb_free(&b);
    free(m.t);
}

static void test_random_against_model(void **state) {
    (void)state;
    run_random(1000, 1, 20000, 5);     /* 1 s window, 0-5 ms apart: the ring wraps many times */
    run_random(1000, 2, 5000, 400);
    run_random(30000, 3, 20000, 40);
    run_random(100, 4, 20000, 3);      /* below 256 ms */
    run_random(7, 5, 5000, 2);
    run_random(3600000, 6, 5000, 20000);
}

static void test_long_idle_gap(void **state) {
    (void)state;
    lbucket b;
    assert_int_equal(lb_init(&b, 30000), LB_OK);
    for (int i = 0; i < 100; i++) assert_int_equal(lb_add(&b, T0 + (uint64_t)i * 50, 1, NULL), LB_OK);
    assert_int_equal(lb_count(&b, T0 + 5000), 100);
    uint64_t later = T0 + 10ULL * 365 * 24 * 3600 * 1000; /* ten years idle */
    assert_int_equal(lb_count(&b, later), 0);
    uint64_t count;
    assert_int_equal(lb_add(&b, later, 1, &count), LB_OK);
    assert_int_equal(count, 1);
    assert_int_equal(lb_count(&b, later + 30000), 1);
    assert_int_equal(lb_count(&b, later + 30000 + 30000 / 256), 0);
    /* Exactly one window later: the old slots must not alias the new ones. */
    assert_int_equal(lb_add(&b, later + 30000 + 117 * 2, 5, &count), LB_OK);
    assert_int_equal(count, 5);
    lb_free(&b);
}

static void test_backwards_clock(void **state) {
    (void)state;
    const uint64_t D = 10000, step = 5000;
    lbucket b;
    assert_int_equal(lb_init(&b, D), LB_OK);
    uint64_t t1 = T0;
    assert_int_equal(lb_add(&b, t1, 1, NULL), LB_OK);
    /* The clock steps back: counting goes on, nothing negative, nothing dropped. */
    uint64_t back = t1 - step;
    uint64_t count;
    assert_int_equal(lb_add(&b, back, 1, &count), LB_OK);
    assert_int_equal(count, 2);
    assert_int_equal(lb_count(&b, back), 2);
    assert_int_equal(lb_count(&b, 0), 2);
    /* Real time `back + D` is D after the second visit: it must still count. */
    assert_int_equal(lb_count(&b, back + D), 2);
    /* Decay is paused for at most the step: both are gone once the clock has
     * passed t1 + D + D/256, i.e. back + step + D + D/256. */
    assert_int_equal(lb_count(&b, t1 + D + D / 256), 0);
    assert_int_equal(b.last_ms, t1);
    /* A late duplicate of an old time neither lowers last_ms nor the count. */
    assert_int_equal(lb_add(&b, t1 - 1, 0, &count), LB_OK);
    assert_int_equal(b.last_ms, t1);
    lb_free(&b);
}

static void test_counts_near_limit(void **state) {
    (void)state;
    lbucket b;
    assert_int_equal(lb_init(&b, 60000), LB_OK);
    uint64_t count;
    assert_int_equal(lb_add(&b, T0, UINT32_MAX - 1, &count), LB_OK);
    assert_int_equal(count, UINT32_MAX - 1);
    assert_int_equal(lb_add(&b, T0, 1, &count), LB_OK);
    assert_int_equal(count, UINT32_MAX);
    /* The slot is full: refused, and nothing changed. */
    lbucket before = b;
    assert_int_equal(lb_add(&b, T0 + 1, 1, &count), LB_ERR_FULL);
    assert_int_equal(b.total, before.total);
    assert_int_equal(b.last_ms, before.last_ms);
    assert_int_equal(lb_count(&b, T0 + 1), UINT32_MAX);
    /* The next slot takes more: the total passes 2^32 without wrapping. */
    assert_int_equal(lb_add(&b, T0 + 60000 / 256 + 1, UINT32_MAX, &count), LB_OK);
    assert_int_equal(count, 2ULL * UINT32_MAX);
    assert_int_equal(lb_count(&b, T0 + 1000), 2ULL * UINT32_MAX);
    assert_int_equal(lb_add(&b, LB_MAX_TIME_MS + 1, 1, NULL), LB_ERR_RANGE);
    lb_free(&b);
}

static void test_remove_refund(void **state) {
    (void)state;
    lbucket b;
    assert_int_equal(lb_init(&b, 10000), LB_OK);
    assert_int_equal(lb_add(&b, T0, 3, NULL), LB_OK);
    assert_int_equal(lb_add(&b, T0 + 1000, 2, NULL), LB_OK);
    assert_int_equal(lb_remove(&b, T0 + 1000, 3), 3); /* newest first: 2 + 1 */
    assert_int_equal(lb_count(&b, T0 + 1000), 2);
    assert_int_equal(lb_remove(&b, T0 + 1000, 10), 2); /* never below empty */
    assert_int_equal(lb_count(&b, T0 + 1000), 0);
    assert_int_equal(lb_add(&b, T0 + 2000, 1, NULL), LB_OK);
    assert_int_equal(lb_count(&b, T0 + 2000), 1);
    lb_free(&b);
}

static void collect(uint64_t slot, uint32_t count, void *priv) {
    uint64_t *out = priv;
    out[out[0] * 2 + 1] = slot;
    out[out[0] * 2 + 2] = count;
    out[0]++;
}

static void test_restore_roundtrip_and_corrupt(void **state) {
    (void)state;
    lbucket b, r;
    assert_int_equal(lb_init(&b, 5000), LB_OK);
    for (int i = 0; i < 50; i++) assert_int_equal(lb_add(&b, T0 + (uint64_t)i * 97, 1 + i % 4, NULL), LB_OK);
    uint64_t slots[1 + 2 * 1000] = {0};
    lb_foreach_slot(&b, collect, slots);
    assert_int_equal(lb_init(&r, 5000), LB_OK);
    assert_int_equal(lb_restore_begin(&r, b.last_ms), LB_OK);
    for (uint64_t i = 0; i < slots[0]; i++)
        assert_int_equal(lb_restore_slot(&r, slots[1 + 2 * i], (uint32_t)slots[2 + 2 * i]), LB_OK);
    assert_int_equal(lb_restore_end(&r), LB_OK);
    for (uint64_t q = T0; q < T0 + 12000; q += 37) assert_int_equal(lb_count(&r, q), lb_count(&b, q));
    lb_free(&r);

    /* Zero count, out of order, newer than last_ms, wider than the ring. */
    assert_int_equal(lb_init(&r, 5000), LB_OK);
    assert_int_equal(lb_restore_begin(&r, T0), LB_OK);
    assert_int_equal(lb_restore_slot(&r, T0 / r.slot_ms, 0), LB_ERR_CORRUPT);
    assert_int_equal(lb_restore_slot(&r, T0 / r.slot_ms + 1, 1), LB_ERR_CORRUPT);
    assert_int_equal(lb_restore_slot(&r, T0 / r.slot_ms - 500, 1), LB_OK);
    assert_int_equal(lb_restore_slot(&r, T0 / r.slot_ms - 500, 1), LB_ERR_CORRUPT);
    assert_int_equal(lb_restore_slot(&r, T0 / r.slot_ms, 1), LB_ERR_CORRUPT);
    lb_free(&r);
    assert_int_equal(lb_restore_begin(&r, LB_MAX_TIME_MS + 1), LB_ERR_RANGE);
    lb_free(&b);
}

static void test_copy_and_next_expiry(void **state) {
    (void)state;
    lbucket b, c;
    assert_int_equal(lb_init(&b, 2560), LB_OK); /* w = 10 */
    assert_int_equal(lb_add(&b, 1000, 1, NULL), LB_OK);
    assert_int_equal(lb_add(&b, 1500, 1, NULL), LB_OK);
    assert_int_equal(lb_next_expiry(&b, 1500), 1010 + 2560);
    assert_int_equal(lb_next_expiry(&b, 1010 + 2560), 1510 + 2560);
    assert_int_equal(lb_copy(&c, &b), LB_OK);
    assert_ptr_not_equal(c.ring, b.ring);
    assert_int_equal(lb_add(&b, 1600, 1, NULL), LB_OK);
    assert_int_equal(lb_count(&c, 1600), 2);
    assert_int_equal(lb_count(&b, 1600), 3);
    lb_free(&b);
    lb_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_ranges),
        cmocka_unit_test(test_exact_edges_slot_start),
        cmocka_unit_test(test_exact_edges_any_offset),
        cmocka_unit_test(test_random_against_model),
        cmocka_unit_test(test_long_idle_gap),
        cmocka_unit_test(test_backwards_clock),
        cmocka_unit_test(test_counts_near_limit),
        cmocka_unit_test(test_remove_refund),
        cmocka_unit_test(test_restore_roundtrip_and_corrupt),
        cmocka_unit_test(test_copy_and_next_expiry),
    };
    return cmocka_run_group_tests_name("bucket", tests, NULL, NULL);
}
