/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_info.c -- COMMAND DOCS / COMMAND INFO metadata of the rate-limit family (CL.THROTTLE, RL.*,
 * MCAPTCHA_CACHE.COUNT, RL.FIXED, RL.POLICY_*): summary, complexity, arity, key specs and arguments. Data only;
 * ratelimit_cmd.c, count_cmd.c, fixed_cmd.c and policy.c register the handlers. */
#include "ratelimit/ratelimit_glue.h"
#include "server/bucket_io.h"
#include "server/commands.h"

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
    ARG_INT("period-s", "seconds"),
    {.name = "quantity", .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .summary = "default 1; 0 peeks"},
    {0}};
/* The limit of RL.GCRA* / RL.WINDOW*: the numbers, or POLICY <name> (policy.c). */
#define ONEOF(name_, subargs_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_ONEOF, .key_spec_index = -1, .subargs = (subargs_)}
#define BLOCK(name_, subargs_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1, .subargs = (subargs_)}
#define POLICY_ARG(summary_) \
    {.name = "policy-name", .type = REDISMODULE_ARG_TYPE_STRING, .key_spec_index = -1, .token = "POLICY", \
     .summary = (summary_)}
static RedisModuleCommandArg args_gcra_numbers[] = {
    ARG_INT("rate", "units per period"), ARG_INT("period-ms", "milliseconds"), {0}};
static RedisModuleCommandArg args_gcra_limit[] = {
    BLOCK("numbers", args_gcra_numbers),
    POLICY_ARG("a GCRA policy (RL.POLICY_SET): its rate, period-ms and BURST"),
    {0}};
static RedisModuleCommandArg args_window_numbers[] = {
    ARG_INT("limit", "units allowed within any window"), ARG_INT("window-ms", "milliseconds"), {0}};
static RedisModuleCommandArg args_window_limit[] = {
    BLOCK("numbers", args_window_numbers),
    POLICY_ARG("a WINDOW policy (RL.POLICY_SET): its limit and window-ms"),
    {0}};
static RedisModuleCommandArg args_gcra[] = {
    ARG_KEY("key", 0, NULL),
    ONEOF("limit", args_gcra_limit),
    OPT_INT("BURST", "capacity", "capacity: units that fit at once (default: rate); not with POLICY"),
    OPT_INT("COST", "n", "units this request takes (default 1)"),
    OPT_INT("WAIT", "timeout-ms", "block up to this many milliseconds until the request fits"),
    OPT_INT("AT", "unix-ms", "use this Unix time in milliseconds instead of the clock"),
    {0}};
static RedisModuleCommandArg args_gcra_peek[] = {
    ARG_KEY("key", 0, NULL), ONEOF("limit", args_gcra_limit),
    OPT_INT("BURST", "capacity", "capacity (default: rate); not with POLICY"), OPT_INT("COST", "n", "default 1"),
    OPT_INT("AT", "unix-ms", "answer as the write with this AT would"), {0}};
static RedisModuleCommandArg args_window[] = {
    ARG_KEY("key", 0, NULL),
    ONEOF("limit", args_window_limit),
    OPT_INT("COST", "n", "units this request takes (default 1)"),
    OPT_INT("WAIT", "timeout-ms", "block up to this many milliseconds until the request fits"),
    OPT_INT("AT", "unix-ms", "use this Unix time in milliseconds instead of the clock"),
    {0}};
static RedisModuleCommandArg args_window_peek[] = {
    ARG_KEY("key", 0, NULL), ONEOF("limit", args_window_limit), OPT_INT("COST", "n", "default 1"),
    OPT_INT("AT", "unix-ms", "answer as the write with this AT would"), {0}};
static RedisModuleCommandArg args_refund[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("n", "units to give back"),
    OPT_INT("AT", "unix-ms", "the units were taken then: what has come back by itself since is not given again"),
    {0}};
static RedisModuleCommandArg args_multi_limit[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("type", "GCRA or WINDOW"), ARG_INT("limit", NULL),
    ARG_INT("period-ms", "milliseconds"), {0}};
static RedisModuleCommandArg args_multi[] = {
    ARG_STR("cost", "units taken from every limit, or one per limit separated by commas (e.g. 1,5)"),
    ARG_INT("numlimits", NULL),
    {.name = "limit", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE, .subargs = args_multi_limit},
    {0}};
static RedisModuleCommandArg args_count[] = {
    ARG_KEY("counter-name", 0, "the counter's key"),
    ARG_INT("leak-rate-s", "seconds each increment counts (1 to 4398046511)"),
    {0}};
static RedisModuleCommandArg args_fixed[] = {
    ARG_KEY("key", 0, "a string holding the count; its expiry is the window's end"),
    ARG_INT("window-ms", "milliseconds (1 to 2^42)"),
    OPT_INT("COST", "n", "units this hit adds (default 1; 0 looks, writing nothing)"),
    {.name = "elastic", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "ELASTIC",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .summary = "every hit starts the window again"},
    {0}};
static RedisModuleCommandArg args_gcra_set[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("tat", "Unix microseconds"), ARG_INT("emission_interval", "microseconds"),
    ARG_INT("limit", NULL), {0}};
static RedisModuleCommandArg args_window_hit[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("window-ms", "milliseconds"), ARG_INT("limit", NULL),
    ARG_UNIX_MS("unix-time-milliseconds", NULL), ARG_INT("cost", NULL),
    ARG_INT("width", "slot width of a window it creates: 0 window/256, 1 at most 1 s"), {0}};
