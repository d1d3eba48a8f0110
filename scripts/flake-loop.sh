#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# flake-loop.sh -- the integration suite RUNS times in a row beside BURNERS
# CPU-burning processes (busy loops), stopping at the first failing run; each
# run's log goes to $OUT/run-<n>.log and a one-line summary to stdout.
# Used by `make flake-loop` (RUNS=50 BURNERS=2 JOBS=3 by default): the test
# suite must not depend on a quiet machine. JOBS > 1 runs each suite in that
# many pytest-xdist workers at once (each with its own servers and its own
# share of ports, see tests/integration/servers.py): more load, not less, and a
# run in about a third of the time, since most of a test's time is spent
# waiting for server-side time to pass.
set -u
RUNS=${RUNS:-50}
BURNERS=${BURNERS:-2}
JOBS=${JOBS:-3}
MODULE=${MCAPTCHA_MODULE:?set MCAPTCHA_MODULE to the module to test}
OUT=${OUT:-build/flake-loop}
PYTHON=${PYTHON:-/usr/bin/python3}
mkdir -p "$OUT"
parallel=
if [ "$JOBS" -gt 1 ]; then parallel="-p xdist -n $JOBS"; fi
pids=
i=0
while [ "$i" -lt "$BURNERS" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
trap 'kill $pids 2>/dev/null' EXIT INT TERM
n=1
while [ "$n" -le "$RUNS" ]; do
    start=$(date +%s)
    if MCAPTCHA_MODULE=$MODULE $PYTHON -m pytest -q -p no:cacheprovider $parallel -rf tests/integration >"$OUT/run-$n.log" 2>&1; then
        echo "run $n/$RUNS passed in $(( $(date +%s) - start )) s ($(tail -1 "$OUT/run-$n.log"))"
    else
        echo "run $n/$RUNS FAILED after $(( $(date +%s) - start )) s:"
        grep -E '^FAILED|^ERROR' "$OUT/run-$n.log"
        exit 1
    fi
    n=$((n + 1))
done
echo "flake-loop: $RUNS runs in a row passed beside $BURNERS CPU burners ($JOBS pytest workers)"
