/* SPDX-License-Identifier: BSD-3-Clause */
/* ratelimit_glue.h -- the rate-limit family's values and what its glue files share.
 *
 * Two module types:
 *   mcap-gcra  a GCRA limiter (core/gcra.h): the TAT and the parameters last used,
 *              32 bytes; the key expires at the TAT, when the limiter is full again.
 *   mcap-wndw  a sliding-window limiter on the sparse window counter (core/window.h):
 *              every hit counts for the window and at most one slot longer (a slot
 *              is at most 1 s for windows up to ~36 h; window/256 for a key written
 *              by a release before encver 2, until it empties, and for
 *              MCAPTCHA_CACHE.COUNT counters); memory grows with the slots that
 *              hold hits (core/window.h); the key expires when the last hit has left.
 * Files: ratelimit_type.c (the types: RDB, AOF, digest, copy, memory),
 * limiter.c (one request evaluated and applied, shared by every command and the
 * wait queue), ratelimit_cmd.c (CL.THROTTLE, redis-cell compatible, and the
 * native RL.* family, all times in milliseconds), ratelimit_state_cmd.c (the
 * internal commands of replication and the AOF), count_cmd.c (MCAPTCHA_CACHE.COUNT, a
 * bare leaky-bucket counter on mcap-wndw), fixed_cmd.c (RL.FIXED, a fixed-window
 * counter on a plain string key: no module type), policy.c (stored policies: RL.POLICY_*,
 * the node-wide table and its RDB aux data, type mcap-plcy), ratelimit_info.c
 * (COMMAND DOCS). */
#ifndef MC_RATELIMIT_GLUE_H
#define MC_RATELIMIT_GLUE_H

#include <stdint.h>

#include "core/bucket.h"
#include "core/window.h"
#include "core/gcra.h"
#include "core/policy.h"
#include "core/policy_entry.h"
#include "redismodule.h"
#include "server/commands.h"

#define GCRA_TYPE_NAME "mcap-gcra"
#define WINDOW_TYPE_NAME "mcap-wndw"
#define GCRA_ENCVER_1 1 /* tat_us, emission_us, limit */
#define GCRA_ENCVER_LATEST GCRA_ENCVER_1
#define WINDOW_ENCVER_1 1 /* window_ms, limit, then the bucket (bucket_io.c): slots of window/256 */
#define WINDOW_ENCVER_2_SLOT_WIDTH 2 /* window_ms, limit, slot_ms, last_ms, n, n x (slot, count) */
#define WINDOW_ENCVER_LATEST WINDOW_ENCVER_2_SLOT_WIDTH
#define POLICY_TYPE_NAME "mcap-plcy" /* holds no key: the policy table as RDB aux data */
#define POLICY_ENCVER_1 1 /* count, then per policy: name, kind, rate, period_ms, burst */
#define POLICY_ENCVER_2 2 /* count, then per entry: name, stamp_ms, node id, deleted, kind, rate, period_ms, burst */
#define POLICY_ENCVER_LATEST POLICY_ENCVER_2
#define POLICY_ENTRIES_MAX (2 * POLICY_COUNT_MAX) /* policies and tombstones per node */

#define CMD_GCRA_SET "RL.GCRA_SET"
#define GCRA_MAX_LIMIT (1ULL << 40) /* capacity: max_burst + 1 at most */
#define CMD_WINDOW_SET "RL.WINDOW_SET"
#define CMD_WINDOW_HIT_NAME "RL.WINDOW_HIT"
#define MAX_BURST (GCRA_MAX_LIMIT - 1) /* the largest BURST - 1 (max_burst of CL.THROTTLE) */
#define MAX_COST UINT32_MAX             /* the largest COST or refund */

typedef struct gcra_value {
    uint64_t tat_us;    /* theoretical arrival time, Unix microseconds */
    gcra_params params; /* as last used */
} gcra_value;

typedef struct window_value {
    uint64_t limit;     /* hits allowed within the window */
    swindow hits;       /* window_ms = hits.window_ms, slot width hits.slot_ms */
} window_value;

/* How a window created by a write cuts time (RL.WINDOW_HIT's last argument):
 * WINDOW_WIDTH_LEGACY window/256 (MCAPTCHA_CACHE.COUNT, and releases before
 * encver 2), WINDOW_WIDTH_FINE sw_fine_width (RL.WINDOW, RL.MULTI). */
