/* cgctl.c -- callgrind's counters driven from inside a command stream, for `make bench-instr`.
 *
 * SPDX-License-Identifier: BSD-3-Clause
 *
 * A measurement-only Redis module (never installed or tested): the bench runs redis-server
 * under `valgrind --tool=callgrind` and sends, on one redis-cli --pipe connection,
 * CG.ZERO, the batch it measures, then CG.DUMP label. The counts between the two are the
 * batch's instructions alone (reading, parsing, the commands, replication to the AOF,
 * replies), without the server's start, the client's connection or the time between
 * batches: a figure that does not depend on the machine's load. Outside valgrind both
 * commands do nothing.
 *
 *   CG.ZERO         zero callgrind's counters; reply OK
 *   CG.DUMP label   write the counters since CG.ZERO to a dump file marked `label`; reply OK
 */
#include <valgrind/callgrind.h>

#include "redismodule.h"

static int cg_zero(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    if (argc != 1) return RedisModule_WrongArity(ctx);
    CALLGRIND_ZERO_STATS;
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int cg_dump(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 2) return RedisModule_WrongArity(ctx);
    CALLGRIND_DUMP_STATS_AT(RedisModule_StringPtrLen(argv[1], NULL));
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "cgctl", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "cg.zero", cg_zero, "fast", 0, 0, 0) == REDISMODULE_ERR ||
        RedisModule_CreateCommand(ctx, "cg.dump", cg_dump, "fast", 0, 0, 0) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
