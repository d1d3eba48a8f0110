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

int mc_is_word(RedisModuleString *s, const char *word) {
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    return len == strlen(word) && strncasecmp(p, word, len) == 0;
}

int mc_reply_range(RedisModuleCtx *ctx, const char *what, unsigned long long min, unsigned long long max) {
    char buf[200];
    snprintf(buf, sizeof(buf), "ERR %s must be an integer from %llu to %llu", what, min, max);
    return RedisModule_ReplyWithError(ctx, buf);
}

void mc_free_args(RedisModuleString **argv, size_t n) {
    for (size_t i = 0; i < n; i++) RedisModule_FreeString(NULL, argv[i]);
    RedisModule_Free(argv);
}
