/* SPDX-License-Identifier: BSD-3-Clause */
/* bucket_io.h -- persistence of a leaky-bucket counter for the module types
 * built on it: RDB, digest, and command arguments. See bucket_io.c. */
#ifndef MC_BUCKET_IO_H
#define MC_BUCKET_IO_H

#include <stddef.h>

#include "core/bucket.h"
#include "redismodule.h"

/* Number of non-zero slots (each persisted as a slot/count pair). */
size_t bucket_nonzero_slots(const lbucket *b);

/* RDB: last_ms, nslots, then the pairs. The loader expects `b` set up by
 * lb_init with the owner's window; it checks every read and every invariant
 * and returns 0, or -1 (the caller frees b with lb_free). */
void bucket_rdb_save(RedisModuleIO *rdb, const lbucket *b);
int bucket_rdb_load(RedisModuleIO *rdb, lbucket *b);

void bucket_digest(RedisModuleDigest *md, const lbucket *b);

/* Arguments: last_ms nslots [slot count]...  `out` must hold 2 + 2 *
 * bucket_nonzero_slots(b) entries; returns how many were written (new strings,
 * the caller frees them). */
size_t bucket_args_fill(const lbucket *b, RedisModuleString **out);

/* Parse exactly those arguments into `b` (set up by lb_init). Returns 0, or -1
 * with *err set to a message without an error code. */
int bucket_args_parse(lbucket *b, RedisModuleString **argv, int argc, const char **err);

/* COMMAND DOCS of one [slot count] pair of that argument form (a block that
 * commands carrying a bucket repeat). */
extern RedisModuleCommandArg mc_bucket_slot_args[];

#endif