#define WINDOW_WIDTH_LEGACY 0
#define WINDOW_WIDTH_FINE 1
static inline uint64_t window_width(uint64_t window_ms, int which) {
    return which == WINDOW_WIDTH_FINE ? sw_fine_width(window_ms) : sw_legacy_width(window_ms);
}

extern RedisModuleType *GcraType;
extern RedisModuleType *WindowType;

int ratelimit_type_register(RedisModuleCtx *ctx);
/* The public commands (ratelimit_cmd.c, which also registers count_cmd.c's and fixed_cmd.c's), then the
 * internal ones (ratelimit_state_cmd.c). */
int ratelimit_cmd_register(RedisModuleCtx *ctx);
int ratelimit_count_cmd_register(RedisModuleCtx *ctx);
int ratelimit_fixed_cmd_register(RedisModuleCtx *ctx);
int ratelimit_state_cmd_register(RedisModuleCtx *ctx);
/* The policy type, its persistence event and the RL.POLICY_* commands (policy.c). */
int ratelimit_policy_register(RedisModuleCtx *ctx);

/* The definition of policy `name` into *out when it exists and is of `kind`:
 * 0; else reply an error naming it and `cmd` (unknown, or of the other kind)
 * and return -1. */
int rl_policy_resolve_or_reply(RedisModuleCtx *ctx, RedisModuleString *name, policy_kind kind, const char *cmd,
                               policy_def *out);

/* INFO fields rl_policies, rl_policy_entries, rl_policy_digest (in the section
 * the caller opened), then policy_sync.c's. */
void rl_policy_info(RedisModuleInfoCtx *ctx);

/* ---- the policy table as policy_sync.c shares it over the cluster bus ---- */
/* Called after a command (not a replay) wrote version `e` of `name`. */
typedef void (*rl_policy_changed_fn)(RedisModuleCtx *ctx, const char *name, size_t len, const policy_entry *e);
extern rl_policy_changed_fn rl_policy_changed_hook; /* set by policy_sync.c */
/* Keep `e` when it wins over the version of `name` held (replicating it as
 * RL.POLICY_PUT when `replicate`): 1 kept, 0 older or the same, -1 table full. */
int rl_policy_merge(RedisModuleCtx *ctx, const char *name, size_t len, const policy_entry *e, int replicate);
/* The table's digest (sum of the entries' hashes) and its entries, tombstones included. */
uint64_t rl_policy_digest(void);
uint64_t rl_policy_entries(void);
void rl_policy_foreach(void (*fn)(const char *name, size_t len, const policy_entry *e, void *arg), void *arg);
/* The cluster bus side (policy_sync.c): message receiver, anti-entropy timer. */
int ratelimit_policy_sync_register(RedisModuleCtx *ctx);
void rl_policy_sync_info(RedisModuleInfoCtx *ctx);

/* COMMAND DOCS metadata of the family (ratelimit_info.c). */
extern mc_cmdinfo ratelimit_cmdinfo[];

/* The absolute time (Unix ms) at which a key holding this value can expire. */
static inline long long gcra_expire_at_ms(const gcra_value *v) {
    return (long long)((v->tat_us + 999) / 1000);
}

/* Arguments after the key of RL.WINDOW_SET rebuilding `v`: window_ms limit
 * last_ms nslots [slot count]... [SLOTMS w] (SLOTMS only when the width is not
 * window/256, so what earlier releases wrote and read is unchanged); free with
 * mc_free_args. */
RedisModuleString **window_state_args(const window_value *v, size_t *n);

/* Parse RL.WINDOW_SET's arguments; NULL and *err (no code) on failure. */
window_value *window_from_args(RedisModuleString **argv, int argc, const char **err);

void window_value_free(window_value *v);

/* Add `cost` hits at at_ms to the window at the open key -- unconditionally, as
 * RL.WINDOW_HIT replays an allowed RL.WINDOW and MCAPTCHA_CACHE.COUNT counts --
 * creating it with window_ms and the slot width `width` (WINDOW_WIDTH_*) when
 * the key is empty, or when it holds another width and counts nothing at at_ms
 * (then its clock mark is kept), and set the key's expiry to
 * when the window empties. `limit` is stored on a new window, and on an existing
 * one unless keep_limit. Returns LB_OK with *count (the hits now counted), or
 * an lb_status error; the caller has checked window_ms and at_ms against the
 * bucket's bounds, so LB_ERR_RANGE means only a window of another length (its
 * length in *have_ms). On any error nothing is written. */
