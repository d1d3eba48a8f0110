/* cmdinfo.c -- COMMAND DOCS / COMMAND INFO metadata of every command: summary,
 * complexity, arity, key specs and arguments (RedisModule_SetCommandInfo, 7.0+).
 * Data only; captcha_cmd.c registers the handlers. */
#include <string.h>

#include "module.h"

#define SINCE "0.1.0"

/* Key specs: argument 1 (and 2 for RENAME_CAPTCHA) is the declared key. */
#define KEY_AT(pos_, flags_)                                          \
    {                                                                 \
        .flags = (flags_), .begin_search_type = REDISMODULE_KSPEC_BS_INDEX, \
        .bs.index.pos = (pos_), .find_keys_type = REDISMODULE_KSPEC_FK_RANGE, \
        .fk.range = {0, 1, 0}                                         \
    }
#define RO_ACCESS (REDISMODULE_CMD_KEY_RO | REDISMODULE_CMD_KEY_ACCESS)
#define RW_ACCESS (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_UPDATE)
#define RW_INSERT (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_INSERT)
#define OW_UPDATE (REDISMODULE_CMD_KEY_OW | REDISMODULE_CMD_KEY_UPDATE)
#define RW_DELETE (REDISMODULE_CMD_KEY_RW | REDISMODULE_CMD_KEY_ACCESS | REDISMODULE_CMD_KEY_DELETE)
#define RM_DELETE (REDISMODULE_CMD_KEY_RM | REDISMODULE_CMD_KEY_DELETE)

static RedisModuleCommandKeySpec ks_ro[] = {KEY_AT(1, RO_ACCESS), {0}};
static RedisModuleCommandKeySpec ks_rw[] = {KEY_AT(1, RW_ACCESS), {0}};
static RedisModuleCommandKeySpec ks_insert[] = {KEY_AT(1, RW_INSERT), {0}};
static RedisModuleCommandKeySpec ks_ow[] = {KEY_AT(1, OW_UPDATE), {0}};
static RedisModuleCommandKeySpec ks_delete[] = {KEY_AT(1, RM_DELETE), {0}};
static RedisModuleCommandKeySpec ks_take[] = {KEY_AT(1, RW_DELETE), {0}};
static RedisModuleCommandKeySpec ks_rename[] = {KEY_AT(1, RW_DELETE), KEY_AT(2, OW_UPDATE), {0}};

#define ARG_KEY(name_, spec_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_KEY, .key_spec_index = (spec_), .summary = (summary_)}
#define ARG_STR(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_STRING, .key_spec_index = -1, .summary = (summary_)}
#define ARG_INT(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1, .summary = (summary_)}
#define ARG_UNIX_MS(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_UNIX_TIME, .key_spec_index = -1, .summary = (summary_)}

static RedisModuleCommandArg args_name[] = {
    ARG_KEY("name", 0, "captcha name (site key); the captcha lives at mcap:captcha::{name}"), {0}};
static RedisModuleCommandArg args_add_captcha[] = {
    ARG_KEY("name", 0, "captcha name (site key)"),
    ARG_STR("config", "JSON {\"levels\":[{\"visitor_threshold\":u32,\"difficulty_factor\":u32},...],\"duration\":seconds}"),
    {0}};
static RedisModuleCommandArg args_rename[] = {
    ARG_KEY("name", 0, "current captcha name"), ARG_KEY("newname", 1, "new captcha name"), {0}};
static RedisModuleCommandArg args_add_challenge[] = {
    ARG_KEY("name", 0, "captcha name; the challenge lives at mcap:CHALLENGE:{name}:<challenge>"),
    ARG_STR("challenge", "JSON {\"difficulty\":u32,\"duration\":seconds,\"challenge\":\"...\"}"),
    {0}};
static RedisModuleCommandArg args_challenge[] = {
    ARG_KEY("name", 0, "captcha name"), ARG_STR("challenge", "the challenge string"), {0}};
static RedisModuleCommandArg args_visit_at[] = {
    ARG_KEY("key", 0, "the captcha's Redis key"),
    ARG_UNIX_MS("unix-time-milliseconds", "the time of the visit"), {0}};
static RedisModuleCommandArg args_level_pair[] = {
    ARG_INT("visitor_threshold", NULL), ARG_INT("difficulty_factor", NULL), {0}};
