/* rdb_load.h -- the checked read every rdb_load callback uses.
 *
 * The module sets REDISMODULE_OPTIONS_HANDLE_IO_ERRORS, so a short or mistyped
 * read does not panic the server: it sets an error flag that must be checked
 * after every read. LOAD_U64 reads one unsigned, checks the flag and the
 * value's upper bound, and jumps to the caller's `fail` label otherwise. It
 * expects the RedisModuleIO to be called `rdb`. */
#ifndef MC_RDB_LOAD_H
#define MC_RDB_LOAD_H

#include <stdint.h>

#define LOAD_U64(var, max)                                                   \
    do {                                                                     \
        (var) = RedisModule_LoadUnsigned(rdb);                               \
        if (RedisModule_IsIOError(rdb) || (uint64_t)(var) > (uint64_t)(max)) \
            goto fail;                                                       \
    } while (0)

#endif
