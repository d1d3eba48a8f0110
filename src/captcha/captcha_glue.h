/* SPDX-License-Identifier: BSD-3-Clause */
/* captcha_glue.h -- what the captcha family's Redis files share: its module
 * types, their names and encoding versions, the keys derived from a captcha
 * name, and the internal commands that carry absolute times to replicas and the
 * AOF. The algorithms themselves are in core/captcha.h and core/bucket.h. */
#ifndef MC_CAPTCHA_GLUE_H
#define MC_CAPTCHA_GLUE_H

#include <stddef.h>

#include "core/captcha.h"
#include "redismodule.h"
#include "server/commands.h"

/* Module type names (9 characters). The captcha and challenge names are the
 * original Rust module's, so that its RDB files load (encver 0, JSON payloads;
 * docs/protocol.md, "Original key layout and RDB payloads"). */
#define CAPTCHA_TYPE_NAME "mcaptmcap"
#define CHALLENGE_TYPE_NAME "mcaptchal"

/* Encoding versions of our payloads; see captcha_type.c for the layouts. */
#define CAPTCHA_ENCVER_LEGACY_JSON 0  /* the original module's JSON */
#define CAPTCHA_ENCVER_BINARY 1       /* ours: integers, absolute ms timestamps */
#define CAPTCHA_ENCVER_LATEST CAPTCHA_ENCVER_BINARY
#define CHALLENGE_ENCVER_LEGACY_JSON 0
#define CHALLENGE_ENCVER_BINARY 1
#define CHALLENGE_ENCVER_LATEST CHALLENGE_ENCVER_BINARY

/* Key prefixes (the original's layout). */
#define CAPTCHA_KEY_PREFIX "mcap:captcha::{"
#define CHALLENGE_KEY_PREFIX "mcap:CHALLENGE:{"

/* Internal commands: their first argument is the real Redis key. */
#define CMD_VISIT_AT "MCAPTCHA_CACHE.VISIT_AT"
#define CMD_CAPTCHA_SET "MCAPTCHA_CACHE.CAPTCHA_SET"
#define CMD_CHALLENGE_SET "MCAPTCHA_CACHE.CHALLENGE_SET"

extern RedisModuleType *CaptchaType;
extern RedisModuleType *ChallengeType;

/* Register the two types (captcha_type.c), the original's auxiliary types
 * (legacy_type.c) and the commands (captcha_cmd.c). */
int captcha_type_register(RedisModuleCtx *ctx);
int legacy_type_register(RedisModuleCtx *ctx);
int captcha_cmd_register(RedisModuleCtx *ctx);
/* The `captcha` INFO section: commands' outcomes since the server started. */
void captcha_info(RedisModuleInfoCtx *ctx);
/* MCAPTCHA_CACHE.MODULE_LIST and the module-list-first config (module_list.c;
 * the config itself is server/config.c's, registered before). */
int module_list_register(RedisModuleCtx *ctx);

/* The text form of a captcha's state (captcha_type.c): the arguments after the
 * key of an MCAPTCHA_CACHE.CAPTCHA_SET that rebuilds it exactly. Free with
 * mc_free_args. */
RedisModuleString **captcha_state_args(const captcha *c, size_t *n);
/* Parse those arguments; NULL and a message (no ERR code) in *err on failure.
 * An unreadable value (captcha.h) is carried as: UNREADABLE <bytes>. */
captcha *captcha_from_args(RedisModuleString **argv, int argc, const char **err);

/* A challenge kept as the original's unreadable bytes (captcha_type.c). */
challenge *challenge_unreadable(const char *bytes, size_t len);

/* CLIENT TRACKING / WATCH (tracking.c): signal the captcha name a public
 * command declared, or the name inside a derived key (internal commands). */
void captcha_touched(RedisModuleCtx *ctx, RedisModuleString *name);
void captcha_touched_key(RedisModuleCtx *ctx, RedisModuleString *key);

/* COMMAND DOCS metadata of the family (captcha_info.c). */
extern mc_cmdinfo captcha_cmdinfo[];

#endif
