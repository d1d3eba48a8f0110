# SPDX-License-Identifier: BSD-3-Clause
"""The floor and the tax: the sections of `make bench` that compare mcaptcha_cache's commands
with the module API's own cost (bench/floor/floor.c, loaded beside the module), and a plain
server with a server that has the module loaded and 1,000 leases held, on unrelated commands.

Everything here is measured on server CPU per call (INFO cpu over the run divided by the calls),
the basis that stays stable on a busy 2-core machine where throughput does not; rounds interleave
the variants and ratios are medians of the per-round ratios. Used by bench.py.
"""
import statistics

import bench as B

# Throughput cases (same shape as bench.main_cases) that run in the same interleaved rounds.
FLOOR_CASES = [
    ("floor_write", "floor: write + replicate with time", "floor",
     ["FLOOR.WRITE", "fw:__rand_int__"], "floor.write"),
    # a write with a TTL and a limiter's 4-integer reply, as long a request as the limiter's
    ("floor_limit4", "floor: + TTL, limiter reply (4 args)", "floor",
     ["FLOOR.LIMIT", "fp4:__rand_int__", 3600000, "x"], "floor.limit"),
    ("floor_limit5", "floor: + TTL, limiter reply (5 args)", "floor",
     ["FLOOR.LIMIT", "fp5:__rand_int__", 3600000, "x", "x"], "floor.limit"),
    ("floor_limit6", "floor: + TTL, limiter reply (6 args)", "floor",
     ["FLOOR.LIMIT", "fp6:__rand_int__", 3600000, "x", "x", "x"], "floor.limit"),
    ("floor_read", "floor: read", "floor", ["FLOOR.READ", "fw:__rand_int__"], "floor.read"),
    # RL.GCRA by a stored policy (RL.POLICY_SET bench-gcra, the numbers of the rl_gcra case)
    ("rl_gcra_policy", "RL.GCRA ... POLICY name", "native",
     ["RL.GCRA", "gcrp:__rand_int__", "POLICY", "bench-gcra"], "rl.gcra"),
]

# our command -> its floor (throughput case ids)
FLOOR_OF = [("add_visitor", "floor_write"), ("mc_get", "floor_read"), ("rl_gcra", "floor_limit6"),
            ("rl_window", "floor_limit4"), ("cl_throttle", "floor_limit5")]

# Pairs (same shape as bench.section_pairs' variants); keys cycle over 1,000.
FLOOR_PAIRS = {
    "floor_lock": ("floor: lock + unlock", [
        ("pair", [["FLOOR.LOCK", "fl:#", B.OWNER, "10000"], ["FLOOR.UNLOCK", "fl:#", B.OWNER]],
         ["floor.lock", "floor.unlock"])]),
    # the semaphore pair's request shape: PERMITS 5 read and parsed, one holder per key
    "floor_semaphore": ("floor: lock PERMITS 5 + unlock", [
        ("pair", [["FLOOR.LOCK", "fs:#", B.OWNER, "10000", "PERMITS", "5"], ["FLOOR.UNLOCK", "fs:#", B.OWNER]],
         ["floor.lock", "floor.unlock"])]),
    "semaphore": ("LOCK.ACQUIRE PERMITS 5 + LOCK.RELEASE", [
        ("pair", [["LOCK.ACQUIRE", "sm:#", B.OWNER, "10000", "PERMITS", "5"], ["LOCK.RELEASE", "sm:#", B.OWNER]],
         ["lock.acquire", "lock.release"])]),
    # two keys of one hash slot taken and released together (against two plain pairs)
    "multi_lock": ("LOCK.ACQUIRE_ALL 2 + LOCK.RELEASE_ALL 2", [
        ("pair", [["LOCK.ACQUIRE_ALL", "2", "{ml#}a", "{ml#}b", B.OWNER, "10000"],
                  ["LOCK.RELEASE_ALL", "2", "{ml#}a", "{ml#}b", B.OWNER]],
         ["lock.acquire_all", "lock.release_all"])]),
    # the semaphore pair on pools whose size LOCK.ADD_PERMITS changed (PERMITS 3 + 2 = 5)
    "pool_semaphore": ("LOCK.ACQUIRE PERMITS 3 + LOCK.RELEASE, pool of 5 (ADD_PERMITS 2)", [
        ("pair", [["LOCK.ACQUIRE", "ps:#", B.OWNER, "10000", "PERMITS", "3"], ["LOCK.RELEASE", "ps:#", B.OWNER]],
         ["lock.acquire", "lock.release"])]),
    "read_lock": ("LOCK.ACQUIRE READ + LOCK.RELEASE", [
        ("pair", [["LOCK.ACQUIRE", "rl:#", B.OWNER, "10000", "READ"], ["LOCK.RELEASE", "rl:#", B.OWNER]],
         ["lock.acquire", "lock.release"])]),
}
PAIR_FLOOR_OF = [("lock", "floor_lock"), ("semaphore", "floor_semaphore")]


