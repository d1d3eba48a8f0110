/* SPDX-License-Identifier: BSD-3-Clause */
/* internal.c -- who may call the internal commands; see internal.h. */
#include "server/internal.h"

#include <stdio.h>

static int open_to_clients; /* internal-commands yes (server/config.c) */

void mc_internal_set_open(int open) {
    open_to_clients = open != 0;
}

int mc_internal_open(void) {
    return open_to_clients;
}

int mc_internal_allowed_or_reply(RedisModuleCtx *ctx, const char *name) {
    if (open_to_clients) return 1;
    /* REPLICATED: sent by our primary (also inside the MULTI/EXEC it wraps
     * module replication in). LOADING: replayed from the AOF by its fake client.
     * A client's MULTI/EXEC or script has neither. */
    int flags = RedisModule_GetContextFlags(ctx);
    if (flags & (REDISMODULE_CTX_FLAGS_REPLICATED | REDISMODULE_CTX_FLAGS_LOADING)) return 1;
    char buf[256];
    snprintf(buf, sizeof(buf),
             "ERR %s is internal (replication and AOF only); load the module with INTERNAL-COMMANDS yes to call it",
             name);
    RedisModule_ReplyWithError(ctx, buf);
    return 0;
}
