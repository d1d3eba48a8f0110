/* SPDX-License-Identifier: BSD-3-Clause */
/* test_keyslot.c -- unit tests of core/keyslot.c: CRC16-XMODEM and the hash
 * slots (hash tags included) that the Redis Cluster specification lists. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "keyslot.h"

static void test_keyslot(void **state) {
    (void)state;
    assert_int_equal(keyslot_crc16("123456789", 9), 0x31C3); /* the CRC16-XMODEM check value */
    assert_int_equal(keyslot_of("somekey", 7), 11058);       /* CLUSTER KEYSLOT examples */
    assert_int_equal(keyslot_of("foo{hash_tag}", 13), 2515);
    assert_int_equal(keyslot_of("{hash_tag}", 10), 2515);
    assert_int_equal(keyslot_of("{user1000}.following", 20), keyslot_of("user1000", 8));
    assert_int_equal(keyslot_of("foo{}{bar}", 10), keyslot_crc16("foo{}{bar}", 10) & 16383);
    assert_int_equal(keyslot_of("foo{{bar}}zap", 13), keyslot_of("{bar", 4));
    assert_int_equal(keyslot_of("mcap:captcha::{site}", 20), keyslot_of("site", 4));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyslot),
    };
    return cmocka_run_group_tests_name("keyslot", tests, NULL, NULL);
}
