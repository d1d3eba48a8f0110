#!/usr/bin/python3
"""make bench-instr: instructions per call (valgrind --tool=callgrind), each of our commands
beside its floor, deterministic where server CPU time on a shared machine is not.

SPDX-License-Identifier: BSD-3-Clause

Each server runs under callgrind with bench/instr/cgctl.c loaded and hz 1, twice: without
AOF (as the CPU bench runs; what a command replicates is still looked up and built, then
dropped: the goals are decided on these figures) and with AOF on (appendfsync no: what a
command replicates is also formatted and written, as for a replica; information).
For every row a batch of N calls (keys cycling over 1,000, every key warmed by one batch
first) is fed through one redis-cli --pipe connection between CG.ZERO and CG.DUMP, so the
count covers exactly the batch: reading, parsing, the command, its replication, the reply.
The same two markers with nothing between (measured on each server) are subtracted; the
figure is Ir per call (per pair for the pair rows). Writes bench/instr.json; bench.py reads
it and decides the goals on it. Each figure without AOF is the median over INSTR_ROUNDS (3) fresh
servers (their hash seeds differ); with AOF, one. Environment: INSTR_N (calls per batch, default 5,000),
REDIS_CELL_SO (redis-cell beside ours for CL.THROTTLE), MODULE, FLOOR_MODULE, CGCTL_MODULE,
INSTR_JSON (where to write), INSTR_WORKDIR (the servers' directories).
"""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (the RESP templates, the minimal client)

OUT = os.environ.get("INSTR_WORKDIR", os.path.join(ROOT, "data", "bench", "instr"))
RESULT = os.environ.get("INSTR_JSON", os.path.join(HERE, "instr.json"))
MODULE = os.environ.get("MODULE", os.path.join(ROOT, "build", "mcaptcha_cache.so"))
FLOOR_MODULE = os.environ.get("FLOOR_MODULE", os.path.join(ROOT, "build", "bench", "floor.so"))
CGCTL = os.environ.get("CGCTL_MODULE", os.path.join(ROOT, "build", "bench", "cgctl.so"))
N = int(os.environ.get("INSTR_N", "5000"))
# fresh servers per row without AOF (the median is kept): each server hashes command names and
# keys with its own random seed, which moves a call by up to ~100 instructions between servers
ROUNDS = int(os.environ.get("INSTR_ROUNDS", "3"))
KEYS = 1000
CAPTCHA = B.CAPTCHA_CONFIG
OWNER = B.OWNER

