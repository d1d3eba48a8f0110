/* SPDX-License-Identifier: BSD-3-Clause */
/* events.h -- one server-event subscription shared by several families.
 *
 * RedisModule_SubscribeToServerEvent keeps one callback per event and module: a
 * second subscription replaces the first. Families that need the same event
 * register their callbacks here; the first registration subscribes once and the
 * dispatcher calls every registered callback, in registration order. */
#ifndef MC_EVENTS_H
#define MC_EVENTS_H

#include "redismodule.h"

/* Call `cb` on every RedisModuleEvent_Loading sub-event (RDB, AOF and replication
 * loading starts, ended, failed). REDISMODULE_OK, or REDISMODULE_ERR when the
 * table is full (a programming error) or the server refuses the subscription. */
int mc_on_loading(RedisModuleCtx *ctx, RedisModuleEventCallback cb);

#endif
