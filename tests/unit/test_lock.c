/* SPDX-License-Identifier: BSD-3-Clause */
/* test_lock.c -- unit tests of the lock core (src/core/lock.c): grants, leases,
 * reentrancy, semaphores, fencing tokens, lock-delays, restore checks and the
 * semaphore pool's adjustment (add, drain, available). */
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
    lock_grant g = {.lease_ms = lease, .reentrant = reentrant};
    return lock_acquire(l, owner, strlen(owner), now, &g, US(now), token);
}

static lock_outcome acq_delay(lockv *l, const char *owner, uint64_t now, uint64_t lease, uint64_t delay,
                              uint64_t *token) {
    lock_grant g = {.lease_ms = lease, .delay_ms = delay};
    return lock_acquire(l, owner, strlen(owner), now, &g, US(now), token);
}

/* shared 1: READ, 0: WRITE */
static lock_outcome acq_rw(lockv *l, const char *owner, uint64_t now, int shared, int reentrant, uint64_t *token) {
    lock_grant g = {.lease_ms = 1000, .shared = shared, .reentrant = reentrant};
    return lock_acquire(l, owner, strlen(owner), now, &g, US(now), token);
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
    assert_int_equal(lock_expire(l, NOW + 299, NULL), 0);
    uint32_t ended = 9;
    assert_int_equal(lock_expire(l, NOW + 300, &ended), 1);
    assert_int_equal(ended, 1);
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
    lock_grant g = {.lease_ms = 10};
    assert_int_equal(lock_acquire(l, "a", 1, NOW, &g, US(NOW) + 10000000, &t), LOCK_GRANTED);
    assert_int_equal(t, US(NOW) + 10000000);
    lock_release(l, "a", 1);
    /* A clock behind the last token: last_token + 1. */
    assert_int_equal(lock_acquire(l, "a", 1, NOW - 5000, &g, US(NOW - 5000), &t), LOCK_GRANTED);
    assert_int_equal(t, US(NOW) + 10000001);
    lock_free(l);
}

static void test_restore_checks(void **state) {
    (void)state;
    lockv *l = lock_new(2);
    l->last_token = 100;
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 1, 50, 0, 0), 0);
    assert_int_equal(l->holders[0].granted_ms, 0); /* not known: not persisted */
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 1, 60, 0, 0), -1);   /* duplicate owner */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 0, 60, 0, 0), -1);   /* count 0 */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 1, 101, 0, 0), -1);  /* token above last */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 1, 0, 0, 0), -1);    /* token 0 */
    assert_int_equal(lock_restore_holder(l, "", 0, NOW, 1, 1, 0, 0), -1);     /* empty owner */
    char big[LOCK_MAX_OWNER_BYTES + 1];
    memset(big, 'x', sizeof(big));
    assert_int_equal(lock_restore_holder(l, big, sizeof(big), NOW, 1, 1, 0, 0), -1);
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 3, 100, 0, 0), 0);
    assert_int_equal(l->nholders, 2);
    lock_free(l);
}

/* A lease that ends with a lock-delay leaves its permit taken by nobody until
 * the lease end + the delay, whenever the end is noticed; a release does not. */