static RedisModuleCommandArg args_window_set[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("window-ms", "milliseconds"), ARG_INT("limit", NULL),
    ARG_UNIX_MS("last-unix-time-milliseconds", NULL), ARG_INT("nslots", NULL),
    {.name = "slot", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = mc_bucket_slot_args},
    OPT_INT("SLOTMS", "slot-width-ms", "the slot width when not window/256 (windows written since encver 2)"),
    {0}};

static RedisModuleCommandArg args_policy_gcra[] = {
    {.name = "gcra", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "GCRA"},
    ARG_INT("rate", "units per period (1 to 2^40)"),
    ARG_INT("period-ms", "milliseconds"),
    OPT_INT("BURST", "capacity", "capacity: units that fit at once (default: rate)"),
    {0}};
static RedisModuleCommandArg args_policy_window[] = {
    {.name = "window", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "WINDOW"},
    ARG_INT("limit", "units allowed within any window (1 to 2^32-1)"),
    ARG_INT("window-ms", "milliseconds"),
    {0}};
static RedisModuleCommandArg args_policy_def[] = {
    BLOCK("gcra-policy", args_policy_gcra), BLOCK("window-policy", args_policy_window), {0}};
static RedisModuleCommandArg args_policy_set[] = {
    ARG_STR("name", "1 to 256 bytes, binary-safe"), ONEOF("definition", args_policy_def), {0}};
static RedisModuleCommandArg args_policy_name[] = {ARG_STR("name", NULL), {0}};
static RedisModuleCommandArg args_policy_put[] = {
    ARG_STR("name", NULL), ARG_UNIX_MS("stamp-unix-time-milliseconds", "the version's stamp"),
    ARG_STR("node-id", "the writing node (40 characters)"), ARG_STR("kind", "GCRA, WINDOW or DELETED"),
    ARG_INT("rate", "0 when DELETED"), ARG_INT("period-ms", "0 when DELETED"), ARG_INT("burst", "0: none"), {0}};

mc_cmdinfo ratelimit_cmdinfo[] = {
    {"CL.THROTTLE",
     INFO("GCRA rate limit compatible with redis-cell: [limited, limit, remaining, retry_after_s, reset_after_s]",
          "O(1)", -5, KS_RW, args_throttle)},
    {"RL.GCRA",
     INFO("GCRA token bucket with a weighted cost: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(1)",
          -4, KS_RW, args_gcra)},
    {"RL.GCRA_PEEK", INFO("What RL.GCRA would answer, changing nothing", "O(1)", -4, KS_RO, args_gcra_peek)},
    {"RL.WINDOW",
     INFO("Exact sliding-window limit: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(1) amortized", -4,
          KS_RW, args_window)},
    {"RL.WINDOW_PEEK", INFO("What RL.WINDOW would answer, changing nothing", "O(S), S the window's slots holding hits", -4, KS_RO, args_window_peek)},
    {"RL.REFUND", INFO("Gives units back to a limiter, never below empty", "O(S), S the window's slots holding hits", -3, KS_RW, args_refund)},
    {"RL.MULTI",
     INFO("Takes a cost from several limits atomically, from all or from none: [allowed, refused_index, "
          "retry_after_ms, remaining]",
          "O(N)", -7, ks_multi, args_multi)},
    {"MCAPTCHA_CACHE.COUNT",
     INFO("Increments a leaky-bucket counter (creating it); each increment leaves after leak-rate seconds. Reply: "
          "the count",
          "O(1) amortized", 3, KS_RW, args_count)},
    {"RL.FIXED",
     INFO("Fixed-window counter on a string key (limits' fixed-window strategies): [count, reset_after_ms]",
          "O(1)", -3, KS_RW, args_fixed)},
    {"RL.POLICY_SET",
     INFO("Stores a named GCRA or WINDOW limit (node-wide, replicated, in the RDB) for RL.GCRA / RL.WINDOW ... "
          "POLICY name. Reply: OK",
          "O(log N)", -5, NULL, args_policy_set)},
    {"RL.POLICY_GET", INFO("A stored policy's definition as RL.POLICY_SET takes it, or nil", "O(log N)", 2, NULL,
                           args_policy_name)},
    {"RL.POLICY_DEL", INFO("Removes a stored policy: 1, or 0 when there was none", "O(log N)", 2, NULL, args_policy_name)},
    {"RL.POLICY_LIST", INFO("The names of the stored policies, in byte order", "O(N)", 1, NULL, NULL)},
    {"RL.GCRA_SET", INFO("Internal (replication, AOF): replaces a key with a GCRA state", "O(1)", 5, KS_OW, args_gcra_set)},
    {"RL.WINDOW_HIT", INFO("Internal (replication): adds hits to a window at an explicit time", "O(1) amortized", 7,
                            KS_RW, args_window_hit)},
    {"RL.POLICY_PUT", INFO("Internal (replication, AOF): one version of a stored policy, kept when newer", "O(log N)", 8,
                            NULL, args_policy_put)},
    {"RL.WINDOW_SET", INFO("Internal (replication, AOF): replaces a key with a window state", "O(S)", -6, KS_OW,
                            args_window_set)},
    {NULL},
};
