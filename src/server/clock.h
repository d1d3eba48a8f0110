/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.h -- the module's one clock: Unix time read from the server.
 *
 * Read it once per command and pass `now` down; store absolute times. Uses
 * RedisModule_CachedMicroseconds where the server has it (7.2+: frozen within a
 * command, MULTI or script), else RedisModule_Milliseconds (7.0: millisecond
 * resolution, read afresh by each call). */
#ifndef MC_CLOCK_H
#define MC_CLOCK_H

#include <stdint.h>

/* Resolve the newest clock the server offers. Call once from OnLoad. */
void mc_clock_init(void);

/* Which clock is in use, for the load-time log line. */
const char *mc_clock_name(void);

/* Unix milliseconds. */
uint64_t mc_now_ms(void);

/* Unix microseconds (millisecond resolution on Redis 7.0). */
uint64_t mc_now_us(void);

#endif