static void test_lock_delay_after_lease_end(void **state) {
    (void)state;
    lockv *l = lock_new(1);
    uint64_t t1, t2;
    assert_int_equal(acq_delay(l, "a", NOW, 300, 1000, &t1), LOCK_GRANTED);
    assert_int_equal(l->holders[0].delay_ms, 1000);
    /* seen late (timer lag): the delay still runs from the lease end */
    assert_int_equal(lock_entry_end(&l->holders[0], NOW + 200), NOW + 300);
    assert_int_equal(lock_entry_end(&l->holders[0], NOW + 500), NOW + 1300);
    assert_int_equal(lock_live_holders(l, NOW + 500), 1);
    uint32_t ended = 0;
    assert_int_equal(lock_expire(l, NOW + 500, &ended), 1);
    assert_int_equal(ended, 1);
    assert_int_equal(l->nholders, 1);
    assert_int_equal(l->holders[0].count, 0);          /* a lock-delay slot */
    assert_int_equal(l->holders[0].expires_ms, NOW + 1300);
    assert_int_equal(lock_next_expiry(l), NOW + 1300);
    assert_int_equal(lock_find(l, "a", 1), -1);          /* nobody's: no release, extend or reentry */
    assert_int_equal(lock_release(l, "a", 1), -1);
    assert_int_equal(lock_extend(l, "a", 1, NOW + 500, 1000), -1);
    assert_int_equal(acq_delay(l, "b", NOW + 1299, 300, 0, &t2), LOCK_BUSY);
    assert_int_equal(acq_delay(l, "a", NOW + 1299, 300, 0, &t2), LOCK_BUSY);
    assert_int_equal(lock_expire(l, NOW + 1299, &ended), 0);
    assert_int_equal(lock_expire(l, NOW + 1300, &ended), 1);
    assert_int_equal(ended, 0);                          /* a slot ending is no lease ending */
    assert_int_equal(l->nholders, 0);
    assert_int_equal(acq_delay(l, "b", NOW + 1300, 300, 0, &t2), LOCK_GRANTED);
    assert_true(t2 > t1);
    /* noticed after the delay too: dropped in one step */
    assert_int_equal(lock_release(l, "b", 1), 0);
    assert_int_equal(acq_delay(l, "c", NOW + 2000, 100, 50, &t2), LOCK_GRANTED);
    assert_int_equal(lock_expire(l, NOW + 2150, &ended), 1);
    assert_int_equal(ended, 1);
    assert_int_equal(l->nholders, 0);
    /* a release frees the permit at once, delay or not */
    assert_int_equal(acq_delay(l, "d", NOW + 3000, 100, 5000, &t2), LOCK_GRANTED);
    assert_int_equal(lock_release(l, "d", 1), 0);
    assert_int_equal(l->nholders, 0);
    lock_free(l);
}

/* A hold ended without a release at a given time (a session closed) starts its
 * lock-delay there; without a delay it frees the permit. In a semaphore only
 * that permit stays taken, and the owner may take another. */
static void test_lock_delay_end_hold_and_semaphore(void **state) {
    (void)state;
    lockv *l = lock_new(2);
    uint64_t t;
    assert_int_equal(acq_delay(l, "a", NOW, 10000, 700, &t), LOCK_GRANTED);
    assert_int_equal(acq_delay(l, "b", NOW, 10000, 0, &t), LOCK_GRANTED);
    lock_end_hold(l, 0, NOW + 100);
    assert_int_equal(l->nholders, 2);
    assert_int_equal(l->holders[0].count, 0);
    assert_int_equal(l->holders[0].expires_ms, NOW + 800);
    lock_end_hold(l, 1, NOW + 100);                      /* no delay: gone */
    assert_int_equal(l->nholders, 1);
    assert_int_equal(lock_live_holders(l, NOW + 100), 1);
    assert_int_equal(acq_delay(l, "a", NOW + 100, 1000, 0, &t), LOCK_GRANTED); /* the other permit */
    assert_int_equal(acq_delay(l, "c", NOW + 100, 1000, 0, &t), LOCK_BUSY);
    assert_int_equal(lock_find(l, "a", 1), 1);
    assert_int_equal(lock_check(l), 0);
    assert_int_equal(lock_has_delays(l), 1);
    lockv *d = lock_dup(l);
    assert_int_equal(d->holders[0].count, 0);
    assert_int_equal(d->holders[0].delay_ms, 700);
    lock_free(d);
    lock_free(l);
}

/* Read-write: readers share, a writer excludes everyone; read inside write
 * re-enters the write hold, write inside read is refused as an upgrade; a
 * lapsed reader's lock-delay keeps writers out but not readers. */
