/* SPDX-License-Identifier: BSD-3-Clause */
/* module_list.c -- MODULE LIST with mcaptcha_cache first, for libmcaptcha.
 *
 * mCaptcha's client library checks that the cache module is loaded by looking
 * only at the FIRST entry of MODULE LIST (docs/protocol.md, "Module discovery").
 * The server lists modules in the order of its own hash table, so with any other
 * module loaded (Redis 8 bundles several; Valkey 9 lists its built-in `lua`) the
 * check fails at random. With the opt-in config module-list-first (the load
 * argument `MODULE-LIST-FIRST yes`, a redis.conf line, or
 * `CONFIG SET mcaptcha_cache.module-list-first yes`; server/config.h), a command
 * filter rewrites a client's `MODULE LIST` into MCAPTCHA_CACHE.MODULE_LIST, which
 * answers the server's own reply (in the client's protocol) with our entry
 * moved to the front. Off by default: a command filter sees every command. */
#include <string.h>
#include <strings.h>

#include "captcha/captcha_glue.h"
#include "server/commands.h"
#include "server/config.h"

#define CMD_MODULE_LIST "MCAPTCHA_CACHE.MODULE_LIST"
#define MODULE_LIST_NAME "mcaptcha_cache" /* the name RedisModule_Init registers */

static RedisModuleCommandFilter *filter; /* registered while the config is on */
static RedisModuleCtx *filter_ctx;       /* detached: (un)registers it from CONFIG SET too */

/* Whether filter argument `pos` is `word`, ignoring case. */
static int filter_arg_is(RedisModuleCommandFilterCtx *f, int pos, const char *word) {
    const RedisModuleString *s = RedisModule_CommandFilterArgGet(f, pos);
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    return len == strlen(word) && strncasecmp(p, word, len) == 0;
}

/* The filter: `MODULE LIST` -> `MCAPTCHA_CACHE.MODULE_LIST`; anything else untouched. */
static void rewrite_module_list(RedisModuleCommandFilterCtx *f) {
    if (RedisModule_CommandFilterArgsCount(f) != 2 || !filter_arg_is(f, 0, "MODULE") || !filter_arg_is(f, 1, "LIST"))
        return;
    RedisModule_CommandFilterArgDelete(f, 1);
    RedisModule_CommandFilterArgReplace(f, 0, RedisModule_CreateString(NULL, CMD_MODULE_LIST, strlen(CMD_MODULE_LIST)));
}

/* Whether MODULE LIST entry `e` (a flat array or a map of name, ver, ...) is ours. */
static int entry_is_ours(RedisModuleCallReply *e) {
    size_t n = RedisModule_CallReplyLength(e);
    for (size_t i = 0; i < n; i++) {
        RedisModuleCallReply *v = RedisModule_CallReplyType(e) == REDISMODULE_REPLY_MAP
                                      ? NULL
                                      : RedisModule_CallReplyArrayElement(e, i);
        if (RedisModule_CallReplyType(e) == REDISMODULE_REPLY_MAP) {
            RedisModuleCallReply *k;
            RedisModule_CallReplyMapElement(e, i, &k, &v);
        }
        size_t len;
        const char *s = v ? RedisModule_CallReplyStringPtr(v, &len) : NULL;
        if (s && len == strlen(MODULE_LIST_NAME) && memcmp(s, MODULE_LIST_NAME, len) == 0) return 1;
    }
    return 0;
}

/* MCAPTCHA_CACHE.MODULE_LIST
 * The reply of MODULE LIST (same shape, in the client's protocol), with the
 * mcaptcha_cache entry first. */
static int ModuleList_RedisCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    RedisModuleCallReply *r = RedisModule_Call(ctx, "MODULE", "0c", "LIST");
    if (r == NULL) r = RedisModule_Call(ctx, "MODULE", "c", "LIST");
    if (r == NULL || RedisModule_CallReplyType(r) != REDISMODULE_REPLY_ARRAY) {
        if (r) RedisModule_FreeCallReply(r);
        return RedisModule_ReplyWithError(ctx, "ERR MODULE LIST failed");
    }
    size_t n = RedisModule_CallReplyLength(r), ours = n;
    for (size_t i = 0; i < n && ours == n; i++)
        if (entry_is_ours(RedisModule_CallReplyArrayElement(r, i))) ours = i;
    RedisModule_ReplyWithArray(ctx, (long)n);
    if (ours < n) RedisModule_ReplyWithCallReply(ctx, RedisModule_CallReplyArrayElement(r, ours));
    for (size_t i = 0; i < n; i++)
        if (i != ours) RedisModule_ReplyWithCallReply(ctx, RedisModule_CallReplyArrayElement(r, i));
    RedisModule_FreeCallReply(r);
    return REDISMODULE_OK;
}

/* Turn the rewrite on or off. REDISMODULE_OK or REDISMODULE_ERR. */
static int set_first(int on) {
    if (on && filter == NULL) {
        filter = RedisModule_RegisterCommandFilter(filter_ctx, rewrite_module_list, REDISMODULE_CMDFILTER_NOSELF);
        if (filter == NULL) return REDISMODULE_ERR;
    } else if (!on && filter != NULL) {
        RedisModule_UnregisterCommandFilter(filter_ctx, filter);
        filter = NULL;
    }
    return REDISMODULE_OK;
}

static mc_cmdinfo module_list_cmdinfo[] = {
    {CMD_MODULE_LIST,
     {.version = REDISMODULE_COMMAND_INFO_VERSION,
      .summary = "MODULE LIST with mcaptcha_cache first (what a client's MODULE LIST runs when "
                 "module-list-first is on)",
      .complexity = "O(N) for N modules", .since = MC_SINCE, .arity = 1}},
    {NULL},
};

static const mc_command commands[] = {
    {CMD_MODULE_LIST, ModuleList_RedisCommand, "readonly fast", 0, 0, 0},
};

int module_list_register(RedisModuleCtx *ctx) {
    filter_ctx = RedisModule_GetDetachedThreadSafeContext(ctx);
    if (mc_register_commands(ctx, commands, 1, module_list_cmdinfo) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (set_first(mc_config_module_list_first()) == REDISMODULE_ERR) return REDISMODULE_ERR;
    mc_config_on_module_list_first(set_first); /* later CONFIG SETs */
    return REDISMODULE_OK;
}