# id, label, server, [templates] (one call or one pair per i), setup templates (once per key)
ROWS = [
    ("ping", "PING (reference)", "ours", [["PING"]], []),
    ("incr", "INCR (reference)", "ours", [["INCR", "cnt:#"]], []),
    ("add_visitor", "MCAPTCHA_CACHE.ADD_VISITOR", "ours", [["MCAPTCHA_CACHE.ADD_VISITOR", "cap:#"]],
     [["MCAPTCHA_CACHE.ADD_CAPTCHA", "cap:#", CAPTCHA]]),
    ("sj_add_visitor", "floor, same job: ADD_VISITOR", "ours", [["FLOOR_SAME_JOB.ADD_VISITOR", "fap:#"]], []),
    ("floor_write", "floor (minimal): FLOOR.WRITE", "ours", [["FLOOR.WRITE", "fw:#"]], []),
    ("mc_get", "MCAPTCHA_CACHE.GET", "ours", [["MCAPTCHA_CACHE.GET", "cap:#"]], []),
    ("sj_get", "floor, same job: GET", "ours", [["FLOOR_SAME_JOB.GET", "fap:#"]], []),
    ("floor_read", "floor (minimal): FLOOR.READ", "ours", [["FLOOR.READ", "fw:#"]], []),
    ("rl_gcra", "RL.GCRA", "ours", [["RL.GCRA", "gcra:#", 1000, 3600000, "BURST", 1000000]], []),
    ("sj_rl_gcra", "floor, same job: RL.GCRA", "ours", [["FL.GCRA", "fgcr:#", 1000, 3600000, "BURST", 1000000]], []),
    ("floor_limit6", "floor (minimal): FLOOR.LIMIT, 6 args", "ours", [["FLOOR.LIMIT", "fp6:#", 3600000, "x", "x", "x"]], []),
    ("rl_window", "RL.WINDOW", "ours", [["RL.WINDOW", "wnd:#", 1000000, 3600000]], []),
    ("sj_rl_window", "floor, same job: RL.WINDOW", "ours", [["FL.WINDOW", "fwnd:#", 1000000, 3600000]], []),
    ("floor_limit4", "floor (minimal): FLOOR.LIMIT, 4 args", "ours", [["FLOOR.LIMIT", "fp4:#", 3600000, "x"]], []),
    ("cl_throttle", "CL.THROTTLE", "ours", [["CL.THROTTLE", "thr:#", 999999, 1000, 3600]], []),
    ("rl_fixed", "RL.FIXED (information; INCR + PEXPIRE's job)", "ours", [["RL.FIXED", "fix:#", 3600000]], []),
    ("sj_cl_throttle", "floor, same job: CL.THROTTLE", "ours", [["FL.THROTTLE", "fthr:#", 999999, 1000, 3600]], []),
    ("floor_limit5", "floor (minimal): FLOOR.LIMIT, 5 args", "ours", [["FLOOR.LIMIT", "fp5:#", 3600000, "x", "x"]], []),
    ("lock", "LOCK.ACQUIRE + LOCK.RELEASE (pair)", "ours",
     [["LOCK.ACQUIRE", "lk:#", OWNER, "10000"], ["LOCK.RELEASE", "lk:#", OWNER]], []),
    ("semaphore", "LOCK.ACQUIRE PERMITS 5 + LOCK.RELEASE (pair)", "ours",
     [["LOCK.ACQUIRE", "sm:#", OWNER, "10000", "PERMITS", "5"], ["LOCK.RELEASE", "sm:#", OWNER]], []),
    ("floor_lock", "floor: FLOOR.LOCK + FLOOR.UNLOCK (pair)", "ours",
     [["FLOOR.LOCK", "fl:#", OWNER, "10000"], ["FLOOR.UNLOCK", "fl:#", OWNER]], []),
    # the semaphore pair's request shape (PERMITS 5: two more arguments to read and parse)
    ("floor_semaphore", "floor: FLOOR.LOCK ... PERMITS 5 + FLOOR.UNLOCK (pair)", "ours",
     [["FLOOR.LOCK", "fs:#", OWNER, "10000", "PERMITS", "5"], ["FLOOR.UNLOCK", "fs:#", OWNER]], []),
    # the tax: a plain server (1,000 string keys) against one with the module and 1,000 leases held
    ("tax_set_plain", "SET, plain server", "plain", [["SET", "t:#", "v"]], []),
    ("tax_set_loaded", "SET, module + 1,000 leases", "loaded", [["SET", "t:#", "v"]], []),
    ("tax_incr_plain", "INCR, plain server", "plain", [["INCR", "c:#"]], []),
    ("tax_incr_loaded", "INCR, module + 1,000 leases", "loaded", [["INCR", "c:#"]], []),
    ("tax_setnx_plain", "SET NX PX + DEL, plain server (pair)", "plain",
     [["SET", "sk:#", OWNER, "NX", "PX", "10000"], ["DEL", "sk:#"]], []),
    ("tax_setnx_loaded", "SET NX PX + DEL, module + 1,000 leases (pair)", "loaded",
     [["SET", "sk:#", OWNER, "NX", "PX", "10000"], ["DEL", "sk:#"]], []),
    ("cell_cl_throttle", "CL.THROTTLE, redis-cell", "cell", [["CL.THROTTLE", "thr:#", 999999, 1000, 3600]], []),
]

