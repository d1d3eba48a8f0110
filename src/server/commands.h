/* SPDX-License-Identifier: BSD-3-Clause */
/* commands.h -- registering a family's commands: handler, flags, legacy key
 * range, COMMAND DOCS / COMMAND INFO metadata (summary, complexity, arity, key
 * specs, arguments; RedisModule_SetCommandInfo, 7.0+) and, where the server has
 * them, ACL categories. Each family keeps its metadata in <family>_info.c,
 * written with the macros below. */
#ifndef MC_COMMANDS_H
#define MC_COMMANDS_H

#include <stddef.h>

#include "redismodule.h"

#define MC_SINCE "0.1.0"

/* A command to register: handler, flags, legacy key range. */
typedef struct mc_command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int firstkey, lastkey, keystep;
} mc_command;

/* The COMMAND DOCS metadata of one command (a family's table ends with {NULL}). */
typedef struct mc_cmdinfo {
    const char *name;
    RedisModuleCommandInfo info;
} mc_cmdinfo;

/* Register `n` commands, each with its entry of `infos` (found by name; a
 * command without one is an error) and ACL categories: "write" or "read", plus
 * "fast", plus "mcaptcha" where the server has module categories (7.4+).
 * REDISMODULE_OK or REDISMODULE_ERR. */
int mc_register_commands(RedisModuleCtx *ctx, const mc_command *cmds, size_t n, mc_cmdinfo *infos);

/* ==== Writing metadata ==== */

/* Key specs: the key at argument `pos_`. */
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

/* The usual key-spec lists: one key at argument 1 (two for a rename). */
#define KS_RO ((RedisModuleCommandKeySpec[]){KEY_AT(1, RO_ACCESS), {0}})
#define KS_RW ((RedisModuleCommandKeySpec[]){KEY_AT(1, RW_ACCESS), {0}})
#define KS_INSERT ((RedisModuleCommandKeySpec[]){KEY_AT(1, RW_INSERT), {0}})
#define KS_OW ((RedisModuleCommandKeySpec[]){KEY_AT(1, OW_UPDATE), {0}})
#define KS_DELETE ((RedisModuleCommandKeySpec[]){KEY_AT(1, RM_DELETE), {0}})
#define KS_TAKE ((RedisModuleCommandKeySpec[]){KEY_AT(1, RW_DELETE), {0}})
#define KS_RENAME ((RedisModuleCommandKeySpec[]){KEY_AT(1, RW_DELETE), KEY_AT(2, OW_UPDATE), {0}})

/* Arguments. */
#define ARG_KEY(name_, spec_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_KEY, .key_spec_index = (spec_), .summary = (summary_)}
#define ARG_STR(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_STRING, .key_spec_index = -1, .summary = (summary_)}
#define ARG_INT(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1, .summary = (summary_)}
#define ARG_UNIX_MS(name_, summary_) \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_UNIX_TIME, .key_spec_index = -1, .summary = (summary_)}
/* An optional "TOKEN value" pair: `name_` names the value with its unit (it is
 * also the display text newer servers show in hints: [WAIT timeout-ms]). */
#define OPT_INT(token_, name_, summary_)                                                      \
    {.name = (name_), .type = REDISMODULE_ARG_TYPE_INTEGER, .key_spec_index = -1, .token = (token_), \
     .flags = REDISMODULE_CMD_ARG_OPTIONAL, .summary = (summary_)}

/* One command's metadata. */
#define INFO(summary_, complexity_, arity_, ks_, args_)                                      \
    {                                                                                       \
        .version = REDISMODULE_COMMAND_INFO_VERSION, .summary = (summary_),                 \
        .complexity = (complexity_), .since = MC_SINCE, .arity = (arity_), .key_specs = (ks_), \
        .args = (args_)                                                                     \
    }

#endif
