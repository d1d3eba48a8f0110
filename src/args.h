/* args.h -- argument parsing shared by the command files: exact, bounded, and
 * replying with an error that names the argument and its range. */
#ifndef MC_ARGS_H
#define MC_ARGS_H

#include <stdint.h>

#include "redismodule.h"

/* Parse a decimal integer in [min, max] (max <= INT64_MAX). 0, or -1. */
int mc_parse_u64(RedisModuleString *s, uint64_t min, uint64_t max, uint64_t *out);

/* Whether `s` is `word`, ignoring case (the whole argument, not a prefix). */
int mc_is_word(RedisModuleString *s, const char *word);

/* Reply "ERR <what> must be an integer from <min> to <max>". */
int mc_reply_range(RedisModuleCtx *ctx, const char *what, unsigned long long min, unsigned long long max);

#endif