static void test_read_write(void **state) {
    (void)state;
    lockv *l = lock_new(1);
    uint64_t t1, t2, t;
    assert_int_equal(acq_rw(l, "r1", NOW, 1, 0, &t1), LOCK_GRANTED);
    assert_int_equal(acq_rw(l, "r2", NOW, 1, 0, &t2), LOCK_GRANTED);
    assert_true(t2 > t1);
    assert_int_equal(l->nholders, 2);
    assert_int_equal(acq_rw(l, "w", NOW, 0, 0, &t), LOCK_BUSY);
    assert_int_equal(acq_rw(l, "r1", NOW, 0, 1, &t), LOCK_UPGRADE);  /* write inside read */
    assert_int_equal(acq_rw(l, "r1", NOW, 0, 0, &t), LOCK_OWNED);
    assert_int_equal(acq_rw(l, "r1", NOW, 1, 1, &t), LOCK_REENTERED);
    assert_int_equal(t, t1);
    assert_int_equal(lock_check(l), 0);
    assert_int_equal(lock_release(l, "r1", 2), 1);
    assert_int_equal(lock_release(l, "r1", 2), 0);
    assert_int_equal(acq_rw(l, "w", NOW, 0, 0, &t), LOCK_BUSY);       /* r2 still reads */
    assert_int_equal(lock_release(l, "r2", 2), 0);
    assert_int_equal(acq_rw(l, "w", NOW, 0, 0, &t), LOCK_GRANTED);
    lock_free(l);

    l = lock_new(1);
    assert_int_equal(acq_rw(l, "w", NOW, 0, 0, &t1), LOCK_GRANTED);
    assert_int_equal(acq_rw(l, "r", NOW, 1, 0, &t), LOCK_BUSY);
    assert_int_equal(acq_rw(l, "w", NOW, 1, 1, &t), LOCK_REENTERED);  /* read inside write */
    assert_int_equal(l->nholders, 1);
    assert_int_equal(l->holders[0].count, 2);
    assert_int_equal(l->holders[0].shared, 0);
    assert_int_equal(lock_release(l, "w", 1), 1);
    assert_int_equal(lock_release(l, "w", 1), 0);
    /* a reader's lock-delay: other readers may come, a writer may not */
    lock_grant g = {.lease_ms = 100, .delay_ms = 1000, .shared = 1};
    assert_int_equal(lock_acquire(l, "r", 1, NOW, &g, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_expire(l, NOW + 100, NULL), 1);
    assert_int_equal(l->holders[0].count, 0);
    assert_int_equal(l->holders[0].shared, 1);
    assert_int_equal(acq_rw(l, "w", NOW + 100, 0, 0, &t), LOCK_BUSY);
    assert_int_equal(acq_rw(l, "r2", NOW + 100, 1, 0, &t), LOCK_GRANTED);
    /* a semaphore has no shared holders */
    lockv *sem = lock_new(3);
    assert_int_equal(acq_rw(sem, "r", NOW, 1, 0, &t), LOCK_BUSY);
    lock_free(sem);
    /* restore checks: shared beside exclusive, or on a semaphore, is refused */
    l->holders[1].shared = 0;
    assert_int_equal(lock_check(l), LOCK_BAD_SHARED);
    l->holders[1].shared = 1;
    l->permits = 2;
    assert_int_equal(lock_check(l), LOCK_BAD_SHARED);
    l->permits = 1;
    assert_int_equal(lock_check(l), 0);
    lockv *d = lock_dup(l);
    assert_int_equal(d->holders[0].shared + d->holders[1].shared, 2);
    lock_free(d);
    lock_free(l);
}

/* Weighted permits: a grant takes k of n permits, all or none; a reentry keeps
 * its weight; a lock-delay keeps the weight it had. */
static void test_weighted_permits(void **state) {
    (void)state;
    lockv *l = lock_new(5);
    uint64_t t;
    lock_grant g3 = {.lease_ms = 100, .weight = 3, .delay_ms = 1000};
    lock_grant g2 = {.lease_ms = 1000, .weight = 2, .reentrant = 1};
    lock_grant g1 = {.lease_ms = 1000};
    assert_int_equal(lock_acquire(l, "a", 1, NOW, &g3, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_taken(l, NOW), 3);
    assert_int_equal(lock_acquire(l, "b", 1, NOW, &g2, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_taken(l, NOW), 5);
    assert_int_equal(lock_acquire(l, "c", 1, NOW, &g1, US(NOW), &t), LOCK_BUSY);
    assert_int_equal(lock_acquire(l, "b", 1, NOW, &g2, US(NOW), &t), LOCK_REENTERED);
    assert_int_equal(lock_taken(l, NOW), 5);                       /* a reentry takes nothing more */
    lock_grant g3r = {.lease_ms = 1000, .weight = 3, .reentrant = 1};
    assert_int_equal(lock_acquire(l, "b", 1, NOW, &g3r, US(NOW), &t), LOCK_MORE); /* nor may ask for more */
    assert_int_equal(l->holders[1].count, 2);
    assert_int_equal(lock_release(l, "b", 1), 1);
    assert_int_equal(lock_release(l, "b", 1), 0);
    assert_int_equal(lock_taken(l, NOW), 3);
    assert_int_equal(lock_acquire(l, "c", 1, NOW, &g2, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_acquire(l, "d", 1, NOW, &g1, US(NOW), &t), LOCK_BUSY);
    /* a's lease ends into its lock-delay, still taking 3 */
    assert_int_equal(lock_expire(l, NOW + 100, NULL), 1);
    assert_int_equal(l->holders[0].count, 0);
    assert_int_equal(lock_taken(l, NOW + 100), 5);
    assert_int_equal(lock_check(l), 0);
    lockv *d = lock_dup(l);
    assert_int_equal(d->holders[0].weight, 3);
    lock_free(d);
    l->holders[1].weight = 6;                                      /* above the permits */
    assert_int_equal(lock_check(l), LOCK_BAD_WEIGHT);
    l->holders[1].weight = 2;
    l->ephemeral = 1;                                              /* a concurrency limit: weight 1 */
    assert_int_equal(lock_check(l), LOCK_BAD_DELAY);
    lock_free(l);
}

/* The pool: the size is permits + adjust (clamped); adding changes the
 * adjustment, draining takes what is free, lowering below taken takes nothing
 * from holders; lock-delay slots count as taken. */
static void test_semaphore_pool(void **state) {
    (void)state;
    lockv *l = lock_new(3);
    uint64_t t;
    lock_grant g1 = {.lease_ms = 1000};
    lock_grant g2 = {.lease_ms = 100, .weight = 2, .delay_ms = 500};
    assert_int_equal(lock_size(l), 3);
    assert_int_equal(lock_add_permits(l, 2), 0);
    assert_int_equal(l->adjust, 2);
    assert_int_equal(lock_size(l), 5);
    assert_int_equal(lock_acquire(l, "a", 1, NOW, &g2, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_available(l, NOW), 3);
    assert_int_equal(lock_drain(l, NOW), 3);                       /* the size drops to the 2 taken */
    assert_int_equal(lock_size(l), 2);
    assert_int_equal(l->adjust, -1);
    assert_int_equal(lock_available(l, NOW), 0);
    assert_int_equal(lock_acquire(l, "b", 1, NOW, &g1, US(NOW), &t), LOCK_BUSY);
    assert_int_equal(lock_drain(l, NOW), 0);
    /* lowering below the taken: allowed, holders keep theirs, no grant */
    assert_int_equal(lock_add_permits(l, -2), 0);
    assert_int_equal(lock_size(l), 0);
    assert_int_equal(lock_available(l, NOW), 0);
    assert_int_equal(lock_add_permits(l, -1), -1);                 /* below 0: refused, unchanged */
    assert_int_equal(l->adjust, -3);
    assert_int_equal(lock_add_permits(l, LOCK_MAX_PERMITS + 1), -1);
    assert_int_equal(lock_add_permits(l, 3), 0);                   /* size 3, 2 taken */
    assert_int_equal(lock_acquire(l, "b", 1, NOW, &g1, US(NOW), &t), LOCK_GRANTED);
    assert_int_equal(lock_acquire(l, "c", 1, NOW, &g1, US(NOW), &t), LOCK_BUSY);
    /* a's lease ends into its lock-delay: its 2 permits stay taken */
    lock_expire(l, NOW + 100, NULL);
    assert_int_equal(lock_available(l, NOW + 100), 0);
    assert_int_equal(lock_available(l, NOW + 600), 2);
    assert_int_equal(lock_check(l), 0);
    lockv *d = lock_dup(l);
    assert_int_equal(d->adjust, 0);
    lock_free(d);
    /* the clamp: a base size changed under an adjustment */
    l->permits = 2;
    l->adjust = -3;
    assert_int_equal(lock_size(l), 0);
    assert_int_equal(lock_add_permits(l, 1), 0);                  /* from the clamped size 0 */
    assert_int_equal(lock_size(l), 1);
    assert_int_equal(l->adjust, -1);
    l->adjust = LOCK_MAX_PERMITS;
    assert_int_equal(lock_size(l), LOCK_MAX_PERMITS);
    assert_int_equal(lock_check(l), 0);
    l->adjust = LOCK_MAX_PERMITS + 1;
    assert_int_equal(lock_check(l), LOCK_BAD_ADJUST);
    l->adjust = 1;
    l->ephemeral = 1;                                              /* a concurrency limit: none */
    l->holders[0].delay_ms = 0;
    l->holders[0].count = 1;
    l->holders[0].weight = 1;
    assert_int_equal(lock_check(l), LOCK_BAD_ADJUST);
    lock_free(l);
    /* readers: no adjustment beside them, and no READ grant under one */
    l = lock_new(1);
    assert_int_equal(acq_rw(l, "r", NOW, 1, 0, &t), LOCK_GRANTED);
    l->adjust = 1;
    assert_int_equal(lock_check(l), LOCK_BAD_ADJUST);
    assert_int_equal(acq_rw(l, "s", NOW, 1, 0, &t), LOCK_BUSY);
    lock_free(l);
}

static void test_restore_lock_delays(void **state) {
    (void)state;
    lockv *l = lock_new(2);
    l->last_token = 100;
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 0, 50, 500, 0), -1);     /* slot: format without delays */
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 0, 50, 500, 1), 0);
    assert_int_equal(lock_restore_holder(l, "a", 1, NOW, 1, 60, 0, 1), 0);        /* a live hold beside its slot */
    assert_int_equal(lock_restore_holder(l, "b", 1, NOW, 1, 60, LOCK_MAX_LEASE_MS + 1, 1), -1);
    assert_int_equal(lock_check(l), 0);
    l->holders[0].delay_ms = 0;
    assert_int_equal(lock_check(l), LOCK_BAD_DELAY);                       /* a slot without its delay */
    l->holders[0].delay_ms = 500;
    l->ephemeral = 1;
    assert_int_equal(lock_check(l), LOCK_BAD_DELAY);                       /* concurrency limits have none */
    lock_free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutex),
        cmocka_unit_test(test_leases_end),
        cmocka_unit_test(test_reentrant_and_semaphore),
        cmocka_unit_test(test_fencing_floor),
        cmocka_unit_test(test_restore_checks),
        cmocka_unit_test(test_lock_delay_after_lease_end),
        cmocka_unit_test(test_lock_delay_end_hold_and_semaphore),
        cmocka_unit_test(test_restore_lock_delays),
        cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_weighted_permits),
        cmocka_unit_test(test_semaphore_pool),
    };
    return cmocka_run_group_tests_name("lock", tests, NULL, NULL);
}
