/* SPDX-License-Identifier: BSD-3-Clause */
/* rdb_load.h -- the checked read every rdb_load callback uses.
 *
 * The module sets REDISMODULE_OPTIONS_HANDLE_IO_ERRORS, so a short or mistyped
 * read does not panic the server: it sets an error flag that must be checked
 * after every read. LOAD_FIELD reads one unsigned, checks the flag and the
 * value's range, and otherwise logs which field failed (by name, with the value
 * and the range) and jumps to the caller's `fail` label, which logs the type.
 * It expects the RedisModuleIO to be called `rdb`. */
#ifndef MC_RDB_LOAD_H
#define MC_RDB_LOAD_H

#include <stdint.h>

#include "redismodule.h"

/* Read one unsigned into *out: 0, or -1 after logging why field `name` was
 * refused -- a truncated stream, or a value outside [min, max]. */
static inline int mc_rdb_load_field(RedisModuleIO *rdb, const char *name, uint64_t min, uint64_t max, uint64_t *out) {
    uint64_t v = RedisModule_LoadUnsigned(rdb);
    if (RedisModule_IsIOError(rdb)) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value truncated at field %s", name);
        return -1;
    }
    if (v < min || v > max) {
        RedisModule_LogIOError(rdb, "warning", "mcaptcha_cache: stored value refused: field %s = %llu, not in [%llu, %llu]",
                               name, (unsigned long long)v, (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

#define LOAD_FIELD(var, min, max, name)                                                \
    do {                                                                               \
        uint64_t v_;                                                                   \
        if (mc_rdb_load_field(rdb, (name), (uint64_t)(min), (uint64_t)(max), &v_) != 0) \
            goto fail;                                                                 \
        (var) = v_;                                                                    \
    } while (0)

/* The same with no lower bound; the field is named after the variable. */
#define LOAD_U64(var, max) LOAD_FIELD(var, 0, max, #var)

#endif
