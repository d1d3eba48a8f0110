/* SPDX-License-Identifier: BSD-3-Clause */
/* args.h -- argument parsing shared by the command files: exact, bounded, and
 * replying with an error that names the argument and its range. */
#ifndef MC_ARGS_H
#define MC_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "redismodule.h"

/* Parse a decimal integer in [min, max] (max <= INT64_MAX). 0, or -1. */
int mc_parse_u64(RedisModuleString *s, uint64_t min, uint64_t max, uint64_t *out);

/* Whether `s` is `word`, ignoring case (the whole argument, not a prefix). */
int mc_is_word(RedisModuleString *s, const char *word);

/* Reply "ERR <what> must be an integer from <min> to <max>". */
int mc_reply_range(RedisModuleCtx *ctx, const char *what, unsigned long long min, unsigned long long max);

/* Reply "ERR unknown option '<arg>' for <cmd>; expected <valid>", `valid` listing the
 * command's options with their values ("PERMITS n, REENTRANT, WAIT timeout-ms"). The
 * argument is quoted as sent, cut to 64 bytes, bytes outside printable ASCII as '?'. */
int mc_reply_unknown_option(RedisModuleCtx *ctx, const char *cmd, RedisModuleString *arg, const char *valid);

/* Reply "ERR <option> needs a value (<value>)": a known option was the last argument. */
int mc_reply_needs_value(RedisModuleCtx *ctx, const char *option, const char *value);

/* Free an array of `n` strings allocated with RedisModule_Alloc (the argument
 * lists that the *_state_args functions build for replication and the AOF). */
void mc_free_args(RedisModuleString **argv, size_t n);

#endif
