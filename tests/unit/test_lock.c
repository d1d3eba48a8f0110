/* test_lock.c -- unit tests of the lock core (src/core/lock.c): grants, leases,
 * reentrancy, semaphores, fencing tokens and restore checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lock.h"

#define NOW 1700000000000ULL /* Unix ms */
#define US(ms) ((ms) * 1000ULL)

static lock_outcome acq(lockv *l, const char *owner, uint64_t now, uint64_t lease, int reentrant, uint64_t *token) {
    return lock_acquire(l, owner, strlen(owner), now, lease, reentrant, 0, US(now), token);
}

static void test_mutex(void **state) {
    (void)state;
    lockv *l = lock_new(1);
    uint64_t t1, t2, t3;
    assert_int_equal(acq(l, "a", NOW, 1000, 0, &t1), LOCK_GRANTED);
    assert_int_equal(t1, US(NOW));
    assert_int_equal(acq(l, "b", NOW, 1000, 0, &t2), LOCK_BUSY);
    assert_int_equal(acq(l, "a", NOW, 1000, 0, &t2), LOCK_OWNED);
    assert_int_equal(lock_release(l, "b", 1), -1);      /* not the owner: nothing changes */
    assert_int_equal(l->nholders, 1);
    assert_int_equal(lock_extend(l, "b", 1, NOW, 5000), -1);
    assert_int_equal(lock_extend(l, "a", 1, NOW + 10, 5000), 0);
    assert_int_equal(lock_next_expiry(l), NOW + 5010);
    assert_int_equal(lock_release(l, "a", 1), 0);
    assert_int_equal(l->nholders, 0);
    /* The next grant's token is larger, even in the same microsecond. */
    assert_int_equal(acq(l, "b", NOW, 1000, 0, &t3), LOCK_GRANTED);
    assert_true(t3 > t1);
    assert_int_equal(l->last_token, t3);
    lock_free(l);
}

static void test_leases_end(void **state) {
    (void)state;
    lockv *l = lock_new(1);
    uint64_t t;
    assert_int_equal(acq(l, "a", NOW, 300, 0, &t), LOCK_GRANTED);
    assert_int_equal(lock_live_holders(l, NOW + 299), 1);
    assert_int_equal(lock_live_holders(l, NOW + 300), 0);
    assert_int_equal(lock_expire(l, NOW + 299), 0);
    assert_int_equal(lock_expire(l, NOW + 300), 1);
    assert_int_equal(acq(l, "b", NOW + 300, 300, 0, &t), LOCK_GRANTED);
    lock_free(l);
}

static void test_reentrant_and_semaphore(void **state) {
    (void)state;
    lockv *l = lock_new(3);
    uint64_t ta, ta2, t;
    assert_int_equal(acq(l, "a", NOW, 1000, 1, &ta), LOCK_GRANTED);
    assert_int_equal(l->holders[0].granted_ms, NOW);
    assert_int_equal(acq(l, "a", NOW + 500, 1000, 1, &ta2), LOCK_REENTERED);
    assert_int_equal(ta2, ta);                             /* same grant, same token */
    assert_int_equal(l->holders[0].granted_ms, NOW);       /* and the same grant time */
    assert_int_equal(l->holders[0].count, 2);
    assert_int_equal(l->holders[0].expires_ms, NOW + 1500); /* lease renewed */
    assert_int_equal(acq(l, "b", NOW, 1000, 0, &t), LOCK_GRANTED);
    assert_int_equal(acq(l, "c", NOW, 1000, 0, &t), LOCK_GRANTED);
    assert_int_equal(acq(l, "d", NOW, 1000, 0, &t), LOCK_BUSY);
    assert_int_equal(lock_release(l, "a", 1), 1);          /* still held once */
    assert_int_equal(acq(l, "d", NOW, 1000, 0, &t), LOCK_BUSY);
    assert_int_equal(lock_release(l, "a", 1), 0);
    assert_int_equal(acq(l, "d", NOW, 1000, 0, &t), LOCK_GRANTED);
    assert_true(lock_mem_usage(l) < 512);
    lockv *d = lock_dup(l);
    assert_int_equal(d->nholders, 3);
    assert_int_equal(d->last_token, l->last_token);
    assert_ptr_not_equal(d->holders[0].owner, l->holders[0].owner);
    for (uint32_t i = 0; i < 3; i++) assert_int_equal(d->holders[i].granted_ms, 0); /* not granted here */
    lock_free(d);
    lock_free(l);
}

static void test_fencing_floor(void **state) {
    (void)state;
    lockv *l = lock_new(1);
    uint64_t t;
    /* A floor far ahead (after a promotion) wins over last_token + 1. */
    assert_int_equal(lock_acquire(l, "a", 1, NOW, 10, 0, 0, US(NOW) + 10000000, &t), LOCK_GRANTED);
    assert_int_equal(t, US(NOW) + 10000000);
    lock_release(l, "a", 1);
    /* A clock behind the last token: last_token + 1. */
    assert_int_equal(lock_acquire(l, "a", 1, NOW - 5000, 10, 0, 0, US(NOW - 5000), &t), LOCK_GRANTED);
    assert_int_equal(t, US(NOW) + 10000001);
    lock_free(l);
}

static void test_restore_checks(void **state) {
    (void)state;
    lockv *l = lock_new(2);
    l->last_token = 100;
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 1, 50), 0);
    assert_int_equal(l->holders[0].granted_ms, 0); /* not known: not persisted */
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 1, 60), -1);   /* duplicate owner */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 0, 60), -1);   /* count 0 */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 1, 101), -1);  /* token above last */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 1, 0), -1);    /* token 0 */
    assert_int_equal(lock_restore_holder(l, "", 0, NOW, 1, 1), -1);     /* empty owner */
    char big[LOCK_MAX_OWNER_BYTES + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(lock_restore_holder(l, big, sizeof(big), NOW, 1, 1), -1);
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 3, 100), 0);
    assert_int_equal(l->nholders, 2);
    lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutex),
        cmocka_unit_test(test_leases_end),
        cmocka_unit_test(test_reentrant_and_semaphore),
        cmocka_unit_test(test_fencing_floor),
        cmocka_unit_test(test_restore_checks),
    };
    return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
