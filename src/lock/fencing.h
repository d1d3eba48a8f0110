/* SPDX-License-Identifier: BSD-3-Clause */
/* fencing.h -- where the lock family's fencing tokens come from.
 *
 * A grant's token is max(the key's last token + 1, fencing_floor(now)). The key's
 * last token (persisted and replicated with it) makes its tokens grow; the floor
 * makes them grow across a DEL and re-create, a restart or a failover:
 *   - the clock in microseconds;
 *   - after this node was promoted to primary, its clock plus a margin (grants its
 *     old primary made but never replicated may have used tokens up to that
 *     primary's clock); and the same at every start of the process, whatever
 *     its role: a node promoted, then restarted (kill -9 after SAVE) within the
 *     margin would otherwise fall back to its clock, below the tokens it issued
 *     since the promotion -- and deleted keys keep no last token. Starting
 *     beyond clock + margin needs nothing persisted, so it holds equally after
 *     an RDB load, an AOF load (with or without the RDB preamble) or both;
 *   - one above the highest token this process issued or loaded (the clock has
 *     millisecond resolution on Redis 7.0, so a key deleted and re-created within
 *     a millisecond would otherwise repeat a token) -- but what it learns is
 *     capped at max(the clock, the promotion floor) plus the margin when
 *     seen, unless it is the next in sequence (max seen + 1: what this node
 *     issues from its floor is always learnt in full). A token further ahead
 *     than that (a forged LOCK.STATE, a migrated counter, a primary whose clock is
 *     far off) raises its own key only: one key cannot push every key's tokens to
 *     LOCK_MAX_TOKEN. The floor therefore stays within the clock + twice the margin.
 * The margin is the config fencing-margin-ms (server/config.h; default 10 s,
 * clocks of two nodes may differ this much), read when it is used: a change
 * applies to the next start or promotion and to later caps.
 * core/lock.h applies it. */
#ifndef MC_LOCK_FENCING_H
#define MC_LOCK_FENCING_H

#include <stdint.h>

/* The smallest token a new grant may take at now_us (Unix microseconds). */
uint64_t fencing_floor(uint64_t now_us);

/* A token was issued, loaded or replicated here: later floors go above it, or
 * above the clock + the margin when it is further ahead than that. */
void fencing_saw(uint64_t token);

/* This node became a primary at now_us, or the process started: tokens start
 * beyond its clock + margin. */
void fencing_promoted(uint64_t now_us);

#endif
