/* SPDX-License-Identifier: BSD-3-Clause */
/* config.c -- the module configs; see config.h. */
#include "server/config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/captcha.h"
#include "server/internal.h"

typedef struct num_config {
    const char *name; /* after "mcaptcha_cache."; also the load option */
    long long def, min, max;
    const char *unit;
    long long value;
} num_config;

enum { MAX_CONFIG_BYTES, MAX_CHALLENGE_JSON, MAX_CHALLENGE_STRING, FENCING_MARGIN_MS, NUM_CONFIGS };

static num_config nums[NUM_CONFIGS] = {
    [MAX_CONFIG_BYTES] = {"max-captcha-config-bytes", CAPTCHA_MAX_CONFIG_BYTES, 64, 16 * 1024 * 1024, "bytes"},
    [MAX_CHALLENGE_JSON] = {"max-challenge-json-bytes", CHALLENGE_MAX_JSON_BYTES, 64, 1024 * 1024, "bytes"},
    [MAX_CHALLENGE_STRING] = {"max-challenge-string-bytes", CHALLENGE_MAX_STRING_BYTES, 1, 1024 * 1024, "bytes"},
    [FENCING_MARGIN_MS] = {"fencing-margin-ms", MC_FENCING_MARGIN_MS_DEFAULT, 0, 86400000, "milliseconds"},
};

typedef struct bool_config {
    const char *name;
    int value;
    unsigned flags;
} bool_config;

enum { INTERNAL_COMMANDS, MODULE_LIST_FIRST, LOCK_FOLLOW_RENAMES, BOOL_CONFIGS };

static bool_config bools[BOOL_CONFIGS] = {
    /* PROTECTED (like `dir`): CONFIG SET changes it only where the server runs
     * with enable-protected-configs yes (or local, from a local connection); the
     * default `no` leaves it to redis.conf and the load arguments. */
    [INTERNAL_COMMANDS] = {"internal-commands", 0, REDISMODULE_CONFIG_PROTECTED},
    [MODULE_LIST_FIRST] = {"module-list-first", 0, REDISMODULE_CONFIG_DEFAULT},
    [LOCK_FOLLOW_RENAMES] = {"lock-follow-renames", 0, REDISMODULE_CONFIG_DEFAULT},
};

static int (*module_list_apply)(int on);
static int (*follow_renames_apply)(int on);

uint64_t mc_config_fencing_margin_us(void) {
    return (uint64_t)nums[FENCING_MARGIN_MS].value * 1000;
}

int mc_config_module_list_first(void) {
    return bools[MODULE_LIST_FIRST].value;
}

void mc_config_on_module_list_first(int (*apply)(int on)) {
    module_list_apply = apply;
}

int mc_config_lock_follow_renames(void) {
    return bools[LOCK_FOLLOW_RENAMES].value;
}

void mc_config_on_lock_follow_renames(int (*apply)(int on)) {
    follow_renames_apply = apply;
}

/* Hand the captcha limits to the core. */
static void push_captcha_limits(void) {
    captcha_limits l = {(size_t)nums[MAX_CONFIG_BYTES].value, (size_t)nums[MAX_CHALLENGE_JSON].value,
                        (size_t)nums[MAX_CHALLENGE_STRING].value};
    captcha_set_limits(&l);
}

static long long get_num(const char *name, void *privdata) {
    (void)name;
    return ((num_config *)privdata)->value;
}

/* The server has checked [min, max]. */
static int set_num(const char *name, long long val, void *privdata, RedisModuleString **err) {
    (void)name;
    (void)err;
    ((num_config *)privdata)->value = val;
    push_captcha_limits();
    return REDISMODULE_OK;
}

static int get_bool(const char *name, void *privdata) {
    (void)name;
    return ((bool_config *)privdata)->value;
}

static int set_bool(const char *name, int val, void *privdata, RedisModuleString **err) {
    (void)name;
    bool_config *c = privdata;
    int (*apply)(int) = c == &bools[MODULE_LIST_FIRST] ? module_list_apply
                        : c == &bools[LOCK_FOLLOW_RENAMES] ? follow_renames_apply : NULL;
    if (apply && apply(val) != REDISMODULE_OK) {
        const char *msg = "could not register the command filter";
        *err = RedisModule_CreateString(NULL, msg, strlen(msg));
        return REDISMODULE_ERR;
    }
    if (c == &bools[INTERNAL_COMMANDS]) mc_internal_set_open(val);
    c->value = val != 0;
    return REDISMODULE_OK;
}

