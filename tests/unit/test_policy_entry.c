/* test_policy_entry.c -- unit tests of the policy table's entries
 * (src/core/policy_entry.c): last-writer-wins order, the digest hash, and the
 * bus form round trip with every truncation and bad field refused.
 *
 * SPDX-License-Identifier: BSD-3-Clause */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_entry.h"

static policy_entry live(uint64_t stamp, char node_fill, uint64_t rate) {
    policy_entry e;
    memset(&e, 0, sizeof(e));
    e.def = (policy_def){.kind = POLICY_GCRA, .rate = rate, .period_ms = 1000, .burst = 0};
    e.stamp_ms = stamp;
    memset(e.node, node_fill, POLICY_NODE_ID_LEN);
    return e;
}

static void test_order(void **state) {
    (void)state;
    policy_entry a = live(10, 'a', 5), b = live(11, 'a', 5);
    assert_true(policy_entry_cmp(&b, &a) > 0);
    assert_true(policy_entry_cmp(&a, &b) < 0);
    b = live(10, 'b', 1); /* same stamp: the larger node id */
    assert_true(policy_entry_cmp(&b, &a) > 0);
    b = live(10, 'a', 6); /* same stamp and node: the content, deterministically */
    assert_true(policy_entry_cmp(&b, &a) > 0);
    b = a;
    assert_int_equal(policy_entry_cmp(&a, &b), 0);
    policy_entry t = live(10, 'a', 5);
    memset(&t.def, 0, sizeof(t.def));
    t.deleted = 1; /* a tombstone of the same stamp and node wins */
    assert_true(policy_entry_cmp(&t, &a) > 0);
}

static void test_valid(void **state) {
    (void)state;
    policy_entry e = live(1, '0', 5);
    assert_true(policy_entry_valid(&e));
    e.node[3] = ' ';
    assert_false(policy_entry_valid(&e));
    e = live(1, '0', 0); /* rate 0 */
    assert_false(policy_entry_valid(&e));
    e = live(1, '0', 5);
    e.deleted = 1; /* a tombstone must carry no definition */
    assert_false(policy_entry_valid(&e));
    memset(&e.def, 0, sizeof(e.def));
    assert_true(policy_entry_valid(&e));
    e.deleted = 2;
    assert_false(policy_entry_valid(&e));
}

static void test_hash(void **state) {
    (void)state;
    policy_entry a = live(10, 'a', 5), b = live(10, 'a', 6);
    assert_int_equal(policy_entry_hash("x", 1, &a), policy_entry_hash("x", 1, &a));
    assert_int_not_equal(policy_entry_hash("x", 1, &a), policy_entry_hash("x", 1, &b));
    assert_int_not_equal(policy_entry_hash("x", 1, &a), policy_entry_hash("y", 1, &a));
}

static void test_wire(void **state) {
    (void)state;
    unsigned char buf[POLICY_WIRE_MAX + 8];
    policy_entry e = live(1234567890123ULL, 'f', 77), got;
    e.def.burst = 9;
    size_t n = policy_wire_put(buf, "login", 5, &e);
    assert_int_equal(n, POLICY_WIRE_FIXED + 5);
    const char *name;
    size_t len, used;
    assert_int_equal(policy_wire_get(buf, n, &name, &len, &got, &used), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(name, "login", 5);
    assert_int_equal(used, n);
    assert_int_equal(policy_entry_cmp(&e, &got), 0);
    for (size_t cut = 0; cut < n; cut++) assert_int_equal(policy_wire_get(buf, cut, &name, &len, &got, &used), -1);
    buf[0] = 0; /* name length 0 */
    buf[1] = 0;
    assert_int_equal(policy_wire_get(buf, n, &name, &len, &got, &used), -1);
    policy_wire_put(buf, "login", 5, &e);
    buf[2 + 5 + 8 + POLICY_NODE_ID_LEN + 1] = 3; /* kind 3 */
    assert_int_equal(policy_wire_get(buf, n, &name, &len, &got, &used), -1);
    policy_wire_put(buf, "login", 5, &e);
    buf[2 + 5 + 8 + POLICY_NODE_ID_LEN] = 1; /* deleted, with a definition */
    assert_int_equal(policy_wire_get(buf, n, &name, &len, &got, &used), -1);
    char big[POLICY_NAME_MAX + 1];
    memset(big, 'n', sizeof(big));
    e.def.burst = 0;
    unsigned char wide[POLICY_WIRE_MAX + 16];
    n = policy_wire_put(wide, big, POLICY_NAME_MAX, &e);
    assert_int_equal(policy_wire_get(wide, n, &name, &len, &got, &used), 0);
    n = policy_wire_put(wide, big, POLICY_NAME_MAX + 1, &e); /* too long a name is refused on read */
    assert_int_equal(policy_wire_get(wide, n, &name, &len, &got, &used), -1);
}

/* Random and mutated bytes: never read past `avail`, and whatever is accepted
 * is valid and re-encodes to exactly the bytes read. */
static void test_wire_random(void **state) {
    (void)state;
    uint64_t x = 88172645463325252ULL;
    unsigned char seed[POLICY_WIRE_MAX];
    policy_entry e = live(1700000000000ULL, 'c', 9);
    size_t seed_len = policy_wire_put(seed, "name", 4, &e);
    int accepted = 0;
    for (int round = 0; round < 200000; round++) {
        unsigned char buf[POLICY_WIRE_MAX];
        size_t n;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (round % 2) { /* the valid entry with one byte changed and a random cut */
            memcpy(buf, seed, seed_len);
            buf[x % seed_len] = (unsigned char)(x >> 20);
            n = (size_t)(x >> 40) % (seed_len + 1);
        } else {
            n = (size_t)(x % sizeof(buf));
            for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                buf[i] = (unsigned char)x;
            }
        }
        unsigned char *exact = malloc(n ? n : 1); /* so that ASan/valgrind see any read past n */
        memcpy(exact, buf, n);
        const char *name;
        size_t len, used;
        policy_entry got;
        if (policy_wire_get(exact, n, &name, &len, &got, &used) == 0) {
            accepted++;
            assert_true(used <= n);
            assert_true(policy_entry_valid(&got));
            unsigned char again[POLICY_WIRE_MAX];
            assert_int_equal(policy_wire_put(again, name, len, &got), used);
            assert_memory_equal(again, exact, used);
        }
        free(exact);
    }
    assert_true(accepted > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_wire),
        cmocka_unit_test(test_wire_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
