/* SPDX-License-Identifier: BSD-3-Clause */
/* keys.c -- typed key opening and key ids; see keys.h. */
#include "server/keys.h"

#include <string.h>

#include "core/decimal.h"

int mc_open_typed_empty(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                        RedisModuleKey **key, int *empty) {
    *key = RedisModule_OpenKey(ctx, keyname, mode);
    int kt = RedisModule_KeyType(*key);
    if (kt != REDISMODULE_KEYTYPE_EMPTY &&
        (kt != REDISMODULE_KEYTYPE_MODULE || RedisModule_ModuleTypeGetType(*key) != type)) {
        RedisModule_CloseKey(*key);
        *key = NULL;
        return -1;
    }
    *empty = kt == REDISMODULE_KEYTYPE_EMPTY;
    return 0;
}

int mc_open_typed(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                  RedisModuleKey **key) {
    int empty;
    return mc_open_typed_empty(ctx, keyname, mode, type, key, &empty);
}

/* "<db>:" into out (at least 12 bytes); returns its length. No printf: this is
 * on every lock write and wait-queue lookup. */
static size_t db_prefix(int db, char *out) {
    size_t at = mc_dec_write(db, out);
    out[at++] = ':';
    return at;
}

char *mc_db_key_buf(int db, const RedisModuleString *key, char *stackbuf, size_t cap, size_t *len) {
    size_t klen;
    const char *k = RedisModule_StringPtrLen(key, &klen);
    char prefix[16];
    size_t n = db_prefix(db, prefix);
    *len = n + klen;
    char *buf = *len <= cap ? stackbuf : RedisModule_Alloc(*len);
    memcpy(buf, prefix, n);
    memcpy(buf + n, k, klen);
    return buf;
}

RedisModuleString *mc_db_key_id(int db, RedisModuleString *key) {
    char prefix[16];
    size_t n = db_prefix(db, prefix);
    size_t len;
    const char *k = RedisModule_StringPtrLen(key, &len);
    RedisModuleString *id = RedisModule_CreateString(NULL, prefix, n);
    RedisModule_StringAppendBuffer(NULL, id, k, len);
    return id;
}
