/* SPDX-License-Identifier: BSD-3-Clause */
/* events.c -- the shared Loading subscription; see events.h. The legacy
 * captcha types drop the original module's helper keys when a load ends
 * (captcha/legacy_type.c) and the lease entries are forgotten when a replica
 * starts loading its primary's data (lock/leases.c): both need the one event. */
#include "server/events.h"

#define MAX_LOADING_CALLBACKS 4

static RedisModuleEventCallback loading_cbs[MAX_LOADING_CALLBACKS];
static int nloading;

static void dispatch_loading(RedisModuleCtx *ctx, RedisModuleEvent e, uint64_t sub, void *data) {
    for (int i = 0; i < nloading; i++) loading_cbs[i](ctx, e, sub, data);
}

int mc_on_loading(RedisModuleCtx *ctx, RedisModuleEventCallback cb) {
    if (nloading == MAX_LOADING_CALLBACKS) return REDISMODULE_ERR;
    loading_cbs[nloading++] = cb;
    if (nloading > 1) return REDISMODULE_OK;
    return RedisModule_SubscribeToServerEvent(ctx, RedisModuleEvent_Loading, dispatch_loading);
}
