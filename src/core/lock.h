/* lock.h -- leased locks and counting semaphores with fencing tokens.
 *
 * A lock has `permits` slots (1: a mutex; N: a semaphore). Each holder has an
 * owner token (any bytes the client picks), an absolute lease end in Unix
 * milliseconds, a reentrancy count and the fencing token of its grant. A lease
 * that has ended no longer holds anything.
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
    uint32_t owner_len;
    uint32_t count;       /* reentrant acquisitions still to release, >= 1 */
    uint64_t expires_ms;  /* lease end, Unix ms */
    uint64_t token;       /* fencing token of this grant */
    uint64_t client_id;   /* session mode: the owner's connection; 0 = none (never persisted) */
    uint64_t granted_ms;  /* when lock_acquire granted it, Unix ms; 0 = not known here (restored,
                           * replicated); for the hold-time metric, never persisted */
} lock_holder;

typedef struct lockv {
    uint32_t permits;     /* 1..LOCK_MAX_PERMITS */
    uint32_t ephemeral;   /* 1: a concurrency limit, deleted once nobody holds it */
    uint32_t nholders;    /* <= permits, except after permits was lowered */
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
} lock_outcome;

lockv *lock_new(uint32_t permits);
void lock_free(lockv *l);
lockv *lock_dup(const lockv *l);

/* Drop the holders whose lease ended at or before now_ms; returns how many. */
uint32_t lock_expire(lockv *l, uint64_t now_ms);

/* Index of the holder with this owner, or -1. */
int lock_find(const lockv *l, const char *owner, size_t len);

/* Acquire for `owner` at now_ms with a lease of lease_ms. A new grant's token is
 * max(last_token + 1, token_floor), stored in *token, and its granted_ms is
 * now_ms (a reentry keeps both). The caller has dropped ended leases first
 * (lock_expire). */
lock_outcome lock_acquire(lockv *l, const char *owner, size_t len, uint64_t now_ms, uint64_t lease_ms,
                          int reentrant, uint64_t client_id, uint64_t token_floor, uint64_t *token);

/* Release one acquisition of `owner`. Returns the count still held (0: the
 * permit is free), or -1 when `owner` holds nothing. */
int lock_release(lockv *l, const char *owner, size_t len);

/* Renew `owner`'s lease to end lease_ms after now_ms. 0, or -1 when not held. */
int lock_extend(lockv *l, const char *owner, size_t len, uint64_t now_ms, uint64_t lease_ms);

/* Add a holder as persisted (restore); checks sizes. 0 or -1. */
int lock_restore_holder(lockv *l, const char *owner, size_t len, uint64_t expires_ms, uint32_t count,
                        uint64_t token);

/* The earliest lease end, or 0 when nobody holds the lock. */
uint64_t lock_next_expiry(const lockv *l);

/* Holders whose lease has not ended at now_ms. */
uint32_t lock_live_holders(const lockv *l, uint64_t now_ms);

size_t lock_mem_usage(const lockv *l);

#endif
