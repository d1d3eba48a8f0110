/* module.h -- what the Redis glue files share: the module types, the clock,
 * and the names of the commands. Only glue files include it (it pulls in
 * redismodule.h); the pure cores do not. */
#ifndef MC_MODULE_H
#define MC_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "redismodule.h"

#define MODULE_NAME "mcaptcha_cache"
#define MODULE_VERSION_STRING "0.1.0"
#define MODULE_VERSION 100 /* MMmmpp: 0.1.0 */

/* Module type names (9 characters). The captcha and challenge names are the
 * original Rust module's, so that its RDB files load (encver 0, JSON payloads). */
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
extern int mc_cluster_enabled; /* set at load: cluster-enabled yes */
extern RedisModuleType *ChallengeType;

/* The clock: Unix milliseconds. Read it once per command and pass it down.
 * Uses RedisModule_CachedMicroseconds where the server has it (7.2+: frozen
 * within a command, MULTI or script), else RedisModule_Milliseconds. */
uint64_t mc_now_ms(void);
/* The same clock in Unix microseconds (millisecond resolution on Redis 7.0). */
uint64_t mc_now_us(void);

/* Whether this node's shard (it, or its primary on a replica) serves hash slot
 * `slot`; 1 outside a cluster. From CLUSTER SLOTS, cached for 100 ms. */
int mc_slot_is_mine(RedisModuleCtx *ctx, unsigned slot);
/* The same, read from CLUSTER SLOTS now (a slot may just have moved away). */
int mc_slot_is_mine_fresh(RedisModuleCtx *ctx, unsigned slot);

/* Open `keyname` with `mode` and check it is empty or holds `type`. 0 with *key
 * open (NULL when a read-only open found no key), or -1 with the key closed
 * when it holds another type (the caller replies WRONGTYPE). */
int mc_open_typed(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type,
                  RedisModuleKey **key);

/* "<db>:<key>", binary-safe: the id of a key in the module's own dicts. */
RedisModuleString *mc_db_key_id(int db, RedisModuleString *key);

/* The same id as bytes, in `stackbuf` when it fits in `cap` bytes, else in a
 * RedisModule_Alloc'ed buffer the caller frees (when the result != stackbuf). */
char *mc_db_key_buf(int db, RedisModuleString *key, char *stackbuf, size_t cap, size_t *len);

int captcha_type_register(RedisModuleCtx *ctx);

/* The text form of a captcha's state (captcha_type.c): the arguments after the
 * key of an MCAPTCHA_CACHE.CAPTCHA_SET that rebuilds it exactly. */
struct captcha;
RedisModuleString **captcha_state_args(const struct captcha *c, size_t *n);
void captcha_free_args(RedisModuleString **argv, size_t n);
/* Parse those arguments; NULL and a message (no ERR code) in *err on failure. */
struct captcha *captcha_from_args(RedisModuleString **argv, int argc, const char **err);
int captcha_cmd_register(RedisModuleCtx *ctx);
int legacy_type_register(RedisModuleCtx *ctx);
int lock_type_register(RedisModuleCtx *ctx);
int lock_cmd_register(RedisModuleCtx *ctx);

/* INFO sections of the families (module.c registers the one info callback). */
void ratelimit_info(RedisModuleInfoCtx *ctx);
void lock_info(RedisModuleInfoCtx *ctx);

/* A command to register: handler, flags, legacy key range (cmdinfo.c has the
 * key specs and docs). */
typedef struct mc_command {
    const char *name;
    RedisModuleCmdFunc fn;
    const char *flags;
    int firstkey, lastkey, keystep;
} mc_command;

/* Register commands with their COMMAND DOCS metadata and, where the server has
 * them (7.2+, 7.4+), ACL categories. REDISMODULE_OK or REDISMODULE_ERR. */
int mc_register_commands(RedisModuleCtx *ctx, const mc_command *cmds, size_t n);

/* Attach COMMAND DOCS metadata (summary, arity, key specs, arguments) to the
 * command called `name`. Returns REDISMODULE_OK/ERR. */
int cmdinfo_set(RedisModuleCtx *ctx, const char *name);

#endif
