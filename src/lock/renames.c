/* SPDX-License-Identifier: BSD-3-Clause */
/* renames.c -- a command filter that remembers the last RENAME_HINTS RENAME
 * and RENAMENX commands (source and destination names), for leases.c to find
 * a renamed held lock by its new name; see renames.h.
 *
 * Cost. Every command pays one call of the filter: the argument count (a
 * RENAME has exactly three), then, for three arguments, the command name's
 * length and letters. A RENAME also pays two string copies (the ring owns
 * them; the client's argument objects are never kept, so a server that frees
 * arguments on another thread is not raced) and the release of the oldest
 * pair. Memory: at most RENAME_HINTS pairs of names.
 *
 * A hint is only a hint: leases.c checks that the value it looks for is the
 * one stored under the destination (a RENAME that was refused, or one queued
 * in a MULTI that was discarded, is recorded too). */
#include "lock/renames.h"

#include "server/config.h"

#include <stdint.h>
#include <strings.h>

typedef struct hint {
    RedisModuleString *from, *to;
    uint64_t hash; /* of `from`: a walk compares it first */
} hint;

static hint ring[RENAME_HINTS];
static long long seen; /* pairs recorded; ring[(seen - 1) % RENAME_HINTS] is the newest */

/* FNV-1a, 64 bits. */
static uint64_t name_hash(const RedisModuleString *name) {
    size_t len;
    const unsigned char *p = (const unsigned char *)RedisModule_StringPtrLen(name, &len);
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

static int is_rename(const RedisModuleString *name) {
    size_t len;
    const char *s = RedisModule_StringPtrLen(name, &len);
    if (len == 6) return strncasecmp(s, "rename", 6) == 0;
    return len == 8 && strncasecmp(s, "renamenx", 8) == 0;
}

/* The filter: RENAME key newkey, RENAMENX key newkey. */
static void on_command(RedisModuleCommandFilterCtx *fctx) {
    if (RedisModule_CommandFilterArgsCount(fctx) != 3) return;
    if (!is_rename(RedisModule_CommandFilterArgGet(fctx, 0))) return;
    hint *h = &ring[seen % RENAME_HINTS];
    if (h->from) RedisModule_FreeString(NULL, h->from);
    if (h->to) RedisModule_FreeString(NULL, h->to);
    h->from = RedisModule_CreateStringFromString(NULL, RedisModule_CommandFilterArgGet(fctx, 1));
    h->to = RedisModule_CreateStringFromString(NULL, RedisModule_CommandFilterArgGet(fctx, 2));
    h->hash = name_hash(h->from);
    seen++;
}

/* The module API's own binary comparison. */
static int same(const RedisModuleString *a, const RedisModuleString *b) {
    return RedisModule_StringCompare((RedisModuleString *)a, (RedisModuleString *)b) == 0;
}

const RedisModuleString *renames_latest(const RedisModuleString *from) {
    if (seen == 0) return NULL;
    const hint *h = &ring[(seen - 1) % RENAME_HINTS];
    return same(h->from, from) ? h->to : NULL;
}

const RedisModuleString *renames_next(const RedisModuleString *from, int *pos) {
    long long kept = seen < RENAME_HINTS ? seen : RENAME_HINTS;
    uint64_t hash = *pos < kept ? name_hash(from) : 0;
    while (*pos < kept) {
        const hint *h = &ring[(seen - 1 - *pos) % RENAME_HINTS];
        (*pos)++;
        if (h->hash == hash && same(h->from, from)) return h->to;
    }
    return NULL;
}

static RedisModuleCommandFilter *filter; /* registered while the config is on */
static RedisModuleCtx *filter_ctx;       /* detached: (un)registers it from CONFIG SET too */

/* Drop every recorded pair (the config went off: nothing records them now). */
static void clear_ring(void) {
    for (int i = 0; i < RENAME_HINTS; i++) {
        if (ring[i].from) RedisModule_FreeString(NULL, ring[i].from);
        if (ring[i].to) RedisModule_FreeString(NULL, ring[i].to);
        ring[i].from = ring[i].to = NULL;
    }
    seen = 0;
}

/* The config's handler: register or unregister the filter. */
static int set_follow(int on) {
    if (on && filter == NULL) {
        filter = RedisModule_RegisterCommandFilter(filter_ctx, on_command, 0);
        if (filter == NULL) return REDISMODULE_ERR;
    } else if (!on && filter != NULL) {
        RedisModule_UnregisterCommandFilter(filter_ctx, filter);
        filter = NULL;
        clear_ring();
    }
    return REDISMODULE_OK;
}

int renames_init(RedisModuleCtx *ctx) {
    filter_ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
    if (set_follow(mc_config_lock_follow_renames()) == REDISMODULE_ERR) return REDISMODULE_ERR;
    mc_config_on_lock_follow_renames(set_follow);
    return REDISMODULE_OK;
}