def preload_floor(srv):
    B.preload(srv, "floor", B.KEYS_MAIN, ["FLOOR.WRITE", "fw:#"])
    srv.c("RL.POLICY_SET", "bench-gcra", "GCRA", 1000, 3600000, "BURST", 1000000)
    B.preload(srv, "pool", B.KEYS_MAIN, ["LOCK.ADD_PERMITS", "ps:#", "2", "PERMITS", "3"])


def floor_ratios(thr, pairs):
    """{name: (ratio on server CPU, ratio on throughput)}: floor cost / our cost, so 1.0 is the floor."""
    pl = thr["pipelined"]
    out = {}
    for ours, floor in FLOOR_OF:
        out[ours] = (B.cpu_ratio(pl[ours]["samples"], pl[floor]["samples"]),
                     B.paired_ratio(pl[ours]["samples"], pl[floor]["samples"]))
    for ours, floor in PAIR_FLOOR_OF:
        a, b = pairs[ours]["samples"], pairs[floor]["samples"]
        out[ours + "_pair"] = (statistics.median(y["cpu_us_per_pair"] / x["cpu_us_per_pair"] for x, y in zip(a, b)),
                               statistics.median(x["pairs_per_s"] / y["pairs_per_s"] for x, y in zip(a, b)))
    # RL.GCRA by a stored policy against RL.GCRA with the numbers (1.0: as cheap)
    out["policy_vs_numbers"] = (B.cpu_ratio(pl["rl_gcra_policy"]["samples"], pl["rl_gcra"]["samples"]),
                                B.paired_ratio(pl["rl_gcra_policy"]["samples"], pl["rl_gcra"]["samples"]))
    # two keys taken and released by LOCK.*_ALL against two plain pairs (1.0: as cheap)
    a, b = pairs["multi_lock"]["samples"], pairs["lock"]["samples"]
    out["multi_vs_two_pairs"] = (statistics.median(2 * y["cpu_us_per_pair"] / x["cpu_us_per_pair"] for x, y in zip(a, b)),
                                 statistics.median(x["pairs_per_s"] / (y["pairs_per_s"] / 2) for x, y in zip(a, b)))
    # a semaphore pair on an adjusted pool against the plain semaphore pair (1.0: as cheap)
    a, b = pairs["pool_semaphore"]["samples"], pairs["semaphore"]["samples"]
    out["pool_vs_semaphore_pair"] = (statistics.median(y["cpu_us_per_pair"] / x["cpu_us_per_pair"] for x, y in zip(a, b)),
                                     statistics.median(x["pairs_per_s"] / y["pairs_per_s"] for x, y in zip(a, b)))
    # a read-write lock's READ pair against the plain lock pair (1.0: as cheap)
    a, b = pairs["read_lock"]["samples"], pairs["lock"]["samples"]
    out["read_vs_lock_pair"] = (statistics.median(y["cpu_us_per_pair"] / x["cpu_us_per_pair"] for x, y in zip(a, b)),
                                statistics.median(x["pairs_per_s"] / y["pairs_per_s"] for x, y in zip(a, b)))
    return out


# ---------------------------------------------------------------------------------------------
# Cost independent of history: GET on captchas last visited just now, and 25 s ago (of 30 s)