# ours -> its same-job floor (goal: floor / ours >= 0.95), and the minimal floor (information)
FLOOR_OF = [("add_visitor", "sj_add_visitor", "floor_write"), ("mc_get", "sj_get", "floor_read"),
            ("rl_gcra", "sj_rl_gcra", "floor_limit6"), ("rl_window", "sj_rl_window", "floor_limit4"),
            ("cl_throttle", "sj_cl_throttle", "floor_limit5"), ("lock", "floor_lock", None),
            ("semaphore", "floor_semaphore", "floor_lock")]


class CgServer:
    """redis-server under callgrind with cgctl and `modules` loaded."""

    def __init__(self, name, modules, aof):
        self.dir = os.path.join(OUT, name + ("-aof" if aof else ""))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.port = B.free_port()
        load = [a for m in modules + [CGCTL] for a in ["--loadmodule"] + m.split()]
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.path.join(self.dir, "cg.out"),
             "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--hz", "1",
             "--appendonly", "yes" if aof else "no", "--appendfsync", "no", "--dir", self.dir,
             "--logfile", os.path.join(self.dir, "redis.log")] + load,
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "valgrind.log"), "w"))
        deadline = time.time() + 120
        while True:
            try:
                self.c = B.Conn(self.port, timeout=600)
                self.c("PING")
                break
            except (OSError, B.RedisError):
                if self.proc.poll() is not None or time.time() > deadline:
                    sys.exit("bench-instr: redis-server under callgrind did not start (%s)" % self.dir)
                time.sleep(0.2)
        self.dumps = 0
        self.empty = None

    def pipe(self, data):
        path = os.path.join(self.dir, "batch.resp")
        with open(path, "wb") as f:
            f.write(data)
        with open(path, "rb") as f:
            r = subprocess.run(["redis-cli", "-p", str(self.port), "--pipe"], stdin=f, capture_output=True, text=True)
        out = r.stdout + r.stderr
        if r.returncode != 0 or "errors: 0," not in out:
            sys.exit("bench-instr: redis-cli --pipe failed on %s: %s" % (self.dir, out.strip()[-400:]))

    def measure(self, label, data):
        """Ir of `data` fed between CG.ZERO and CG.DUMP."""
        self.pipe(B.resp("CG.ZERO") + data + B.resp("CG.DUMP", label))
        self.dumps += 1
        path = os.path.join(self.dir, "cg.out.%d" % self.dumps)
        for _ in range(600):
            if os.path.exists(path) and "totals:" in open(path).read():
                break
            time.sleep(0.1)
        text = open(path).read()
        m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        if not m or ("Trigger: Client Request: " + label) not in text:
            sys.exit("bench-instr: no counts in %s" % path)
        return int(m.group(1))

    def stop(self):
        try:
            self.c("SHUTDOWN", "NOSAVE")
        except Exception:
            pass
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def batch(templates, n):
    fns = [B.resp_template(*t) for t in templates]
    return b"".join(fn(i % KEYS) for i in range(n) for fn in fns)


