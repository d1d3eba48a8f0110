/* SPDX-License-Identifier: BSD-3-Clause */
/* lock_info.c -- COMMAND DOCS / COMMAND INFO metadata of the lock family (LOCK.*, and RL.CONCURRENCY, built on the locks): summary, complexity,
 * arity, key specs and arguments. Data only; lock_cmd.c registers the handlers. */
#include "lock/lock_glue.h"
#include "server/commands.h"

static RedisModuleCommandArg args_lock_acks[] = {
    {.name = "acks", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "ACKS"},
    ARG_INT("numreplicas", "replicas that must acknowledge the grant"),
    ARG_INT("timeout-ms", "milliseconds to wait for them"), {0}};
static RedisModuleCommandArg args_lock_acquire[] = {
    ARG_KEY("key", 0, NULL),
    ARG_STR("owner", "owner token, 1 to 256 bytes"),
    ARG_INT("lease-ms", "milliseconds"),
    OPT_INT("PERMITS", "n", "holders allowed at once: 1 is a mutex, N a semaphore (default 1)"),
    OPT_INT("TAKE", "k", "permits this grant takes at once, all or none (default 1)"),
    {.name = "read", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "READ",
     .summary = "a shared hold of a read-write lock: many readers at once, no writer",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {.name = "write", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "WRITE",
     .summary = "an exclusive hold (the default)", .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {.name = "reentrant", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "REENTRANT",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {.name = "session", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "SESSION",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    OPT_INT("LOCKDELAY", "delay-ms",
            "milliseconds the permit stays taken after this hold ends without a release (lease end, session closed)"),
    OPT_INT("WAIT", "timeout-ms", "block up to this many milliseconds, first come first served"),
    {.name = "acks-block", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .summary = "answer the grant once this many replicas acknowledged it; else take it back (NOREPLICAS)",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_acks},
    {0}};
static RedisModuleCommandArg args_lock_owner[] = {ARG_KEY("key", 0, NULL), ARG_STR("owner", NULL), {0}};
static RedisModuleCommandArg args_lock_extend[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("owner", NULL), ARG_INT("lease-ms", "milliseconds from now"), {0}};
static RedisModuleCommandArg args_lock_inspect[] = {
    ARG_KEY("key", 0, NULL),
    {.name = "full", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "FULL",
     .summary = "every holder (mode, state, hold time, lock-delay) and every waiter (waited_ms, timeout_ms), "
                "as field/value pairs",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {0}};
static RedisModuleCommandArg args_lock_holder[] = {
    ARG_STR("owner", NULL), ARG_UNIX_MS("lease-end-unix-time-milliseconds", NULL), ARG_INT("count", NULL),
    ARG_INT("token", NULL), {0}};
static RedisModuleCommandArg args_lock_delay[] = {
    {.name = "delay", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "DELAY"},
    ARG_INT("holder-index", "0-based position among the holders"), ARG_INT("delay-ms", "the holder's lock-delay"),
    {0}};
static RedisModuleCommandArg args_lock_take[] = {
    {.name = "take", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "TAKE"},
    ARG_INT("holder-index", "a holder that takes several permits"), ARG_INT("k", "its permits"), {0}};
static RedisModuleCommandArg args_lock_shared[] = {
    {.name = "shared", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "SHARED"},
    ARG_INT("holder-index", "a holder that reads (a read-write lock)"), {0}};
static RedisModuleCommandArg args_lock_adjust[] = {
    {.name = "adjust", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "ADJUST"},
    ARG_INT("a", "the semaphore pool's adjustment, -1024 to 1024: its size is permits + a, clamped to 0..1024"),
    {0}};
static RedisModuleCommandArg args_lock_state[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("permits", NULL), ARG_INT("last_token", NULL), ARG_INT("nholders", NULL),
    {.name = "holder", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_holder},
    {.name = "lock-delay", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_delay},
    {.name = "shared-holder", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_shared},
    {.name = "weighted-holder", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_take},
    {.name = "pool-adjustment", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .subargs = args_lock_adjust},
    {.name = "ephemeral", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "EPHEMERAL",
     .summary = "a concurrency limit's key (RL.CONCURRENCY), deleted once nobody holds it",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {0}};
#define OPT_POOL_PERMITS \
    OPT_INT("PERMITS", "n", "the semaphore's base size, as its acquirers pass it: needed when the key is missing")
static RedisModuleCommandArg args_lock_add_permits[] = {
    ARG_KEY("key", 0, NULL), ARG_INT("delta", "permits to add, -1024 to 1024 (negative: remove)"), OPT_POOL_PERMITS,
    {0}};
static RedisModuleCommandArg args_lock_pool[] = {ARG_KEY("key", 0, NULL), OPT_POOL_PERMITS, {0}};
static RedisModuleCommandArg args_concurrency[] = {
    ARG_KEY("key", 0, NULL), ARG_STR("holder", "1 to 256 bytes"), ARG_INT("lease-ms", "milliseconds"),
    ARG_INT("limit", "holders at once"), OPT_INT("WAIT", "timeout-ms", "block up to this many milliseconds for a slot"), {0}};
static RedisModuleCommandArg args_concurrency_release[] = {ARG_KEY("key", 0, NULL), ARG_STR("holder", NULL), {0}};

/* LOCK.*_ALL (multi.c): numkeys at argument 1, then the keys. */
static RedisModuleCommandKeySpec ks_all[] = {
    {.flags = RW_ACCESS, .begin_search_type = REDISMODULE_KSPEC_BS_INDEX, .bs.index.pos = 1,
     .find_keys_type = REDISMODULE_KSPEC_FK_KEYNUM, .fk.keynum = {0, 1, 1}},
    {0}};
static RedisModuleCommandArg args_lock_acquire_all[] = {
    ARG_INT("numkeys", "1 to 16 keys, of one hash slot, distinct"),
    {.name = "key", .type = REDISMODULE_ARG_TYPE_KEY, .key_spec_index = 0, .flags = REDISMODULE_CMD_ARG_MULTIPLE},
    ARG_STR("owner", "owner token, 1 to 256 bytes"),
    ARG_INT("lease-ms", "milliseconds"),
    {.name = "write", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "WRITE",
     .summary = "exclusive holds (the default and only mode)", .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    {.name = "session", .type = REDISMODULE_ARG_TYPE_PURE_TOKEN, .key_spec_index = -1, .token = "SESSION",
     .flags = REDISMODULE_CMD_ARG_OPTIONAL},
    OPT_INT("LOCKDELAY", "delay-ms", "milliseconds each key stays taken after its hold ends without a release"),
    OPT_INT("WAIT", "timeout-ms", "block up to this many milliseconds for every key, first come first served, "
                                  "holding none meanwhile"),
    {0}};
static RedisModuleCommandArg args_lock_release_all[] = {
    ARG_INT("numkeys", NULL),
    {.name = "key", .type = REDISMODULE_ARG_TYPE_KEY, .key_spec_index = 0, .flags = REDISMODULE_CMD_ARG_MULTIPLE},
    ARG_STR("owner", NULL), {0}};
static RedisModuleCommandArg args_lock_extend_all[] = {
    ARG_INT("numkeys", NULL),
    {.name = "key", .type = REDISMODULE_ARG_TYPE_KEY, .key_spec_index = 0, .flags = REDISMODULE_CMD_ARG_MULTIPLE},
    ARG_STR("owner", NULL), ARG_INT("lease-ms", "milliseconds from now"), {0}};

mc_cmdinfo lock_cmdinfo[] = {
    {"LOCK.ACQUIRE",
     INFO("Acquires a leased lock or semaphore permit: [granted, fencing token, lease_ms | ms until a lease ends]",
          "O(P) for P permits", -4, KS_RW, args_lock_acquire)},
    {"LOCK.RELEASE", INFO("Releases the owner's hold; serves the next waiter", "O(P)", 3, KS_RW, args_lock_owner)},
    {"LOCK.EXTEND", INFO("Renews the owner's lease (milliseconds from now)", "O(P)", 4, KS_RW, args_lock_extend)},
    {"LOCK.INSPECT",
     INFO("Shows permits, the last fencing token, waiters and holders [owner, lease_ms, token, count (0: a "
          "lock-delay)]; FULL: holders and waiters in detail",
          "O(P + W) for P permits and W waiters", -2,
          KS_RO, args_lock_inspect)},
    {"LOCK.ADD_PERMITS",
     INFO("Changes a semaphore pool's size by delta (signed; holders keep their permits): the size after",
          "O(P) for P permits", -3, KS_RW, args_lock_add_permits)},
    {"LOCK.DRAIN_PERMITS",
     INFO("Takes every permit free now out of a semaphore pool until LOCK.ADD_PERMITS gives them back: how many",
          "O(P) for P permits", -2, KS_RW, args_lock_pool)},
    {"LOCK.AVAILABLE_PERMITS",
     INFO("The permits of a semaphore pool free now (nil: no such key, without PERMITS)", "O(P + W) for P permits and "
          "W waiters", -2, KS_RO, args_lock_pool)},
    {"RL.CONCURRENCY",
     INFO("Concurrency limit with leases: [allowed, remaining, retry_after_ms, reset_after_ms]", "O(N) for N slots",
          -5, KS_RW, args_concurrency)},
    {"RL.CONCURRENCY_RELEASE", INFO("Frees a holder's slot of a concurrency limit: 1, or 0 if it held none", "O(N)", 3,
                                     KS_RW, args_concurrency_release)},
    {"LOCK.ACQUIRE_ALL",
     INFO("Acquires several exclusive locks of one hash slot, all or none: [granted, fencing token (the same on "
          "every key), lease_ms | ms until they could all be free]",
          "O(K) for K keys", -5, ks_all, args_lock_acquire_all)},
    {"LOCK.RELEASE_ALL",
     INFO("Releases the owner's hold on each key: per key, the acquisitions still held (0: released; -1: not "
          "held)", "O(K) for K keys", -4, ks_all, args_lock_release_all)},
    {"LOCK.EXTEND_ALL",
     INFO("Renews the owner's lease on every key (milliseconds from now), all or none", "O(K) for K keys", -5,
          ks_all, args_lock_extend_all)},
    {"LOCK.STATE", INFO("Internal (replication, AOF): replaces a key with an exact lock state", "O(P)", -5, KS_OW,
                         args_lock_state)},
    {NULL},
};
