/* SPDX-License-Identifier: BSD-3-Clause */
/* lock.h -- leased locks and counting semaphores with fencing tokens.
 *
 * A lock has `permits` slots (1: a mutex; N: a semaphore). Each holder has an
 * owner token (any bytes the client picks), an absolute lease end in Unix
 * milliseconds, a reentrancy count and the fencing token of its grant. A lease
 * that has ended no longer holds anything.
 *
 * Lock-delay (Burrows, "The Chubby lock service", OSDI 2006, section 2.4; Consul's
 * session LockDelay): a grant may carry a delay d in ms. When its hold ends
 * without a release -- the lease ran out, or its session's connection closed --
 * its permit stays taken by nobody for d ms more, so a holder that stalled past
 * its lease can notice before the next holder acts. Only that permit: other
 * permits of a semaphore, or shared holds beside a reader's lock-delay, stay
 * available to anyone, the old owner included (as new grants, new tokens). Such a permit is a holder
 * entry with count 0 (a "lock-delay slot"): it keeps the owner and token it
 * had, matches no owner (release, extend and reentry ignore it), and ends at
 * expires_ms like a lease. A release by the owner frees the permit at once.
 *
 * Weighted permits (Redisson's RSemaphore.acquire(n)): a grant on a semaphore may
 * take several permits at once (`weight`); it fits when the weights of every
 * entry plus its own do not exceed `permits`. It is all or nothing: a request
 * never holds part of its permits, and (served first come first served by the
 * glue) a large request at the head of the queue is not overtaken by smaller
 * ones behind it, which therefore cannot starve it.
 *
 * Read-write lock: a lock of one permit may instead be held by many shared
 * ("read") holders at once, up to LOCK_MAX_PERMITS; an exclusive ("write")
 * grant -- every plain grant is one -- needs no holder at all. An owner holding
 * exclusively may re-enter shared (read inside write, counted on its exclusive
 * hold); an owner holding shared may not re-enter exclusively (write inside
 * read would wait for itself: LOCK_UPGRADE). Writers are not starved by readers
 * because the glue serves waiters first come first served and lets nobody pass
 * the queue (server/waitq.h): readers that come after a waiting writer wait.
 *
 * Semaphore pool (Redisson's RSemaphore.addPermits, drainPermits,
 * availablePermits): acquirers keep passing the semaphore's base size
 * (`permits`); the lock keeps a signed adjustment `adjust`, and the pool's size
 * is permits + adjust, clamped to 0..LOCK_MAX_PERMITS (lock_size). Adding
 * permits changes the adjustment; draining takes every permit free now out of
 * the pool (the adjustment drops by that many), owned by nobody, until permits
 * are added back. Lowering the size below the permits taken takes nothing
 * from the holders: no grant is made until taken < size again. Not for a
 * concurrency limit nor a read-write lock's readers (lock_check).
 *
 * Fencing tokens (Kleppmann, "How to do distributed locking", 2016): every grant
 * gets a number larger than any the lock gave before, so a resource can refuse
 * a writer whose token is older than one it has seen. The lock keeps the last
 * token it issued (persisted with it) and the caller passes a floor -- the
 * clock in microseconds, raised by a margin after a failover -- so tokens keep
 * growing even when the key was deleted or a grant was lost with a primary.
 *
 * Pure C, no Redis include; unit-tested in tests/unit/test_lock.c. */
#ifndef MC_LOCK_H
#define MC_LOCK_H

#include <stddef.h>
#include <stdint.h>

#define LOCK_MAX_PERMITS 1024
#define LOCK_MAX_OWNER_BYTES 256
#define LOCK_MAX_LEASE_MS (1ULL << 40)
#define LOCK_MAX_TOKEN (1ULL << 62) /* tokens stay below this (µs clock: year ~148,000) */

