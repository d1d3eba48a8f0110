/* SPDX-License-Identifier: BSD-3-Clause */
/* replargs.c -- shared small integers for replicated commands; see replargs.h. */
#include "server/replargs.h"

#include "core/decimal.h"

static RedisModuleString *shared_ints[MC_SHARED_INT_MAX + 1];

int mc_shared_ints_init(void) {
    for (int i = 0; i <= MC_SHARED_INT_MAX; i++) {
        if (shared_ints[i]) continue;
        mc_dec d = mc_dec_of(i);
        shared_ints[i] = RedisModule_CreateString(NULL, MC_DEC_ARG(d));
    }
    return REDISMODULE_OK;
}

RedisModuleString *mc_shared_int(long long v) {
    return v >= 0 && v <= MC_SHARED_INT_MAX ? shared_ints[v] : NULL;
}

mc_iarg mc_iarg_of(long long v) {
    mc_iarg a;
    if (v >= 0 && v <= MC_SHARED_INT_MAX && shared_ints[v] != NULL) {
        a.s = shared_ints[v];
        a.owned = 0;
    } else {
        mc_dec d = mc_dec_of(v);
        a.s = RedisModule_CreateString(NULL, MC_DEC_ARG(d));
        a.owned = 1;
    }
    return a;
}

RedisModuleString *mc_carg_of(mc_carg *c, long long v) {
    if (c->s && c->v == v) return c->s;
    RedisModuleString *shared = mc_shared_int(v);
    if (shared) return shared;
    if (c->s) RedisModule_FreeString(NULL, c->s); /* propagated copies keep their own reference */
    mc_dec d = mc_dec_of(v);
    c->s = RedisModule_CreateString(NULL, MC_DEC_ARG(d));
    c->v = v;
    return c->s;
}

void mc_iarg_release(mc_iarg *a) {
    if (a->owned) RedisModule_FreeString(NULL, a->s);
    a->s = NULL;
    a->owned = 0;
}
