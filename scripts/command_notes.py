# SPDX-License-Identifier: BSD-3-Clause
"""What COMMAND DOCS cannot say about each command: its reply, its errors and an
example. scripts/commands_md.py merges these with the module's own COMMAND DOCS
and COMMAND INFO (summary, syntax, arguments, complexity, flags) into
docs/commands.md. Every registered command must have an entry here; the test
tests/integration/server/test_commands_md.py fails when one is missing or when
docs/commands.md is out of date (`make commands-md` rewrites it).

An example is a redis-cli session: lines "> command" (typed as into redis-cli),
each followed by its reply as redis-cli prints it, `…` for what depends on the
clock (times, fencing tokens). tests/integration/server/test_doc_examples.py runs
the examples of docs/commands.md in the order the file shows them (families, then
commands in byte order) on one fresh server, so an example may use what an
example above it made and must leave what a later one needs. An internal command's
example is a bare command line, shown inline and not run (clients may not call it)."""

INTERNAL = "Internal: accepted only from replication and AOF loading unless the module is loaded with `INTERNAL-COMMANDS yes`; clients get `ERR <command> is internal …`."
RL_REPLY = "Array `[allowed (1|0), remaining, retry_after_ms (-1 when allowed or when it can never fit), reset_after_ms]`."

NOTES = {
    # ---- captcha family (the mCaptcha protocol; docs/protocol.md) ----
    "MCAPTCHA_CACHE.ADD_CAPTCHA": (
        "`OK`. A `duration` above 4294967295 s (up to 2^63 − 1) is kept as 4294967295 s.",
        "`ERR captcha already exists`; `ERR invalid JSON: …`; `ERR invalid config: …` (naming the rule broken).",
        r'''> MCAPTCHA_CACHE.ADD_CAPTCHA mysite '{"levels":[{"visitor_threshold":5,"difficulty_factor":500}],"duration":30}'
OK'''),
    "MCAPTCHA_CACHE.ADD_VISITOR": (
        "Bulk string, JSON `{\"duration\":<seconds>,\"difficulty_factor\":<n>}` for the count after this visit.",
        "`Captcha not found` (bare, no ERR code); `ERR visitor count limit reached …`.",
        r'''> MCAPTCHA_CACHE.ADD_VISITOR mysite
"{\"duration\":30,\"difficulty_factor\":500}"'''),
    "MCAPTCHA_CACHE.GET": (
        "Integer: the visits still counting.", "`Captcha not found` (bare).", r'''> MCAPTCHA_CACHE.GET mysite
(integer) 1'''),
    "MCAPTCHA_CACHE.CAPTCHA_EXISTS": (
        "Integer `0` when the captcha exists, `1` when it does not (inverted, as mCaptcha expects).", "None.",
        r'''> MCAPTCHA_CACHE.CAPTCHA_EXISTS mysite
(integer) 0
> MCAPTCHA_CACHE.CAPTCHA_EXISTS othersite
(integer) 1'''),
    "MCAPTCHA_CACHE.DELETE_CAPTCHA": ("`OK`.", "`Captcha not found` (bare).", r'''> MCAPTCHA_CACHE.ADD_CAPTCHA oldsite '{"levels":[{"visitor_threshold":5,"difficulty_factor":500}],"duration":30}'
OK
> MCAPTCHA_CACHE.DELETE_CAPTCHA oldsite
OK
> MCAPTCHA_CACHE.DELETE_CAPTCHA oldsite
(error) Captcha not found'''),
    "MCAPTCHA_CACHE.RENAME_CAPTCHA": (
        "`OK`, also when `name` does not exist.",
        "`ERR target captcha already exists`; `CROSSSLOT` in Redis Cluster when the names hash to different slots.",
        r'''> MCAPTCHA_CACHE.RENAME_CAPTCHA mysite mysite2
OK
> MCAPTCHA_CACHE.GET mysite2
(integer) 1'''),
    "MCAPTCHA_CACHE.ADD_CHALLENGE": (
        "`OK`; the challenge expires `duration` seconds later. A `duration` above 4294967295 s (up to 2^63 − 1) is kept as 4294967295 s, as ADD_CAPTCHA's.",
        "`Challenge already exists` (bare); `ERR invalid JSON: …`; `ERR invalid challenge: …`.",
        r'''> MCAPTCHA_CACHE.ADD_CHALLENGE mysite '{"difficulty":500,"duration":30,"challenge":"n0nce"}'
OK'''),
    "MCAPTCHA_CACHE.GET_CHALLENGE": (
        "Bulk string, JSON `{\"difficulty_factor\":<n>,\"duration\":<seconds>}`; the challenge is deleted (one-shot).",
        "`Challenge not found` (bare).", r'''> MCAPTCHA_CACHE.GET_CHALLENGE mysite n0nce
"{\"difficulty_factor\":500,\"duration\":30}"
> MCAPTCHA_CACHE.GET_CHALLENGE mysite n0nce
(error) Challenge not found'''),
    "MCAPTCHA_CACHE.DELETE_CHALLENGE": ("`OK`.", "`Challenge not found` (bare).",
                                        r'''> MCAPTCHA_CACHE.ADD_CHALLENGE mysite '{"difficulty":500,"duration":30,"challenge":"spare"}'
OK
> MCAPTCHA_CACHE.DELETE_CHALLENGE mysite spare
OK'''),
    "MCAPTCHA_CACHE.COUNT": (
        "Integer: the count after this increment. The key is the counter name (type `mcap-wndw`, the sliding window of `RL.WINDOW`); each increment leaves `leak-rate-s` seconds later (at most leak-rate/256 later: a counter keeps the captchas' slots) and the key expires when the count is back to 0. Replicates as `RL.WINDOW_HIT` with the time it used.",
        "`ERR leak-rate (seconds) must be an integer from 1 to 4398046511`; `ERR the counter's leak-rate is 10 s, not 20 s; use the same leak-rate or delete the key` (nothing written); `ERR counter limit reached …`; `WRONGTYPE`.",
        r'''> MCAPTCHA_CACHE.COUNT mysite:visits 30
(integer) 1
> MCAPTCHA_CACHE.COUNT mysite:visits 30
(integer) 2'''),
    "MCAPTCHA_CACHE.MODULE_LIST": (
        "The reply of `MODULE LIST`, same shape and protocol, with `mcaptcha_cache` first.",
        "None. A client's `MODULE LIST` runs this command while `module-list-first` is on.",
        r'''> MCAPTCHA_CACHE.MODULE_LIST
1) 1) "name"
   2) "mcaptcha_cache"
   3) "ver"
   4) (integer) …
…'''),
    "MCAPTCHA_CACHE.VISIT_AT": ("Integer: the count after the visit. " + INTERNAL, "`ERR no captcha at this key`; range errors.",
                                "MCAPTCHA_CACHE.VISIT_AT mcap:captcha::{mysite} 1700000000000"),
    "MCAPTCHA_CACHE.CAPTCHA_SET": ("`OK`. " + INTERNAL, "`ERR invalid captcha state: …`.",
                                   "MCAPTCHA_CACHE.CAPTCHA_SET mcap:captcha::{mysite} 30 1 5 500 1700000000000 0"),
    "MCAPTCHA_CACHE.CHALLENGE_SET": ("`OK`. " + INTERNAL, "Range errors; `ERR unknown option '…' for MCAPTCHA_CACHE.CHALLENGE_SET; expected PXAT unix-time-milliseconds`; `ERR PXAT needs a value (unix-time-milliseconds)`.",
                                     "MCAPTCHA_CACHE.CHALLENGE_SET mcap:CHALLENGE:{mysite}:n0nce 500 30 PXAT 1700000030000"),
    "MC.VISIT_AT": ("Integer: the count after the visit. `MCAPTCHA_CACHE.VISIT_AT` under a short name: what `ADD_VISITOR` replicates since the replication format change of issue #30 (the long name stays accepted). " + INTERNAL,
                    "`ERR no captcha at this key`; range errors.",
                    "MC.VISIT_AT mcap:captcha::{mysite} 1700000000000"),
    "MC.CHALLENGE_SET": ("`OK`. `MCAPTCHA_CACHE.CHALLENGE_SET` under a short name: what `ADD_CHALLENGE` replicates since the replication format change of issue #30 (the long name stays accepted). " + INTERNAL,
                         "Range errors; `ERR unknown option '…' for MC.CHALLENGE_SET; expected PXAT unix-time-milliseconds`; `ERR PXAT needs a value (unix-time-milliseconds)`.",
                         "MC.CHALLENGE_SET mcap:CHALLENGE:{mysite}:n0nce 500 30 PXAT 1700000030000"),
    # ---- rate limits ----
    "CL.THROTTLE": (
        "Array `[limited (0|1), limit, remaining, retry_after_s (-1 when allowed), reset_after_s]`, whole seconds rounded up from the exact wait in microseconds, so any wait above zero answers at least 1 (redis-cell's reply, except that redis-cell drops the part under a millisecond first: it answers 0 for a wait under 1 ms, and 2 for 2.0004 s where this answers 3).",
        "Range errors naming the argument; `ERR max_burst * period / count is too large`; `WRONGTYPE`.",
        r'''> CL.THROTTLE user:42 15 30 60 1
1) (integer) 0
2) (integer) 16
3) (integer) 15
4) (integer) -1
5) (integer) 2'''),
    "RL.GCRA": (RL_REPLY, "Range errors naming the argument; `ERR unknown option '…' for RL.GCRA; expected BURST capacity, COST n, WAIT timeout-ms, AT unix-ms`; `ERR WAIT needs a value (timeout-ms)` (any option without its value); `ERR cost too large for this rate`; `WRONGTYPE`; `ERR no such policy '…' (RL.POLICY_SET defines it)`; `ERR policy '…' is a WINDOW policy; RL.GCRA takes a GCRA policy` (the other kind); with `POLICY`, BURST is the policy's: `ERR unknown option 'BURST' …`.",
                r'''> RL.GCRA api:user:42 100 60000 BURST 20 COST 1 WAIT 500
1) (integer) 1
2) (integer) 19
3) (integer) -1
4) (integer) 600'''),
    "RL.GCRA_PEEK": (RL_REPLY + " Changes nothing. With `AT unix-ms`, exactly what `RL.GCRA … AT unix-ms` would answer.", "As `RL.GCRA`; its options are `BURST capacity, COST n, AT unix-ms` (others are unknown options).", r'''> RL.GCRA_PEEK api:user:42 100 60000 BURST 20 COST 19
1) (integer) 1
2) (integer) …
3) (integer) -1
4) (integer) …
> RL.GCRA_PEEK api:user:42 100 60000 BURST 20 COST 21
1) (integer) 0
2) (integer) …
3) (integer) -1
4) (integer) …'''),
    "RL.WINDOW": (RL_REPLY, "Range errors; `ERR unknown option '…' for RL.WINDOW; expected COST n, WAIT timeout-ms, AT unix-ms`; `ERR <option> needs a value (…)`; `ERR the key holds a window of another length …`; `WRONGTYPE`; the policy errors of `RL.GCRA` (a GCRA policy is refused).",
                  r'''> RL.WINDOW login:1.2.3.4 5 60000
1) (integer) 1
2) (integer) 4
3) (integer) -1
4) (integer) …
> RL.WINDOW login:1.2.3.5 POLICY login
1) (integer) 1
2) (integer) 4
3) (integer) -1
4) (integer) …'''),
    "RL.WINDOW_PEEK": (RL_REPLY + " Changes nothing. With `AT unix-ms`, exactly what `RL.WINDOW … AT unix-ms` would answer.", "As `RL.WINDOW`; its options are `COST n, AT unix-ms` (others are unknown options).", r'''> RL.WINDOW_PEEK login:1.2.3.4 5 60000 COST 5
1) (integer) 0
2) (integer) 4
3) (integer) …
4) (integer) …'''),
    "RL.POLICY_SET": ("`OK` (a policy of the same name is replaced). Node-wide, not a key: replicated (as `RL.POLICY_PUT`), kept in the RDB and the AOF; FLUSHALL keeps it; in a cluster it reaches every node over the cluster bus (docs/policies-cluster.md).",
                      "Range errors naming the argument (as `RL.GCRA` / `RL.WINDOW`); `ERR policy name must be 1 to 256 bytes`; `ERR policy type must be GCRA or WINDOW`; `ERR unknown option '…' for RL.POLICY_SET; …`; `ERR burst * period / rate is too large`; `ERR too many policies (at most 65536 per node)`; `ERR policies are kept in the RDB … set aof-use-rdb-preamble yes first` (appendonly yes with aof-use-rdb-preamble no); `READONLY` on a read-only replica.",
                      r'''> RL.POLICY_SET api GCRA 100 60000 BURST 20
OK
> RL.GCRA api:user:7 POLICY api COST 5
1) (integer) 1
2) (integer) 15
3) (integer) -1
4) (integer) 3000'''),
    "RL.POLICY_GET": ("Array: the definition as `RL.POLICY_SET` takes it, `[GCRA, rate, period_ms]` (then `BURST, capacity` when given) or `[WINDOW, limit, window_ms]`; nil when there is no such policy.",
                      "Wrong arity only.", r'''> RL.POLICY_SET login WINDOW 5 60000
OK
> RL.POLICY_GET login
1) "WINDOW"
2) (integer) 5
3) (integer) 60000'''),
    "RL.POLICY_DEL": ("Integer `1`, or `0` when there was no such policy. Keys limited under it keep their state.",
                      "`READONLY` on a read-only replica.", r'''> RL.POLICY_SET old WINDOW 10 1000
OK
> RL.POLICY_DEL old
(integer) 1'''),
    "RL.POLICY_LIST": ("Array of the policy names, in byte order (`RL.POLICY_GET` gives each definition).",
                       "Wrong arity only.", r'''> RL.POLICY_LIST
1) "login"'''),
    "RL.REFUND": ("Integer: the units given back (at most `n`; the newest first; never below empty). With `AT unix-ms` the units are those taken at that time: what has come back by itself since is not given again (GCRA: `n` emission intervals less the time from AT to the clock, nothing once that is zero; a window: nothing once AT is a whole window and slot behind the clock). The resulting state replicates (`RL.GCRA_SET`, `RL.WINDOW_SET` or `DEL`).",
                  "Range errors; `ERR unknown option '…' for RL.REFUND; expected AT unix-ms`; `ERR AT needs a value (unix-ms)`; `WRONGTYPE` on a key that is not a GCRA or window limiter.", r'''> RL.REFUND api:user:7 2
(integer) 2'''),
    "RL.FIXED": ("Array `[count, reset_after_ms]`: the window's count after this hit, and the milliseconds until the window ends (the key's expiry). Every hit counts, over a caller's limit too (compare `count` with it, as the `limits` library does). The key is a plain string holding the count, its expiry the window's end: the first hit sets it to `window-ms` from now (with `ELASTIC`, every hit; a key that had no expiry gets one). `COST 0` writes nothing and replies the count and the time left as they are (`[0, 0]` without a key, `-1` for a key without expiry). A hit replicates as `SET key count PXAT end`.",
                 "Range errors; `ERR unknown option '…' for RL.FIXED; expected COST n, ELASTIC`; `ERR COST needs a value (n)`; `ERR the key's value is not an integer (a fixed window holds a count)`; `ERR increment would overflow the window's count`; `WRONGTYPE` on a key that is not a string. Nothing is written on an error.", r'''> RL.FIXED LIMITER/api/u42/10/1/minute 60000
1) (integer) 1
2) (integer) 60000'''),
    "RL.MULTI": (
        "Array `[allowed, refused_index (1-based; 0 when allowed), retry_after_ms (the longest among the refusing limits; -1 when allowed or never possible), remaining (the smallest)]`.",
        "Range errors; `ERR cost must be one integer, or one per limit separated by commas (as many as numlimits)`; `ERR the same key appears in two limits`; `ERR limit type must be GCRA or WINDOW`; `CROSSSLOT Keys in request don't hash to the same slot` when the keys do not share a hash slot, standalone too (nothing written).",
        r'''> RL.MULTI 1,20 2 {u42}:s GCRA 10 1000 {u42}:m WINDOW 100 60000
1) (integer) 1
2) (integer) 0
3) (integer) -1
4) (integer) 9'''),
    "RL.CONCURRENCY": (RL_REPLY + " `retry_after_ms` is the time until the earliest lease ends.",
                       "Range errors; `ERR unknown option '…' for RL.CONCURRENCY; expected WAIT timeout-ms`; `ERR WAIT needs a value (timeout-ms)`; `WRONGTYPE` (also on a LOCK.* key).", r'''> RL.CONCURRENCY jobs:export worker-7 30000 4
1) (integer) 1
2) (integer) 3
3) (integer) -1
4) (integer) 30000'''),
    "RL.CONCURRENCY_RELEASE": ("Integer `1`, or `0` when the holder held no slot (e.g. its lease had ended).",
                               "`WRONGTYPE` (also on a LOCK.* key).", r'''> RL.CONCURRENCY_RELEASE jobs:export worker-7
(integer) 1'''),
    "RL.GCRA_SET": ("`OK`. " + INTERNAL, "Range errors naming the field.", "RL.GCRA_SET api:user:42 1700000000000000 600000 100"),
    "RL.WINDOW_HIT": ("Integer: the count after the hits. " + INTERNAL, "Range errors; `ERR width must be 0 (window/256) or 1 (fine)`; `ERR the window's time slot is full`.",
                      "RL.WINDOW_HIT login:1.2.3.4 60000 5 1700000000000 1 0"),
    "RL.POLICY_PUT": ("Integer `1` when the version was kept (newer than the one held: docs/policies-cluster.md), `0` when older. " + INTERNAL,
                      "`ERR invalid policy version (RL.POLICY_PUT)`; `ERR too many policies and deleted policies' tombstones …`.",
                      "RL.POLICY_PUT api 1700000000000 0000000000000000000000000000000000000000 GCRA 100 60000 0"),
    "RL.WINDOW_SET": ("`OK`. " + INTERNAL, "`ERR invalid window state: …`.", "RL.WINDOW_SET login:1.2.3.4 60000 5 1700000000000 0"),
    # ---- locks ----
    "LOCK.ACQUIRE": (
        "Granted: `[1, fencing token, lease_ms]`; refused: `[0, -1, ms until the earliest lease ends (-1 when nobody holds it)]`. With WAIT the caller blocks, first come first served, until granted or its timeout. With LOCKDELAY, a hold that ends without a release (its lease ran out, its SESSION closed) keeps its permit taken by nobody for that many ms more (shown by LOCK.INSPECT with count 0). TAKE k takes k of the semaphore's permits at once (all or none; a large request at the head of the queue is not overtaken). READ takes a shared hold of a read-write lock (many readers, no writer), WRITE (the default) an exclusive one; waiters are served first come first served, so readers queue behind a waiting writer.",
        "`ERR owner must be 1 to 256 bytes`; range errors; `ERR unknown option '…' for LOCK.ACQUIRE; expected PERMITS n, TAKE k, READ, WRITE, REENTRANT, SESSION, LOCKDELAY delay-ms, WAIT timeout-ms, ACKS numreplicas timeout-ms`; `NOREPLICAS k of the n replicas asked for acknowledged the grant in time; it was released` (ACKS; the grant was taken back, or `… so nothing was released` when it was no longer at the key); `ERR the replicas acknowledged the grant, but it is no longer held at this key …` (ACKS, the lease ended meanwhile); `ERR ACKS does not go with WAIT …`; `ERR ACKS cannot wait here …` (MULTI, scripts); `ERR READ and WRITE are for a read-write lock, of one permit: not with PERMITS n > 1`; `ERR TAKE k must not exceed PERMITS n …`; `ERR TAKE needs a value (k)`; `ERR the owner re-enters holding fewer permits than this TAKE asks for …`; `ERR the owner holds this lock for READ …` (WRITE inside READ, REENTRANT); `ERR READ is for a read-write lock: this key is a semaphore pool whose size was changed …`; `ERR PERMITS needs a value (n)`, `ERR LOCKDELAY needs a value (delay-ms)`, `ERR WAIT needs a value (timeout-ms)`; `ERR PERMITS differs from the semaphore's size …`; `ERR the lock's fencing tokens are exhausted …`; `ERR SESSION is not allowed in scripts …` (EVAL/FCALL); `WRONGTYPE` (also on an RL.CONCURRENCY key).",
        r'''> LOCK.ACQUIRE orders:42 worker-7 10000 WAIT 5000
1) (integer) 1
2) (integer) …
3) (integer) 10000'''),
    "LOCK.RELEASE": ("Integer: the acquisitions the owner still holds (0: released; the next waiter is served).",
                     "`ERR the lock is not held by this owner`; `WRONGTYPE`.", r'''> LOCK.RELEASE orders:42 worker-7
(integer) 0'''),
    "LOCK.EXTEND": ("Integer: the new lease in ms, counted from now.", "`ERR the lock is not held by this owner`; range errors; `WRONGTYPE`.",
                    r'''> LOCK.EXTEND orders:42 worker-7 20000
(integer) 20000'''),
    "LOCK.ACQUIRE_ALL": (
        "Array `[1, fencing token, lease_ms]` when every key was granted (one token, valid on every key: max(fencing floor, each key's last token + 1), so each key's tokens keep growing); `[0, -1, ms until the taken keys could all be free, or -1 when only waiters are ahead]` when none was (at once, also with WAIT, when the owner already holds one of the keys). Each key is an ordinary exclusive lock afterwards (LOCK.RELEASE, LOCK.INSPECT). WAIT queues the caller in every key's queue at once, holding nothing: it is served when it heads all of them and every key is free (LOCK.INSPECT FULL lists it in each queue with mode `multi`).",
        "`CROSSSLOT Keys in request don't hash to the same slot` (standalone too); `ERR the same key appears twice in the list`; `ERR LOCK.ACQUIRE_ALL takes exclusive locks of one permit: PERMITS, TAKE, READ, REENTRANT and ACKS are not supported`; `ERR key '…' is a semaphore of n permits, held …`; `ERR key '…' is a semaphore pool of size n (LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS) …`; `ERR owner must be 1 to 256 bytes`; range errors (numkeys 1 to 16, lease, LOCKDELAY, WAIT); `ERR a lock's fencing tokens are exhausted …`; `ERR SESSION is not allowed in scripts …`; `WRONGTYPE` when any key holds another type (nothing is written).",
        r'''> LOCK.ACQUIRE_ALL 2 {acct}:1 {acct}:2 transfer-9 10000 WAIT 5000
1) (integer) 1
2) (integer) …
3) (integer) 10000'''),
    "LOCK.RELEASE_ALL": ("Array: per key, in order, the acquisitions the owner still holds there (0: released, its next waiter is served), or -1 when the owner held nothing there (that key is unchanged).",
                         "`CROSSSLOT …`; `ERR the same key appears twice in the list`; `WRONGTYPE` (nothing released).",
                         r'''> LOCK.RELEASE_ALL 2 {acct}:1 {acct}:2 transfer-9
1) (integer) 0
2) (integer) 0'''),
    "LOCK.EXTEND_ALL": ("Integer: the new lease in ms, counted from now, on every key.",
                        "`ERR the locks are not all held by this owner (nothing changed)`; `CROSSSLOT …`; range errors; `WRONGTYPE`.",
                        r'''> LOCK.EXTEND_ALL 2 {acct}:1 {acct}:2 transfer-9 20000
(integer) 20000'''),
    "LOCK.INSPECT": ("Array `[permits, last fencing token, waiters, [[owner, lease_ms left, token, count], …], adjustment, size]`, or nil when there is no such lock. An entry with count 0 is a lock-delay: its owner's hold ended without a release, and the permit stays taken for the ms shown. `adjustment` is the semaphore pool's (LOCK.ADD_PERMITS, LOCK.DRAIN_PERMITS), `size` the pool's size (permits + adjustment, clamped to 0..1024). FULL: field/value pairs `permits`, `adjustment`, `size`, `available`, `last_token`, `kind`, `holders` (each: `owner`, `mode`, `weight`, `state`, `ms_left`, `token`, `count`, `held_ms`, `lock_delay_ms`, `session`) and `waiters` in queue order (each: `owner`, `mode`, `permits`, `weight`, `lease_ms`, `waited_ms`, `timeout_ms`, `client_id`).",
                     "`ERR unknown option '…' for LOCK.INSPECT; expected FULL`; `WRONGTYPE`.", r'''> LOCK.INSPECT orders:42 FULL
 1) permits
 2) (integer) 1
 3) adjustment
 4) (integer) 0
 5) size
 6) (integer) 1
 7) available
 8) (integer) 0
 9) last_token
10) (integer) …
11) kind
12) lock
13) holders
14) 1)  1) owner
        2) "worker-7"
        3) mode
        4) write
        5) weight
        6) (integer) 1
        7) state
        8) held
        9) ms_left
       10) (integer) …
       11) token
       12) (integer) …
       13) count
       14) (integer) 1
       15) held_ms
       16) (integer) …
       17) lock_delay_ms
       18) (integer) 0
       19) session
       20) (integer) 0
15) waiters
16) (empty array)
> LOCK.INSPECT orders:42
1) (integer) 1
2) (integer) …
3) (integer) 0
4) 1) 1) "worker-7"
      2) (integer) …
      3) (integer) …
      4) (integer) 1
5) (integer) 0
6) (integer) 1'''),
    "LOCK.ADD_PERMITS": ("Integer: the pool's size after. The size is the acquirers' `PERMITS n` plus a signed adjustment that this command changes by delta (persisted and replicated with the lock; an unheld semaphore keeps it). Lowering it below the permits taken takes nothing from the holders: no grant is made until fewer are taken than the size. Permits added serve the waiters, first come first served. A missing key needs `PERMITS n` (its base size, as the acquirers pass it); a held one refuses another n.",
                         "`ERR delta must be an integer from -1024 to 1024`; `ERR the pool's size would be … : it must stay from 0 to 1024; nothing changed`; `ERR this key is a lock of one permit, held: …` (a positive delta on a held exclusive lock); `ERR no such semaphore: pass PERMITS n …`; `ERR PERMITS differs from the semaphore's size …`; `ERR this key is a concurrency limit (RL.CONCURRENCY) …`; `ERR this key is a read-write lock used with READ …`; range errors; `ERR unknown option '…' for LOCK.ADD_PERMITS; expected PERMITS n`; `WRONGTYPE`.",
                         r'''> LOCK.ADD_PERMITS pool:exports 2 PERMITS 5
(integer) 7'''),
    "LOCK.DRAIN_PERMITS": ("Integer: the permits taken out of the pool: every permit free now (the size drops to the permits taken by holders and lock-delays), owned by nobody, until LOCK.ADD_PERMITS gives them back. Waiters keep waiting. A missing key needs `PERMITS n` (then all n are drained).",
                           "`ERR no such semaphore: pass PERMITS n …`; `ERR PERMITS differs from the semaphore's size …`; `ERR this key is a concurrency limit (RL.CONCURRENCY) …`; `ERR this key is a read-write lock used with READ …`; range errors; `ERR unknown option '…' for LOCK.DRAIN_PERMITS; expected PERMITS n`; `WRONGTYPE`.",
                           r'''> LOCK.DRAIN_PERMITS pool:exports PERMITS 5
(integer) 7'''),
    "LOCK.AVAILABLE_PERMITS": ("Integer: the permits free now (the pool's size minus the permits taken by holders and lock-delays, never below 0; queued requests do not count, though a newcomer is not served before them), or nil for a missing key without `PERMITS n` (with it: n). Read-only: runs on replicas.",
                               "`ERR PERMITS differs from the semaphore's size …`; `ERR this key is a concurrency limit (RL.CONCURRENCY) …`; `ERR this key is a read-write lock used with READ …`; range errors; `ERR unknown option '…' for LOCK.AVAILABLE_PERMITS; expected PERMITS n`; `WRONGTYPE`.",
                               r'''> LOCK.AVAILABLE_PERMITS pool:exports PERMITS 5
(integer) 7'''),
    "LOCK.STATE": ("`OK`. " + INTERNAL, "`ERR invalid lock state: …` naming the field.",
                   "LOCK.STATE orders:42 1 1700000000000123 1 worker-7 1700000010000 1 1700000000000123"),
}