typedef struct lock_holder {
    char *owner;          /* owner token, owner_len bytes (not NUL-terminated) */
    uint16_t owner_len;   /* 1..LOCK_MAX_OWNER_BYTES */
    uint16_t shared;      /* 1: a shared (read) hold of a read-write lock; 0: exclusive */
    uint32_t count;       /* reentrant acquisitions still to release, >= 1; 0: a lock-delay slot */
    uint32_t weight;      /* permits this entry takes, 1..LOCK_MAX_PERMITS */
    uint64_t expires_ms;  /* lease end (a lock-delay slot: the delay's end), Unix ms */
    uint64_t token;       /* fencing token of this grant */
    uint64_t delay_ms;    /* lock-delay of this grant, ms (0: none; <= LOCK_MAX_LEASE_MS) */
    uint64_t client_id;   /* session mode: the owner's connection; 0 = none (never persisted) */
    uint64_t granted_ms;  /* when lock_acquire granted it, Unix ms; 0 = not known here (restored,
                           * replicated); for the hold-time metric, never persisted */
} lock_holder;

typedef struct lockv {
    uint32_t permits;     /* 1..LOCK_MAX_PERMITS */
    uint32_t ephemeral;   /* 1: a concurrency limit, deleted once nobody holds it */
    uint32_t nholders;    /* <= permits, except after permits was lowered */
    int32_t adjust;       /* semaphore pool adjustment: the size is permits + adjust, clamped to
                           * 0..LOCK_MAX_PERMITS (lock_size); -LOCK_MAX_PERMITS..LOCK_MAX_PERMITS,
                           * 0 on a concurrency limit or a lock with readers */
    uint64_t last_token;  /* the last fencing token issued; never decreases */
    lock_holder *holders; /* nholders entries */
    void *lease;          /* owned by the glue (lock/leases.c): this value's lease timer while
                           * held; NULL in a new value or a copy; never persisted */
} lockv;

typedef enum lock_outcome {
    LOCK_GRANTED,   /* a new holder */
    LOCK_EXHAUSTED, /* the lock's tokens reached LOCK_MAX_TOKEN: no grant can get a larger one */
    LOCK_REENTERED, /* the same owner again (reentrant): count + 1, lease renewed */
    LOCK_BUSY,      /* no permit free */
    LOCK_OWNED,     /* the owner holds it already and did not ask for reentrancy */
    LOCK_UPGRADE,   /* the owner holds it shared and asked (reentrant) for it exclusively */
    LOCK_MORE,      /* the owner re-entered asking for more permits (TAKE) than it holds */
} lock_outcome;

/* What an acquire asks for. */
typedef struct lock_grant {
    uint64_t lease_ms;
    uint64_t delay_ms;  /* lock-delay (0: none) */
    uint64_t client_id; /* session mode: the owner's connection (0: none) */
    int reentrant;
    int shared;         /* a shared (read) hold; only on a lock of one permit */
    uint32_t weight;    /* permits to take at once (0 means 1); a reentry keeps its grant's,
                         * and may not ask for more (LOCK_MORE) */
} lock_grant;

lockv *lock_new(uint32_t permits);
void lock_free(lockv *l);
lockv *lock_dup(const lockv *l);

/* Apply the passage of time up to now_ms: a lease that ended at or before it
 * becomes a lock-delay slot (until its end + its delay) or, without a delay,
 * is dropped; a lock-delay slot that ended is dropped. Returns how many entries
 * changed (0: nothing did); *leases_ended (may be NULL) gets how many of them
 * were leases of holders (count >= 1) ending. */
uint32_t lock_expire(lockv *l, uint64_t now_ms, uint32_t *leases_ended);

/* End holder i's hold at end_ms without a release (its session closed): with a
 * lock-delay it becomes a lock-delay slot until end_ms + delay, otherwise it is
 * removed. */
void lock_end_hold(lockv *l, uint32_t i, uint64_t end_ms);

/* Index of the holder with this owner (lock-delay slots are nobody's), or -1. */
int lock_find(const lockv *l, const char *owner, size_t len);

/* Acquire for `owner` at now_ms as `g` asks. A new grant's token is
 * max(last_token + 1, token_floor), stored in *token, and its granted_ms is
 * now_ms (a reentry keeps both, its delay and its mode, and renews the lease).
 * The caller has applied the time first (lock_expire). */