def main():
    if not shutil.which("valgrind"):
        sys.exit("bench-instr: valgrind is not installed (apt-get install valgrind)")
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    cell = os.environ.get("REDIS_CELL_SO")
    servers = {"ours": [MODULE, FLOOR_MODULE], "plain": [], "loaded": [MODULE]}
    if cell:
        servers["cell"] = [cell]
    res = {"n": N, "keys": KEYS}
    for aof in (False, True):
        res["aof" if aof else "no_aof"] = run_config(servers, cell, aof, 1 if aof else ROUNDS)
    res["duration_s"] = round(time.time() - t0)
    with open(RESULT, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    for line in report_lines(res):
        print(line)


def run_config(servers, cell, aof, rounds):
    res = {"rows": {}, "empty_ir": {}}
    for sname, mods in servers.items():
        for rnd in range(rounds):
            run_server(res, sname, mods, aof, rnd, rounds)
    for r in res["rows"].values():
        r["ir_per_call"] = round(statistics.median(r["rounds"]), 1)
    return finish(res, cell)


def run_server(res, sname, mods, aof, rnd, rounds):
    """One fresh server: every row of `sname`, each figure appended to the row's rounds."""
    B.log("bench-instr: %s server under callgrind, AOF %s (%d/%d)" % (sname, "on" if aof else "off", rnd + 1, rounds))
    srv = CgServer(sname, mods, aof)
    try:
        if sname == "loaded":
            srv.pipe(batch([["LOCK.ACQUIRE", "lease:#", OWNER, "3600000"]], KEYS))
        if sname == "plain":
            srv.pipe(batch([["SET", "lease:#", OWNER]], KEYS))
        empty = srv.measure("empty", b"")
        res["empty_ir"].setdefault(sname, []).append(empty)
        for rid, label, where, templates, setup in ROWS:
            if where != sname:
                continue
            if setup:
                srv.pipe(batch(setup, KEYS))
            data = batch(templates, N)
            srv.pipe(data)                 # warm: every key exists, every path taken once
            ir = srv.measure(rid, data)
            per = (ir - empty) / N
            row = res["rows"].setdefault(rid, {"label": label, "server": sname, "pair": len(templates) == 2,
                                               "rounds": []})
            row["rounds"].append(round(per, 1))
            B.log("  %-46s %9.0f Ir per %s" % (label, per, "pair" if len(templates) == 2 else "call"))
        if sname == "loaded" and srv.c("LOCK.INSPECT", "lease:%012d" % 999)[0] != 1:
            sys.exit("bench-instr: a lease ended during the tax runs")
    finally:
        srv.stop()


def finish(res, cell):
    rows = res["rows"]
    ratios = {}
    for ours, same, minimal in FLOOR_OF:
        ratios[ours] = {"same_job": round(rows[same]["ir_per_call"] / rows[ours]["ir_per_call"], 3),
                        "minimal": round(rows[minimal]["ir_per_call"] / rows[ours]["ir_per_call"], 3) if minimal else None}
    res["floor_ratios"] = ratios
    res["tax"] = {k: round(rows["tax_%s_loaded" % k]["ir_per_call"] / rows["tax_%s_plain" % k]["ir_per_call"] - 1, 4)
                  for k in ("set", "incr", "setnx")}
    if cell:
        res["cell_ratio"] = round(rows["cell_cl_throttle"]["ir_per_call"] / rows["cl_throttle"]["ir_per_call"], 3)
    return res


def report_lines(res):
    """The table: Ir per call without AOF and with AOF, then the ratios on both."""
    a, b = res["no_aof"], res["aof"]
    out = ["Instructions per call (callgrind; %d calls per batch over %d keys; per pair for the pairs):"
           % (res["n"], res["keys"]),
           "  %-50s %9s %9s" % ("", "no AOF", "AOF on")]
    for rid in [row[0] for row in ROWS if row[0] in a["rows"]]:   # the table's order, not the JSON's
        r = a["rows"][rid]
        out.append("  %-50s %9.0f %9.0f" % (r["label"], r["ir_per_call"], b["rows"][rid]["ir_per_call"]))
    out.append("Against the same-job floor, floor Ir / ours (1.00 = at the floor); the minimal floor in brackets:")
    for ours in [f[0] for f in FLOOR_OF]:
        x = a["floor_ratios"][ours]
        y = b["floor_ratios"][ours]
        mini = lambda v: "-" if v["minimal"] is None else "%.3f" % v["minimal"]  # noqa: E731
        out.append("  %-50s %5.3f (%s)   AOF on %5.3f (%s)" % (a["rows"][ours]["label"], x["same_job"], mini(x),
                                                              y["same_job"], mini(y)))
    for name, r in (("no AOF", a), ("AOF on", b)):
        out.append("Tax, module + 1,000 leases held vs plain, Ir, %s: SET %+.2f %%, INCR %+.2f %%, SET NX PX + DEL %+.2f %%"
                   % ((name,) + tuple(100 * r["tax"][k] for k in ("set", "incr", "setnx"))))
    if "cell_ratio" in a:
        out.append("CL.THROTTLE, redis-cell Ir / ours: %.3fx (AOF on %.3fx)" % (a["cell_ratio"], b["cell_ratio"]))
    return out


if __name__ == "__main__":
    main()