static RedisModuleCommandArg args_slot_pair[] = {
    ARG_INT("slot", "absolute slot number: floor(visit ms / slot width)"), ARG_INT("count", NULL), {0}};
static RedisModuleCommandArg args_captcha_set[] = {
    ARG_KEY("key", 0, "the captcha's Redis key"),
    ARG_INT("duration", "seconds each visit counts"),
    ARG_UNIX_MS("last-unix-time-milliseconds", "latest clock reading the counter has seen"),
    ARG_INT("nlevels", NULL),
    {.name = "level", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE, .subargs = args_level_pair},
    ARG_INT("nslots", NULL),
    {.name = "slot", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_slot_pair},
    {0}};
static RedisModuleCommandArg args_pxat[] = {
    {.name = "pxat", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "PXAT"},
    ARG_UNIX_MS("unix-time-milliseconds", NULL), {0}};
static RedisModuleCommandArg args_challenge_set[] = {
    ARG_KEY("key", 0, "the challenge's Redis key"),
    ARG_INT("difficulty_factor", NULL),
    ARG_INT("duration", "seconds"),
    {.name = "expiration", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_pxat},
    {0}};

typedef struct cmdinfo_entry {
    const char *name;
    RedisModuleCommandInfo info;
} cmdinfo_entry;

#define INFO(summary_, complexity_, arity_, ks_, args_)                                      \
    {                                                                                       \
        .version = REDISMODULE_COMMAND_INFO_VERSION, .summary = (summary_),                 \
        .complexity = (complexity_), .since = SINCE, .arity = (arity_), .key_specs = (ks_), \
        .args = (args_)                                                                     \
    }

static cmdinfo_entry entries[] = {
    {"MCAPTCHA_CACHE.ADD_CAPTCHA",
     INFO("Registers a captcha: its difficulty levels and the duration (seconds) each visit counts",
          "O(L log L) for L levels", 3, ks_insert, args_add_captcha)},
    {"MCAPTCHA_CACHE.ADD_VISITOR",
     INFO("Counts a visit for `duration` seconds and returns the difficulty that applies",
          "O(1) amortized", 2, ks_rw, args_name)},
    {"MCAPTCHA_CACHE.GET",
     INFO("Returns the number of visits still counting", "O(1) amortized; O(D/256 slots) at worst", 2,
          ks_ro, args_name)},
    {"MCAPTCHA_CACHE.CAPTCHA_EXISTS",
     INFO("Returns 0 when the captcha exists and 1 when it does not", "O(1)", 2, ks_ro, args_name)},
    {"MCAPTCHA_CACHE.DELETE_CAPTCHA", INFO("Deletes a captcha", "O(1)", 2, ks_delete, args_name)},
    {"MCAPTCHA_CACHE.RENAME_CAPTCHA",
     INFO("Moves a captcha, live count included, to a new name", "O(L + D/256)", 3, ks_rename,
          args_rename)},
    {"MCAPTCHA_CACHE.ADD_CHALLENGE",
     INFO("Stores a one-shot challenge that expires after its duration (seconds)", "O(1)", 3,
          ks_insert, args_add_challenge)},
    {"MCAPTCHA_CACHE.GET_CHALLENGE",
     INFO("Returns a challenge and deletes it (one-shot)", "O(1)", 3, ks_take, args_challenge)},
    {"MCAPTCHA_CACHE.DELETE_CHALLENGE", INFO("Deletes a challenge", "O(1)", 3, ks_take, args_challenge)},
    {CMD_VISIT_AT,
     INFO("Internal (replication, AOF): one visit at an explicit Unix time in milliseconds",
          "O(1) amortized", 3, ks_rw, args_visit_at)},
    {CMD_CAPTCHA_SET,
     INFO("Internal (replication, AOF): replaces a key with an exact captcha state", "O(L + S)", -8,
          ks_ow, args_captcha_set)},
    {CMD_CHALLENGE_SET,
     INFO("Internal (replication, AOF): replaces a key with a challenge expiring at PXAT", "O(1)",
          -4, ks_ow, args_challenge_set)},
};

int cmdinfo_set(RedisModuleCtx *ctx, const char *name) {
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        if (strcmp(entries[i].name, name) != 0) continue;
        RedisModuleCommand *cmd = RedisModule_GetCommand(ctx, name);
        if (cmd == NULL) return REDISMODULE_ERR;
        return RedisModule_SetCommandInfo(cmd, &entries[i].info);
    }
    return REDISMODULE_ERR;
}
