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
    ARG_INT("nlevels", NULL),
    {.name = "level", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE, .subargs = args_level_pair},
    ARG_UNIX_MS("last-unix-time-milliseconds", "latest clock reading the counter has seen"),
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

/* ---- Rate limits ---- */
static RedisModuleCommandKeySpec ks_multi[] = {
    /* INCOMPLETE: Redis 7.0 mis-steps keynum specs with keystep > 1, so routing
     * and ACL checks take the keys from the command's getkeys-api instead. */
    {.flags = RW_ACCESS | REDISMODULE_CMD_KEY_INCOMPLETE, .begin_search_type = REDISMODULE_KSPEC_BS_INDEX,
     .bs.index.pos = 2, .find_keys_type = REDISMODULE_KSPEC_FK_KEYNUM, .fk.keynum = {0, 1, 4}},
    {0}};
static RedisModuleCommandArg args_throttle[] = {
    ARG_KEY("key", 0, NULL),
    ARG_INT("max_burst", "the limiter admits max_burst + 1 at once"),
    ARG_INT("count_per_period", NULL),
    ARG_INT("period", "seconds"),
    {.name = "quantity", .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .summary = "default 1; 0 peeks"},
    {0}};
#define OPT_INT(token_, summary_)                                                              \
    {.name = (token_), .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1, .token = (token_), \
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .summary = (summary_)}
static RedisModuleCommandArg args_gcra[] = {
    ARG_KEY("key", 0, NULL),
    ARG_INT("rate", "units per period"),
    ARG_INT("period", "milliseconds"),
    OPT_INT("BURST", "capacity: units that fit at once (default: rate)"),
    OPT_INT("COST", "units this request takes (default 1)"),
    OPT_INT("WAIT", "block up to this many milliseconds until the request fits"),
    OPT_INT("AT", "use this Unix time in milliseconds instead of the clock"),
    {0}};
static RedisModuleCommandArg args_gcra_peek[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("rate", "units per period"), ARG_INT("period", "milliseconds"),
    OPT_INT("BURST", "capacity (default: rate)"), OPT_INT("COST", "default 1"), {0}};
static RedisModuleCommandArg args_window[] = {
    ARG_KEY("key", 0, NULL),
    ARG_INT("limit", "units allowed within any window"),
    ARG_INT("window", "milliseconds"),
    OPT_INT("COST", "units this request takes (default 1)"),
    OPT_INT("WAIT", "block up to this many milliseconds until the request fits"),
    OPT_INT("AT", "use this Unix time in milliseconds instead of the clock"),
    {0}};
static RedisModuleCommandArg args_window_peek[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("limit", NULL), ARG_INT("window", "milliseconds"), OPT_INT("COST", "default 1"), {0}};
static RedisModuleCommandArg args_refund[] = {ARG_KEY("key", 0, NULL), ARG_INT("n", "units to give back"), {0}};
static RedisModuleCommandArg args_multi_limit[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("type", "GCRA or WINDOW"), ARG_INT("limit", NULL),
    ARG_INT("period", "milliseconds"), {0}};
static RedisModuleCommandArg args_multi[] = {
    ARG_INT("cost", "units taken from every limit"),
    ARG_INT("numlimits", NULL),
    {.name = "limit", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE, .subargs = args_multi_limit},
    {0}};
static RedisModuleCommandArg args_gcra_set[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("tat", "Unix microseconds"), ARG_INT("emission_interval", "microseconds"),
    ARG_INT("limit", NULL), {0}};
static RedisModuleCommandArg args_window_hit[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("window", "milliseconds"), ARG_INT("limit", NULL),
    ARG_UNIX_MS("unix-time-milliseconds", NULL), ARG_INT("cost", NULL), ARG_INT("reserved", "0"), {0}};
static RedisModuleCommandArg args_window_set[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("window", "milliseconds"), ARG_INT("limit", NULL),
    ARG_UNIX_MS("last-unix-time-milliseconds", NULL), ARG_INT("nslots", NULL),
    {.name = "slot", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_slot_pair},
    {0}};

