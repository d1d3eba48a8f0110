/* SPDX-License-Identifier: BSD-3-Clause */
/* args.c -- shared argument parsing; see args.h. */
#include "server/args.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int mc_parse_u64(RedisModuleString *s, uint64_t min, uint64_t max, uint64_t *out) {
    long long v;
    if (RedisModule_StringToLongLong(s, &v) != REDISMODULE_OK || v < 0 || (uint64_t)v < min || (uint64_t)v > max)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int mc_reply_range(RedisModuleCtx *ctx, const char *what, unsigned long long min, unsigned long long max) {
    char buf[200];
    snprintf(buf, sizeof(buf), "ERR %s must be an integer from %llu to %llu", what, min, max);
    return RedisModule_ReplyWithError(ctx, buf);
}

#define MC_ECHO_MAX 64

int mc_reply_unknown_option(RedisModuleCtx *ctx, const char *cmd, RedisModuleString *arg, const char *valid) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(arg, &len);
    char shown[MC_ECHO_MAX + 4];
    size_t n = len > MC_ECHO_MAX ? MC_ECHO_MAX : len;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        shown[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (len > MC_ECHO_MAX) {
        memcpy(shown + n, "...", 3);
        n += 3;
    }
    shown[n] = '\0';
    char buf[512];
    snprintf(buf, sizeof(buf), "ERR unknown option '%s' for %s; expected %s", shown, cmd, valid);
    return RedisModule_ReplyWithError(ctx, buf);
}

int mc_reply_needs_value(RedisModuleCtx *ctx, const char *option, const char *value) {
    char buf[200];
    snprintf(buf, sizeof(buf), "ERR %s needs a value (%s)", option, value);
    return RedisModule_ReplyWithError(ctx, buf);
}

void mc_free_args(RedisModuleString **argv, size_t n) {
    for (size_t i = 0; i < n; i++) RedisModule_FreeString(NULL, argv[i]);
    RedisModule_Free(argv);
}
