/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.c -- the module's clock; see clock.h. */
#include "server/clock.h"

#include "redismodule.h"

static long long (*cached_microseconds)(void); /* 7.2+, NULL on 7.0 */

void mc_clock_init(void) {
    if (RedisModule_GetApi("RedisModule_CachedMicroseconds", (void **)&cached_microseconds) != REDISMODULE_OK)
        cached_microseconds = NULL;
}

const char *mc_clock_name(void) {
    return cached_microseconds ? "CachedMicroseconds" : "Milliseconds";
}

uint64_t mc_now_us(void) {
    if (cached_microseconds) return (uint64_t)cached_microseconds();
    long long ms = RedisModule_Milliseconds();
    return ms > 0 ? (uint64_t)ms * 1000 : 0;
}

uint64_t mc_now_ms(void) {
    if (cached_microseconds) return (uint64_t)cached_microseconds() / 1000;
    long long ms = RedisModule_Milliseconds();
    return ms > 0 ? (uint64_t)ms : 0;
}
