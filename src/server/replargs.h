/* SPDX-License-Identifier: BSD-3-Clause */
/* replargs.h -- integer arguments of a replicated command, with as few server
 * allocations as the module API allows.
 *
 * RedisModule_Replicate copies a C string or an integer ('c', 'b', 'l') into a
 * new server object, but only takes a reference to a module string ('s'). So
 * the small integers that most replicated commands carry -- a lock's permits
 * (at most 1,024), a hold count, the "0"/"1" of a holder count, a window hit's
 * cost -- are module strings made once at load and shared by every replicated
 * command; nothing writes to them (the server only reads and reference-counts
 * propagated arguments). An integer that may be large gets a string of its own,
 * one allocation, as 'b' with core/decimal.h would. The bytes replicated are
 * the same decimal text as with the 'l' format.
 *
 *   mc_iarg c = mc_iarg_of(count);
 *   RedisModule_Replicate(ctx, "X", "sss", key, mc_shared_int(1), c.s);
 *   mc_iarg_release(&c);
 */
#ifndef MC_REPLARGS_H
#define MC_REPLARGS_H

#include "redismodule.h"

#define MC_SHARED_INT_MAX 1024 /* 0..this are shared */

/* Make the shared strings of 0..MC_SHARED_INT_MAX; once, from RedisModule_OnLoad,
 * before any command runs. Returns REDISMODULE_OK. */
int mc_shared_ints_init(void);

/* The shared string of `v`, for a constant v in 0..MC_SHARED_INT_MAX (NULL for
 * any other: a value that may be outside goes through mc_iarg_of). Never freed. */
RedisModuleString *mc_shared_int(long long v);

/* An integer argument for the 's' format: shared when small, else a string of
 * its own that mc_iarg_release frees (after RedisModule_Replicate, which holds
 * its own reference). */
typedef struct mc_iarg {
    RedisModuleString *s;
    int owned;
} mc_iarg;

mc_iarg mc_iarg_of(long long v);
void mc_iarg_release(mc_iarg *a);

/* An integer argument that repeats from call to call at one call site (a
 * limiter's emission interval, capacity or window: the same for every request
 * of one configuration). The site keeps the string of the last value it
 * replicated and hands it to RedisModule_Replicate ('s', a reference) while
 * the value stays the same: no allocation, no formatting; a new value replaces
 * it (one allocation). Small values are the shared ones. One static per site:
 *   static mc_carg emission;
 *   RedisModule_Replicate(ctx, "X", "ss", key, mc_carg_of(&emission, e));
 * The string is never written to (as for the shared ones). Main thread only. */
typedef struct mc_carg {
    long long v;
    RedisModuleString *s; /* NULL: none kept yet */
} mc_carg;

RedisModuleString *mc_carg_of(mc_carg *c, long long v);

#endif
