/* SPDX-License-Identifier: BSD-3-Clause */
/* commands.c -- registers a family's commands with their metadata and ACL
 * categories; see commands.h. */
#include "server/commands.h"

#include <stdio.h>
#include <string.h>

/* ACL categories for a command: "write" or "read", plus "fast", plus the
 * module's own category when the server has one. */
static void acl_categories(const char *flags, int own_category, char *out, size_t len) {
    snprintf(out, len, "%s%s%s", strstr(flags, "write") ? "write" : "read", strstr(flags, "fast") ? " fast" : "",
             own_category ? " mcaptcha" : "");
}

/* Arguments in the layout of Redis 7.2+ and Valkey: 7.0's struct followed by
 * display_text. The server steps through an argument array by the size the
 * info's version struct gives; 7.0 reads only its own fields, while 7.2+ also
 * read display_text -- with 7.0's size, that is the next argument's name, and
 * every hint and COMMAND DOCS entry showed its neighbour's name. So the
 * tables (written with 7.0's struct) are copied into this layout at load,
 * each argument shown as its name (pure tokens and blocks: none), and the
 * server is told the larger size. */
typedef struct mc_arg72 {
    RedisModuleCommandArg arg;
    const char *display_text;
} mc_arg72;

static RedisModuleCommandInfoVersion info_version = {
    .version = 1,
    .sizeof_historyentry = sizeof(RedisModuleCommandHistoryEntry),
    .sizeof_keyspec = sizeof(RedisModuleCommandKeySpec),
    .sizeof_arg = sizeof(mc_arg72),
};

/* A copy of `args` (ending with a zeroed entry) and their subargs in the 7.2
 * layout; free with free_args72. */
static mc_arg72 *args72(const RedisModuleCommandArg *args) {
    size_t n = 0;
    while (args[n].name) n++;
    mc_arg72 *out = RedisModule_Calloc(n + 1, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        out[i].arg = args[i];
        if (args[i].subargs) out[i].arg.subargs = (RedisModuleCommandArg *)args72(args[i].subargs);
        int shown = args[i].type != REDISMODULE_ARG_TYPE_PURE_TOKEN && args[i].type != REDISMODULE_ARG_TYPE_BLOCK &&
                    args[i].type != REDISMODULE_ARG_TYPE_ONEOF;
        out[i].display_text = shown ? args[i].name : NULL;
    }
    return out;
}

static void free_args72(mc_arg72 *args) {
    for (mc_arg72 *a = args; a->arg.name; a++)
        if (a->arg.subargs) free_args72((mc_arg72 *)a->arg.subargs);
    RedisModule_Free(args);
}

/* Attach the entry of `infos` called `name` to that (registered) command
 * (the server copies what it is given). */
static int set_info(RedisModuleCtx *ctx, const char *name, mc_cmdinfo *infos) {
    for (mc_cmdinfo *e = infos; e->name; e++) {
        if (strcmp(e->name, name) != 0) continue;
        RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, name);
        if (cmd == NULL) return REDISMODULE_ERR;
        RedisModuleCommandInfo info = e->info;
        info.version = &info_version;
        mc_arg72 *args = info.args ? args72(info.args) : NULL;
        info.args = (RedisModuleCommandArg *)args;
        int rc = RedisModule_SetCommandInfo(cmd, &info);
        if (args) free_args72(args);
        return rc;
    }
    return REDISMODULE_ERR;
}

int mc_register_commands(RedisModuleCtx *ctx, const mc_command *cmds, size_t n, mc_cmdinfo *infos) {
    /* ACL categories need Redis 7.2 (SetCommandACLCategories) and 7.4
     * (AddACLCategory); on 7.0 module commands have none. */
    static int (*set_acl)(RedisModuleCommand *, const char *);
    static int (*add_category)(RedisModuleCtx *, const char *);
    static int resolved, own_category;
    if (!resolved) {
        resolved = 1;
        if (RedisModule_GetApi("RedisModule_SetCommandACLCategories", (void **)&set_acl) != REDISMODULE_OK)
            set_acl = NULL;
        if (RedisModule_GetApi("RedisModule_AddACLCategory", (void **)&add_category) != REDISMODULE_OK)
            add_category = NULL;
        own_category = add_category && add_category(ctx, "mcaptcha") == REDISMODULE_OK;
    }
    for (size_t i = 0; i < n; i++) {
        const mc_command *d = &cmds[i];
        if (RedisModule_CreateCommand(ctx, d->name, d->fn, d->flags, d->firstkey, d->lastkey, d->keystep) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
        if (set_info(ctx, d->name, infos) == REDISMODULE_ERR) {
            RedisModule_Log(ctx, "warning", "could not set the command info of %s", d->name);
            return REDISMODULE_ERR;
        }
        if (set_acl) {
            char cats[64];
            acl_categories(d->flags, own_category, cats, sizeof(cats));
            if (set_acl(RedisModule_GetCommand(ctx, d->name), cats) == REDISMODULE_ERR)
                RedisModule_Log(ctx, "warning", "could not set the ACL categories of %s", d->name);
        }
    }
    return REDISMODULE_OK;
}
