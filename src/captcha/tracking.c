/* SPDX-License-Identifier: BSD-3-Clause */
/* tracking.c -- tell CLIENT TRACKING and WATCH when a captcha changes.
 *
 * The public captcha commands declare the captcha *name* as their key (that is
 * what a cluster client routes on and what a tracking client reads), but they
 * open the derived keys mcap:captcha::{name} and mcap:CHALLENGE:{name}:<c>.
 * Redis signals the key a module opened for writing, so without this a client
 * that cached MCAPTCHA_CACHE.GET name would never hear of an ADD_VISITOR.
 * Every write therefore also signals the declared name. On replicas and while
 * loading the AOF the internal commands carry only the derived key; the name
 * is recovered from it. (GET also changes with time alone, as visits leave:
 * invalidation covers writes, not decay -- docs/protocol.md.) */
#include "captcha/captcha_glue.h"

#include <string.h>

void captcha_touched(RedisModuleCtx *ctx, RedisModuleString *name) {
    RedisModule_SignalModifiedKey(ctx, name);
}

/* The name inside `key` for `prefix` ("...{"): up to the last '}' for a
 * captcha key (nothing follows it), up to the first "}:" for a challenge key.
 * 0 and the span, or -1 when `key` is not of that form. */
static int name_span(const char *k, size_t len, const char *prefix, int challenge, size_t *off, size_t *n) {
    size_t plen = strlen(prefix);
    if (len <= plen || memcmp(k, prefix, plen) != 0) return -1;
    if (!challenge) {
        if (k[len - 1] != '}') return -1;
        *off = plen;
        *n = len - 1 - plen;
        return 0;
    }
    for (size_t i = plen; i + 1 < len; i++)
        if (k[i] == '}' && k[i + 1] == ':') {
            *off = plen;
            *n = i - plen;
            return 0;
        }
    return -1;
}

void captcha_touched_key(RedisModuleCtx *ctx, RedisModuleString *key) {
    size_t len, off, n;
    const char *k = RedisModule_StringPtrLen(key, &len);
    if (name_span(k, len, CAPTCHA_KEY_PREFIX, 0, &off, &n) != 0 &&
        name_span(k, len, CHALLENGE_KEY_PREFIX, 1, &off, &n) != 0)
        return;
    RedisModuleString *name = RedisModule_CreateString(ctx, k + off, n);
    RedisModule_SignalModifiedKey(ctx, name);
    RedisModule_FreeString(ctx, name);
}