def section_history(srv):
    c = srv.c
    now = int(B.time.time() * 1000)
    B.preload(srv, "hist", B.KEYS_MAIN, ["MCAPTCHA_CACHE.ADD_CAPTCHA", "hn#", B.CAPTCHA_CONFIG],
              ["MCAPTCHA_CACHE.ADD_CAPTCHA", "ho#", B.CAPTCHA_CONFIG])
    B.preload(srv, "hist-visits", B.KEYS_MAIN, ["MCAPTCHA_CACHE.VISIT_AT", "mcap:captcha::{hn#}", now],
              ["MCAPTCHA_CACHE.VISIT_AT", "mcap:captcha::{ho#}", now - 25000])
    fresh = ["MCAPTCHA_CACHE.GET", "hn__rand_int__"]
    old = ["MCAPTCHA_CACHE.GET", "ho__rand_int__"]
    a, b = [], []
    for rnd in range(B.ROUNDS_PIPELINED):
        for args, dest in ((fresh, a), (old, b)) if rnd % 2 == 0 else ((old, b), (fresh, a)):
            dest.append(B.run_benchmark(srv, args, B.N_PIPELINED // 2, B.PIPELINE, B.KEYS_MAIN, "mcaptcha_cache.get"))
    if c("MCAPTCHA_CACHE.GET", "ho%012d" % 3) != 1:
        raise SystemExit("bench: the captcha visited 25 s ago lost its visit")
    return {"fresh_cpu_us": statistics.median(x["cpu_us_per_call"] for x in a),
            "old_cpu_us": statistics.median(x["cpu_us_per_call"] for x in b),
            # cost(old) / cost(fresh): 1.0 = independent of the time since the last visit
            "cpu_ratio": statistics.median(y["cpu_us_per_call"] / x["cpu_us_per_call"] for x, y in zip(a, b))}


# ---------------------------------------------------------------------------------------------
# The tax: unrelated commands on a plain server and on one with the module and 1,000 leases

TAX_ROUNDS = 5
TAX_CASES = [("set", ["SET", "t:__rand_int__", "v"], "set"), ("incr", ["INCR", "c:__rand_int__"], "incr")]


def section_tax(floor_module):
    plain = B.Server(modules=[])
    loaded = B.Server(modules=[B.MODULE] + ([floor_module] if floor_module else []))
    try:
        B.preload(loaded, "leases", 1000, ["LOCK.ACQUIRE", "lease:#", B.OWNER, "3600000"])
        # the plain server holds as many keys, so that only the module differs
        B.preload(plain, "plain-keys", 1000, ["SET", "lease:#", B.OWNER])
        if loaded.c("LOCK.INSPECT", "lease:%012d" % 999)[0] != 1:
            raise SystemExit("bench: the 1,000 leases are not held")
        n = B.N_PAIRS
        path = B.os.path.join(B.OUT, "tax-setnx-del.resp")
        fns = [B.resp_template("SET", "sk:#", B.OWNER, "NX", "PX", "10000"), B.resp_template("DEL", "sk:#")]
        with open(path, "wb") as f:
            f.write(b"".join(fn(i % 1000) for i in range(n) for fn in fns))
        samples = {(cid, which): [] for cid in [c[0] for c in TAX_CASES] + ["setnx_del"] for which in ("plain", "loaded")}
        for rnd in range(TAX_ROUNDS):
            B.log("  tax round %d/%d" % (rnd + 1, TAX_ROUNDS))
            order = (("plain", plain), ("loaded", loaded)) if rnd % 2 == 0 else (("loaded", loaded), ("plain", plain))
            for cid, args, stat in TAX_CASES:
                for which, srv in order:
                    samples[(cid, which)].append(
                        B.run_benchmark(srv, args, B.N_PIPELINED, B.PIPELINE, B.KEYS_MAIN, stat)["cpu_us_per_call"])
            for which, srv in order:
                cpu0 = srv.cpu_seconds()
                srv.pipe(path)
                samples[("setnx_del", which)].append(1e6 * (srv.cpu_seconds() - cpu0) / n)
        B.os.unlink(path)
        if loaded.c("LOCK.INSPECT", "lease:%012d" % 999)[0] != 1:
            raise SystemExit("bench: a lease ended during the tax runs")
        out = {}
        for cid in [c[0] for c in TAX_CASES] + ["setnx_del"]:
            p, l = samples[(cid, "plain")], samples[(cid, "loaded")]
            out[cid] = {"plain_cpu_us": statistics.median(p), "loaded_cpu_us": statistics.median(l),
                        # extra server CPU the loaded server spends per call (0.03 = 3 %)
                        "tax": statistics.median(y / x for x, y in zip(p, l)) - 1}
        return out
    finally:
        plain.stop()
        loaded.stop()


# ---------------------------------------------------------------------------------------------
# redis-cell side by side (only when REDIS_CELL_SO names a redis-cell build on this machine)

def section_redis_cell(path):
    if not path:
        return None
    if not B.os.path.exists(path):
        raise SystemExit("bench: REDIS_CELL_SO=%s: no such file" % path)
    ours, cell = B.Server(modules=[B.MODULE]), B.Server(modules=[path])
    try:
        args = ["CL.THROTTLE", "thr:__rand_int__", 999999, 1000, 3600]
        a, b = [], []
        for rnd in range(B.ROUNDS_PIPELINED):
            for srv, dest in ((ours, a), (cell, b)) if rnd % 2 == 0 else ((cell, b), (ours, a)):
                dest.append(B.run_benchmark(srv, args, B.N_PIPELINED, B.PIPELINE, B.KEYS_MAIN, "cl.throttle"))
        return {"ours_cpu_us": statistics.median(x["cpu_us_per_call"] for x in a),
                "cell_cpu_us": statistics.median(x["cpu_us_per_call"] for x in b),
                "cpu_ratio": B.cpu_ratio(a, b), "rps_ratio": B.paired_ratio(a, b)}
    finally:
        ours.stop()
        cell.stop()


def report_lines(fr, hist, tax, cell):
    out = ["", "Against the module API's floor (bench/floor/floor.c), server CPU per call; 1.00 = at the floor:"]
    names = {"add_visitor": "MCAPTCHA_CACHE.ADD_VISITOR / floor write", "mc_get": "MCAPTCHA_CACHE.GET / floor read",
             "rl_gcra": "RL.GCRA / floor limit (6 args)", "rl_window": "RL.WINDOW / floor limit (4 args)",
             "cl_throttle": "CL.THROTTLE / floor limit (5 args)", "lock_pair": "lock acquire+release / floor lock pair",
             "semaphore_pair": "semaphore (PERMITS 5) pair / floor lock pair (PERMITS 5)",
             "read_vs_lock_pair": "read-write lock READ pair / plain lock pair",
             "policy_vs_numbers": "RL.GCRA POLICY name / RL.GCRA with the numbers",
             "multi_vs_two_pairs": "LOCK.*_ALL pair of 2 keys / two plain lock pairs",
             "pool_vs_semaphore_pair": "semaphore pair, adjusted pool / plain semaphore pair"}
    for k, label in names.items():
        out.append("  %-50s %5.2fx  (throughput %5.2fx)" % (label, fr[k][0], fr[k][1]))
    out.append("")
    out.append("GET on a captcha last visited 25 s ago vs just now: %.2f vs %.2f us per call (%.2fx)"
               % (hist["old_cpu_us"], hist["fresh_cpu_us"], hist["cpu_ratio"]))
    out.append("")
    out.append("Tax on unrelated commands, server with the module and 1,000 leases held vs plain (server CPU per call):")
    for k, label in (("set", "SET"), ("incr", "INCR"), ("setnx_del", "SET NX PX + DEL pair")):
        t = tax[k]
        out.append("  %-22s plain %.3f us, loaded %.3f us: %+.1f %%" % (label, t["plain_cpu_us"], t["loaded_cpu_us"],
                                                                      100 * t["tax"]))
    if cell:
        out.append("")
        out.append("CL.THROTTLE, ours vs redis-cell (REDIS_CELL_SO): %.2f vs %.2f us per call: %.2fx on server CPU, "
                   "%.2fx throughput" % (cell["ours_cpu_us"], cell["cell_cpu_us"], cell["cpu_ratio"], cell["rps_ratio"]))
    return out


def record_targets(fr, hist, tax, cell, hand, instr):
    """The goals of issue #30, decided on instructions per call (make bench-instr, no AOF: `instr`),
    each with the server-CPU figure of this run beside it (against the minimal floor, which the
    CPU sections measure)."""
    ir = instr["no_aof"]
    for k, label in (("add_visitor", "ADD_VISITOR"), ("mc_get", "MCAPTCHA_CACHE.GET"), ("rl_gcra", "RL.GCRA"),
                     ("rl_window", "RL.WINDOW"), ("cl_throttle", "CL.THROTTLE")):
        B.record_target("%s / same-job floor, Ir" % label, ir["floor_ratios"][k]["same_job"], ">=", 0.95, "x",
                        round(fr[k][0], 3))
    B.record_target("lock pair / floor pair, Ir", ir["floor_ratios"]["lock"]["same_job"], ">=", 0.95, "x",
                    round(fr["lock_pair"][0], 3))
    B.record_target("semaphore pair / floor pair, Ir", ir["floor_ratios"]["semaphore"]["same_job"], ">=", 0.95, "x",
                    round(fr["semaphore_pair"][0], 3))
    B.record_target("waiter hand-off, median", round(hand["lock_wait"]["median_ms"], 3), "<", 0.1, " ms")
    B.record_target("GET 25 s after the last visit / just after, server CPU", round(hist["cpu_ratio"], 3), "<=", 1.2, "x")
    for k, ik, label in (("set", "set", "SET"), ("incr", "incr", "INCR"), ("setnx_del", "setnx", "SET NX PX + DEL")):
        B.record_target("tax on %s, 1,000 leases held, Ir" % label, round(100 * ir["tax"][ik], 2), "<=", 3, " %",
                        round(100 * tax[k]["tax"], 1))
    if "cell_ratio" in ir:
        B.record_target("CL.THROTTLE vs redis-cell, Ir", ir["cell_ratio"], ">=", 2, "x",
                        round(cell["cpu_ratio"], 3) if cell else None)
