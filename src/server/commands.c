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

/* Attach the entry of `infos` called `name` to that (registered) command. */
static int set_info(RedisModuleCtx *ctx, const char *name, mc_cmdinfo *infos) {
    for (mc_cmdinfo *e = infos; e->name; e++) {
        if (strcmp(e->name, name) != 0) continue;
        RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, name);
        if (cmd == NULL) return REDISMODULE_ERR;
        return RedisModule_SetCommandInfo(cmd, &e->info);
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
