/* fencing.h -- where the lock family's fencing tokens come from.
 *
 * A grant's token is max(the key's last token + 1, fencing_floor(now)): above the
 * clock in microseconds (so tokens grow across restarts and deleted keys), above
 * every token this process has issued or loaded (the clock has millisecond
 * resolution on Redis 7.0), and, after this node was promoted to primary, above
 * its clock plus a margin (grants its old primary made but never replicated may
 * have used tokens up to that primary's clock). core/lock.h applies it. */
#ifndef MC_LOCK_FENCING_H
#define MC_LOCK_FENCING_H

#include <stdint.h>

/* The smallest token a new grant may take at now_us (Unix microseconds). */
uint64_t fencing_floor(uint64_t now_us);

/* A token was issued, loaded or replicated here: later floors go above it. */
void fencing_saw(uint64_t token);

/* This node became a primary at now_us: tokens start beyond its clock + margin. */
void fencing_promoted(uint64_t now_us);

#endif