/* ---- Locks ---- */
static RedisModuleCommandArg args_lock_acquire[] = {
    ARG_KEY("key", 0, NULL),
    ARG_STR("owner", "owner token, 1 to 256 bytes"),
    ARG_INT("lease", "milliseconds"),
    OPT_INT("PERMITS", "holders allowed at once: 1 is a mutex, N a semaphore (default 1)"),
    {.name = "reentrant", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "REENTRANT",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {.name = "session", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "SESSION",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    OPT_INT("WAIT", "block up to this many milliseconds, first come first served"),
    {0}};
static RedisModuleCommandArg args_lock_owner[] = {ARG_KEY("key", 0, NULL), ARG_STR("owner", NULL), {0}};
static RedisModuleCommandArg args_lock_extend[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("owner", NULL), ARG_INT("lease", "milliseconds from now"), {0}};
static RedisModuleCommandArg args_lock_key[] = {ARG_KEY("key", 0, NULL), {0}};
static RedisModuleCommandArg args_lock_holder[] = {
    ARG_STR("owner", NULL), ARG_UNIX_MS("lease-end-unix-time-milliseconds", NULL), ARG_INT("count", NULL),
    ARG_INT("token", NULL), {0}};
static RedisModuleCommandArg args_lock_state[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("permits", NULL), ARG_INT("last_token", NULL), ARG_INT("nholders", NULL),
    {.name = "holder", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_holder},
    {0}};
static RedisModuleCommandArg args_concurrency[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("holder", "1 to 256 bytes"), ARG_INT("lease", "milliseconds"),
    ARG_INT("limit", "holders at once"), OPT_INT("WAIT", "block up to this many milliseconds for a slot"), {0}};
static RedisModuleCommandArg args_concurrency_release[] = {ARG_KEY("key", 0, NULL), ARG_STR("holder", NULL), {0}};

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
    {"CL.THROTTLE",
     INFO("GCRA rate limit compatible with redis-cell: [limited, limit, remaining, retry_after_s, reset_after_s]",
          "O(1)", -5, ks_rw, args_throttle)},
    {"RL.GCRA",
     INFO("GCRA token bucket with a weighted cost: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(1)",
          -4, ks_rw, args_gcra)},
    {"RL.GCRA_PEEK", INFO("What RL.GCRA would answer, changing nothing", "O(1)", -4, ks_ro, args_gcra_peek)},
    {"RL.WINDOW",
     INFO("Exact sliding-window limit: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(1) amortized", -4,
          ks_rw, args_window)},
    {"RL.WINDOW_PEEK", INFO("What RL.WINDOW would answer, changing nothing", "O(W/256)", -4, ks_ro, args_window_peek)},
    {"RL.REFUND", INFO("Gives units back to a limiter, never below empty", "O(W/256)", 3, ks_rw, args_refund)},
    {"RL.MULTI",
     INFO("Takes a cost from several limits atomically, from all or from none: [allowed, refused_index, "
          "retry_after_ms, remaining]",
          "O(N)", -7, ks_multi, args_multi)},
    {"RL.GCRA_SET", INFO("Internal (replication, AOF): replaces a key with a GCRA state", "O(1)", 5, ks_ow, args_gcra_set)},
    {"RL.WINDOW_HIT", INFO("Internal (replication): adds hits to a window at an explicit time", "O(1) amortized", 7,
                            ks_rw, args_window_hit)},
    {"RL.WINDOW_SET", INFO("Internal (replication, AOF): replaces a key with a window state", "O(S)", -6, ks_ow,
                            args_window_set)},
    {"LOCK.ACQUIRE",
     INFO("Acquires a leased lock or semaphore permit: [granted, fencing token, lease_ms | ms until a lease ends]",
          "O(P) for P permits", -4, ks_rw, args_lock_acquire)},
    {"LOCK.RELEASE", INFO("Releases the owner's hold; serves the next waiter", "O(P)", 3, ks_rw, args_lock_owner)},
    {"LOCK.EXTEND", INFO("Renews the owner's lease (milliseconds from now)", "O(P)", 4, ks_rw, args_lock_extend)},
    {"LOCK.INSPECT",
     INFO("Shows permits, the last fencing token, waiters and holders [owner, lease_ms, token, count]", "O(P)", 2,
          ks_ro, args_lock_key)},
    {"RL.CONCURRENCY",
     INFO("Concurrency limit with leases: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(N) for N slots",
          -5, ks_rw, args_concurrency)},
    {"RL.CONCURRENCY_RELEASE", INFO("Frees a holder's slot of a concurrency limit: 1, or 0 if it held none", "O(N)", 3,
                                     ks_rw, args_concurrency_release)},
    {"LOCK.STATE", INFO("Internal (replication, AOF): replaces a key with an exact lock state", "O(P)", -5, ks_ow,
                         args_lock_state)},
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
