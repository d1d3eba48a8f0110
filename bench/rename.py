# SPDX-License-Identifier: BSD-3-Clause
"""RENAME of a held lock against an unheld one, at 1,000 and 1,000,000 keys, for `make bench`
(issue #25 item 3): the server CPU per RENAME, counting the work a held lock's rename leaves
for just after the command (its lease entry placed again), and the keys the module scanned
(INFO lease_keys_scanned; 0 is the goal at any size). Runs alone too:

    MODULE=build/mcaptcha_cache.so python3 bench/rename.py

Each round renames 200 locks back and forth in batches (held: leases of 10 minutes; unheld:
acquired and released), held and unheld batches alternating; ratios are medians of the
per-round ratios of server CPU per RENAME (INFO cpu over the batch, with the post-command
timers it arms). Used by bench.py.
"""
import statistics
import sys

import bench as B

LOCKS = 200
ROUNDS = 7
FLIPS = 10   # renames of each lock per batch (there and back)


def _batch(srv, conn, prefix):
    """Rename each of the LOCKS locks `prefix:i` FLIPS times (there and back); returns the
    server CPU in microseconds per RENAME, after the post-command work settled."""
    cpu0 = srv.cpu_seconds()
    n = 0
    for f in range(FLIPS):
        a, b = ("", ":x") if f % 2 == 0 else (":x", "")
        for i in range(LOCKS):
            conn.send("RENAME", "%s:%d%s" % (prefix, i, a), "%s:%d%s" % (prefix, i, b))
        for i in range(LOCKS):
            if conn.read() != "OK":
                raise SystemExit("bench: a RENAME failed")
        n += LOCKS
    srv.c("PING")
    return 1e6 * (srv.cpu_seconds() - cpu0) / n


def _scanned(srv):
    info = dict(l.split(":", 1) for l in srv.c("INFO", "mcaptcha_cache_locks").splitlines() if ":" in l)
    return int(info.get("mcaptcha_cache_lease_keys_scanned", "-1"))


def _size(keys):
    srv = B.Server(modules=[B.MODULE], extra=["--enable-debug-command", "yes"])
    try:
        if keys:
            srv.c("DEBUG", "POPULATE", keys, "pop")
        for i in range(LOCKS):
            srv.c("LOCK.ACQUIRE", "h:%d" % i, "o", 600000)
            srv.c("LOCK.ACQUIRE", "u:%d" % i, "o", 600000)
            srv.c("LOCK.RELEASE", "u:%d" % i, "o")
        conn = B.Conn(srv.port)
        scanned0 = _scanned(srv)
        held, unheld = [], []
        for rnd in range(ROUNDS):
            order = (("h", held), ("u", unheld)) if rnd % 2 == 0 else (("u", unheld), ("h", held))
            for prefix, dest in order:
                dest.append(_batch(srv, conn, prefix))
        conn.close()
        return {"keys": srv.c("DBSIZE"), "held_cpu_us": statistics.median(held),
                "unheld_cpu_us": statistics.median(unheld),
                "ratio": statistics.median(h / u for h, u in zip(held, unheld)),
                "keys_scanned": _scanned(srv) - scanned0}
    finally:
        srv.stop()


def section_rename(sizes=(1000, 1000000)):
    out = {}
    for keys in sizes:
        r = _size(int(keys * min(B.SCALE, 1)) if B.SCALE < 1 else keys)
        out[keys] = r
        B.log("  RENAME, %d keys: held %.2f us, unheld %.2f us of server CPU (%.2fx); keys scanned %d"
              % (r["keys"], r["held_cpu_us"], r["unheld_cpu_us"], r["ratio"], r["keys_scanned"]))
    return out


def report_lines(res):
    return ["", "RENAME of a held lock against an unheld one (server CPU per RENAME, with its post-command work):"] + [
        "  %9d keys: held %.2f us, unheld %.2f us (%.2fx), keys scanned %d"
        % (r["keys"], r["held_cpu_us"], r["unheld_cpu_us"], r["ratio"], r["keys_scanned"]) for r in res.values()]


if __name__ == "__main__":
    import os
    os.makedirs(B.OUT, exist_ok=True)
    res = section_rename()
    print("\n".join(report_lines(res)))
    sys.exit(0)
