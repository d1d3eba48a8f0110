/* SPDX-License-Identifier: BSD-3-Clause */
/* args.h -- argument parsing shared by the command files: exact, bounded, and
 * replying with an error that names the argument and its range. */
#ifndef MC_ARGS_H
#define MC_ARGS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "redismodule.h"

/* Parse a decimal integer in [min, max] (max <= INT64_MAX). 0, or -1. */
int mc_parse_u64(RedisModuleString *s, uint64_t min, uint64_t max, uint64_t *out);

/* Whether the `len` bytes at `p` are `word` (uppercase ASCII letters), ignoring ASCII
 * case: the whole argument, not a prefix. Inline, so that strlen(word) of a literal
 * folds and a length mismatch costs one comparison (option parsing runs on every call). */
static inline int mc_word_eq(const char *p, size_t len, const char *word) {
    size_t n = strlen(word);
    if (len != n) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c >= 'a' && c <= 'z') c = (char)(c - ('a' - 'A'));
        if (c != word[i]) return 0;
    }
    return 1;
}

/* Whether `s` is `word` (uppercase ASCII letters), ignoring case. */
static inline int mc_is_word(RedisModuleString *s, const char *word) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    return mc_word_eq(p, len, word);
}

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