lock_outcome lock_acquire(lockv *l, const char *owner, size_t len, uint64_t now_ms, const lock_grant *g,
                          uint64_t token_floor, uint64_t *token);

/* Release one acquisition of `owner`. Returns the count still held (0: the
 * permit is free), or -1 when `owner` holds nothing. */
int lock_release(lockv *l, const char *owner, size_t len);

/* Renew `owner`'s lease to end lease_ms after now_ms. 0, or -1 when not held. */
int lock_extend(lockv *l, const char *owner, size_t len, uint64_t now_ms, uint64_t lease_ms);

/* Add a holder as persisted (restore); checks sizes. count 0 (a lock-delay
 * slot) only when `delay_slots_ok` (formats that carry lock-delays); a live
 * holder's owner must be unique among live holders. The holder is exclusive,
 * of weight 1: the loaders set shared and weight after (then lock_check). 0 or
 * -1. */
int lock_restore_holder(lockv *l, const char *owner, size_t len, uint64_t expires_ms, uint32_t count,
                        uint64_t token, uint64_t delay_ms, int delay_slots_ok);

/* The earliest end of a lease or lock-delay slot, or 0 when there is none. */
uint64_t lock_next_expiry(const lockv *l);

/* When entry h stops taking a permit, as seen at now_ms without changing
 * anything: its expires_ms, except for a lease that ended at or before now_ms
 * with a lock-delay still to run (lock_expire not applied yet): that delay's
 * end. At or before now_ms: the permit is free. */
uint64_t lock_entry_end(const lock_holder *h, uint64_t now_ms);

/* Entries (holders, lock-delays) that take permits at now_ms: those whose
 * lock_entry_end is after now_ms. */
uint32_t lock_live_holders(const lockv *l, uint64_t now_ms);

/* Permits taken at now_ms: the weights of those entries. */
uint32_t lock_taken(const lockv *l, uint64_t now_ms);

/* The pool's size: permits + adjust, clamped to 0..LOCK_MAX_PERMITS. */
uint32_t lock_size(const lockv *l);

/* Permits free at now_ms: lock_size minus lock_taken, never below 0. */
uint32_t lock_available(const lockv *l, uint64_t now_ms);

/* Change the pool's size by delta (negative: smaller), through the adjustment,
 * first brought to lock_size - permits (the clamp made exact). 0, or -1 with
 * nothing changed when the new size would leave 0..LOCK_MAX_PERMITS. Lowering
 * the size below the permits taken is allowed (holders keep theirs). */
int lock_add_permits(lockv *l, int64_t delta);

/* Take every permit available at now_ms out of the pool (lock_available of
 * them: the size drops to the permits taken). Returns how many. The caller has
 * applied the time first (lock_expire). */
uint32_t lock_drain(lockv *l, uint64_t now_ms);

/* Whether any entry has a lock-delay (set, or running as a slot). */
int lock_has_delays(const lockv *l);

/* A restored lock makes sense beyond each holder: every lock-delay slot (count
 * 0) has its delay, and a concurrency limit (ephemeral) has none (else
 * LOCK_BAD_DELAY); shared holders only on a lock of one permit that is no
 * concurrency limit, with no exclusive entry beside them (else
 * LOCK_BAD_SHARED); every weight from 1 to permits, and above 1 only on a
 * semaphore that is no concurrency limit (else LOCK_BAD_WEIGHT); an adjustment
 * in -LOCK_MAX_PERMITS..LOCK_MAX_PERMITS, and 0 on a concurrency limit and
 * beside shared holders (else LOCK_BAD_ADJUST). 0 when it does. */
#define LOCK_BAD_DELAY 1
#define LOCK_BAD_SHARED 2
#define LOCK_BAD_WEIGHT 3
#define LOCK_BAD_ADJUST 4
int lock_check(const lockv *l);

size_t lock_mem_usage(const lockv *l);

#endif
