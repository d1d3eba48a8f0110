/* ratelimit.h -- the rate-limit family's values and what its glue files share.
 *
 * Two module types:
 *   mcap-gcra  a GCRA limiter (gcra.h): the TAT and the parameters last used,
 *              32 bytes; the key expires at the TAT, when the limiter is full again.
 *   mcap-wndw  a sliding-window limiter on the leaky-bucket counter (bucket.h):
 *              every hit counts for the window (at most window/256 longer), memory
 *              bounded by 4 KiB at any traffic; the key expires when the last hit
 *              has left.
 * Commands (ratelimit_cmd.c): CL.THROTTLE (redis-cell compatible) and the native
 * RL.* family, all times in milliseconds. */
#ifndef MC_RATELIMIT_H
#define MC_RATELIMIT_H

#include <stdint.h>

#include "bucket.h"
#include "gcra.h"
#include "module.h"

#define GCRA_TYPE_NAME "mcap-gcra"
#define WINDOW_TYPE_NAME "mcap-wndw"
#define GCRA_ENCVER_1 1 /* tat_us, emission_us, limit */
#define GCRA_ENCVER_LATEST GCRA_ENCVER_1
#define WINDOW_ENCVER_1 1 /* window_ms, limit, then the bucket (bucket_io.c) */
#define WINDOW_ENCVER_LATEST WINDOW_ENCVER_1

#define CMD_GCRA_SET "RL.GCRA_SET"
#define GCRA_MAX_LIMIT (1ULL << 40) /* capacity: max_burst + 1 at most */
#define CMD_WINDOW_SET "RL.WINDOW_SET"
#define CMD_WINDOW_HIT_NAME "RL.WINDOW_HIT"

typedef struct gcra_value {
    uint64_t tat_us;    /* theoretical arrival time, Unix microseconds */
    gcra_params params; /* as last used */
} gcra_value;

typedef struct window_value {
    uint64_t limit;     /* hits allowed within the window */
    lbucket hits;       /* window_ms = hits.window_ms */
} window_value;

extern RedisModuleType *GcraType;
extern RedisModuleType *WindowType;

int ratelimit_type_register(RedisModuleCtx *ctx);
int ratelimit_cmd_register(RedisModuleCtx *ctx);

/* The absolute time (Unix ms) at which a key holding this value can expire. */
static inline long long gcra_expire_at_ms(const gcra_value *v) {
    return (long long)((v->tat_us + 999) / 1000);
}

/* Arguments after the key of RL.WINDOW_SET rebuilding `v`: window_ms limit
 * last_ms nslots [slot count]...; free with captcha_free_args. */
RedisModuleString **window_state_args(const window_value *v, size_t *n);

/* Parse RL.WINDOW_SET's arguments; NULL and *err (no code) on failure. */
window_value *window_from_args(RedisModuleString **argv, int argc, const char **err);

void window_value_free(window_value *v);

/* ==== One limiter request, shared by the commands and the wait queues ==== */

typedef enum rl_kind { RL_GCRA, RL_WINDOW } rl_kind;

typedef struct rl_request {
    rl_kind kind;
    gcra_params gcra;     /* RL_GCRA */
    uint64_t limit;       /* RL_WINDOW: hits per window */
    uint64_t window_ms;   /* RL_WINDOW */
    uint64_t cost;        /* units this request takes (0: a peek) */
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

/* Allowed/refused counters for INFO, indexed by RL_STAT_*. */
enum { RL_STAT_THROTTLE, RL_STAT_GCRA, RL_STAT_WINDOW, RL_STAT_MULTI, RL_STAT_CONCURRENCY, RL_STAT_COUNT };
void rl_stat(int which, int allowed);

#endif
