/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha_info.c -- COMMAND DOCS / COMMAND INFO metadata of the captcha family (the mCaptcha commands and their internal replication commands): summary, complexity,
 * arity, key specs and arguments. Data only; captcha_cmd.c registers the handlers. */
#include "captcha/captcha_glue.h"
#include "server/bucket_io.h"
#include "server/commands.h"

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
static RedisModuleCommandArg args_captcha_set[] = {
    ARG_KEY("key", 0, "the captcha's Redis key"),
    ARG_INT("duration", "seconds each visit counts"),
    ARG_INT("nlevels", NULL),
    {.name = "level", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE, .subargs = args_level_pair},
    ARG_UNIX_MS("last-unix-time-milliseconds", "latest clock reading the counter has seen"),
    ARG_INT("nslots", NULL),
    {.name = "slot", .type = REDISMODULE_ARG_TYPE_BLOCK, .key_spec_index = -1,
     .flags = REDISMODULE_CMD_ARG_MULTIPLE | REDISMODULE_CMD_ARG_OPTIONAL, .subargs = mc_bucket_slot_args},
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

mc_cmdinfo captcha_cmdinfo[] = {
    {"MCAPTCHA_CACHE.ADD_CAPTCHA",
     INFO("Registers a captcha: its difficulty levels and the duration (seconds) each visit counts",
          "O(L log L) for L levels", 3, KS_INSERT, args_add_captcha)},
    {"MCAPTCHA_CACHE.ADD_VISITOR",
     INFO("Counts a visit for `duration` seconds and returns the difficulty that applies",
          "O(1) amortized", 2, KS_RW, args_name)},
    {"MCAPTCHA_CACHE.GET",
     INFO("Returns the number of visits still counting", "O(1) amortized; O(D/256 slots) at worst", 2,
          KS_RO, args_name)},
    {"MCAPTCHA_CACHE.CAPTCHA_EXISTS",
     INFO("Returns 0 when the captcha exists and 1 when it does not", "O(1)", 2, KS_RO, args_name)},
    {"MCAPTCHA_CACHE.DELETE_CAPTCHA", INFO("Deletes a captcha", "O(1)", 2, KS_DELETE, args_name)},
    {"MCAPTCHA_CACHE.RENAME_CAPTCHA",
     INFO("Moves a captcha, live count included, to a new name", "O(L + D/256)", 3, KS_RENAME,
          args_rename)},
    {"MCAPTCHA_CACHE.ADD_CHALLENGE",
     INFO("Stores a one-shot challenge that expires after its duration (seconds)", "O(1)", 3,
          KS_INSERT, args_add_challenge)},
    {"MCAPTCHA_CACHE.GET_CHALLENGE",
     INFO("Returns a challenge and deletes it (one-shot)", "O(1)", 3, KS_TAKE, args_challenge)},
    {"MCAPTCHA_CACHE.DELETE_CHALLENGE", INFO("Deletes a challenge", "O(1)", 3, KS_TAKE, args_challenge)},
    {CMD_VISIT_AT,
     INFO("Internal (replication, AOF): one visit at an explicit Unix time in milliseconds",
          "O(1) amortized", 3, KS_RW, args_visit_at)},
    {CMD_CAPTCHA_SET,
     INFO("Internal (replication, AOF): replaces a key with an exact captcha state", "O(L + S)", -8,
          KS_OW, args_captcha_set)},
    {CMD_CHALLENGE_SET,
     INFO("Internal (replication, AOF): replaces a key with a challenge expiring at PXAT", "O(1)",
          -4, KS_OW, args_challenge_set)},
    {NULL},
};