lb_status window_hit(RedisModuleKey *key, uint64_t window_ms, int width, uint64_t limit, int keep_limit,
                     uint64_t at_ms, uint32_t cost, uint64_t *count, uint64_t *have_ms);

/* Replicate RL.WINDOW_HIT key window_ms limit at_ms cost width: `cost` hits
 * added at at_ms (absolute, ms), the state an allowed RL.WINDOW or
 * MCAPTCHA_CACHE.COUNT wrote; width is WINDOW_WIDTH_* (0 is what releases
 * before encver 2 sent). window_arg and limit_arg, when both given, are the
 * client's strings for window_ms and limit, sent as they are (no formatting,
 * no allocation); NULL formats the numbers. */
void rl_replicate_hit(RedisModuleCtx *ctx, RedisModuleString *keyname, uint64_t window_ms, uint64_t limit,
                      RedisModuleString *window_arg, RedisModuleString *limit_arg, uint64_t at_ms, uint64_t cost,
                      int width);

/* Replicate RL.WINDOW_SET with the whole state of `v`. */
void rl_replicate_window_state(RedisModuleCtx *ctx, RedisModuleString *keyname, const window_value *v);

/* ==== One limiter request, shared by the commands and the wait queues ==== */

typedef enum rl_kind { RL_GCRA, RL_WINDOW } rl_kind;

typedef struct rl_request {
    rl_kind kind;
    gcra_params gcra;     /* RL_GCRA */
    uint64_t limit;       /* RL_WINDOW: hits per window */
    uint64_t window_ms;   /* RL_WINDOW */
    uint64_t cost;        /* units this request takes (0: a peek) */
    uint64_t lag_ms;      /* AT in the past: the clock minus AT (else 0); the key's expiry is
                           * pushed back by it, so state a lagging caller still needs stays */
    int adapt_window;     /* RL_WINDOW from a stored policy: a key holding a window of another
                           * length is carried over (sw_rewidth) instead of refused */
    RedisModuleString *limit_arg, *window_arg; /* RL_WINDOW: the client's own arguments for limit
                           * and window_ms, replicated as they came (the parser takes canonical
                           * decimals only, so the bytes are those of the numbers); NULL: from a
                           * policy, or a copy that outlives the command (a waiter) */
} rl_request;

typedef struct rl_result {
    int allowed;             /* 1 when the request fits (and, if applied, was taken) */
    uint64_t remaining;      /* units that still fit after it */
    int64_t retry_after_ms;  /* -1 when allowed or when it can never fit */
    uint64_t reset_after_ms; /* until the limiter is full again */
} rl_result;

#define RL_OK 0
#define RL_ERR_WRONGTYPE 1
#define RL_ERR_WINDOW 2   /* the key holds a window of another length */
#define RL_ERR_OVERFLOW 3

/* Evaluate `r` on `keyname` (in the context's selected db) at now_us. With
 * apply, an allowed request with cost > 0 is taken: the state is written, its
 * expiry set, and the change replicated with absolute times. Returns RL_OK and
 * fills *out, or an RL_ERR_* code having changed nothing. */
int rl_eval(RedisModuleCtx *ctx, RedisModuleString *keyname, const rl_request *r, uint64_t now_us,
            int apply, rl_result *out);

/* Reply for an RL_ERR_* code. */
int rl_reply_error(RedisModuleCtx *ctx, int code);

/* Reply [allowed, remaining, retry_after_ms, reset_after_ms]. */
int rl_reply_result(RedisModuleCtx *ctx, const rl_result *r);

/* Open `keyname` with `mode`: RL_OK when it is empty or of `type` (*key open),
 * else RL_ERR_WRONGTYPE (closed). */
int rl_open(RedisModuleCtx *ctx, RedisModuleString *keyname, int mode, RedisModuleType *type, RedisModuleKey **key);

/* Store a GCRA state at the open key (creating the value), expire the key at
 * the TAT plus `lag_ms` (rl_request) and replicate RL.GCRA_SET with these
 * absolute numbers (and, when lag_ms > 0, the PEXPIREAT it used). */
void rl_store_gcra(RedisModuleCtx *ctx, RedisModuleKey *key, RedisModuleString *keyname, uint64_t tat_us,
                   const gcra_params *p, uint64_t lag_ms);

#endif