/* `name` in capitals, for the load messages (INTERNAL-COMMANDS, as documented). */
static const char *upper(const char *name, char *buf, size_t len) {
    size_t i = 0;
    for (; name[i] && i + 1 < len; i++) buf[i] = (char)toupper((unsigned char)name[i]);
    buf[i] = '\0';
    return buf;
}

/* The load arguments, as name/value pairs, into the configs' values (their
 * registered defaults). REDISMODULE_ERR, with a warning naming the offending
 * argument, on an unknown name, a missing value or a bad one: the module then
 * refuses to load rather than run with a setting the operator did not ask for. */
static int parse_load_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    char up[64];
    for (int i = 0; i < argc; i += 2) {
        const char *name = RedisModule_StringPtrLen(argv[i], NULL);
        const char *value = i + 1 < argc ? RedisModule_StringPtrLen(argv[i + 1], NULL) : NULL;
        int found = 0;
        for (int b = 0; b < BOOL_CONFIGS && !found; b++) {
            if (strcasecmp(name, bools[b].name) != 0) continue;
            found = 1;
            if (value && strcasecmp(value, "yes") == 0) bools[b].value = 1;
            else if (value && strcasecmp(value, "no") == 0) bools[b].value = 0;
            else {
                RedisModule_Log(ctx, "warning", "mcaptcha_cache: load option %s needs the value yes or no",
                                upper(bools[b].name, up, sizeof(up)));
                return REDISMODULE_ERR;
            }
        }
        for (int n = 0; n < NUM_CONFIGS && !found; n++) {
            if (strcasecmp(name, nums[n].name) != 0) continue;
            found = 1;
            long long v;
            if (value == NULL || RedisModule_StringToLongLong(argv[i + 1], &v) != REDISMODULE_OK || v < nums[n].min ||
                v > nums[n].max) {
                RedisModule_Log(ctx, "warning", "mcaptcha_cache: load option %s needs an integer from %lld to %lld (%s)",
                                upper(nums[n].name, up, sizeof(up)), nums[n].min, nums[n].max, nums[n].unit);
                return REDISMODULE_ERR;
            }
            nums[n].value = v;
        }
        if (!found) {
            RedisModule_Log(ctx, "warning",
                            "mcaptcha_cache: unknown load option '%s' (known, each followed by its value: "
                            "internal-commands yes|no, module-list-first yes|no, lock-follow-renames yes|no, "
                            "max-captcha-config-bytes n, "
                            "max-challenge-json-bytes n, max-challenge-string-bytes n, fencing-margin-ms n)",
                            name);
            return REDISMODULE_ERR;
        }
    }
    return REDISMODULE_OK;
}

int mc_config_register(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    for (int n = 0; n < NUM_CONFIGS; n++) nums[n].value = nums[n].def;
    for (int b = 0; b < BOOL_CONFIGS; b++) bools[b].value = 0;
    if (parse_load_args(ctx, argv, argc) == REDISMODULE_ERR) return REDISMODULE_ERR;
    mc_internal_set_open(bools[INTERNAL_COMMANDS].value);
    push_captcha_limits();
    for (int n = 0; n < NUM_CONFIGS; n++) {
        if (RedisModule_RegisterNumericConfig(ctx, nums[n].name, nums[n].value, REDISMODULE_CONFIG_DEFAULT, nums[n].min,
                                              nums[n].max, get_num, set_num, NULL, &nums[n]) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    }
    for (int b = 0; b < BOOL_CONFIGS; b++) {
        if (RedisModule_RegisterBoolConfig(ctx, bools[b].name, bools[b].value, bools[b].flags, get_bool, set_bool, NULL,
                                           &bools[b]) == REDISMODULE_ERR)
            return REDISMODULE_ERR;
    }
    return RedisModule_LoadConfigs(ctx);
}
