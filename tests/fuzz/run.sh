#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/fuzz/run.sh [SECONDS] -- build every libFuzzer target into build/fuzz/,
# then run each one, one at a time, for SECONDS seconds (default 60) on a
# scratch copy of its seed corpus (build/fuzz/work/<name>/).
#
# Each target first replays its kept reproducers (tests/fuzz/crashes/<name>-*).
# Prints, per target, the executions (stat::number_of_executed_units) and the
# result; exits non-zero if a target fails to build, fails a reproducer, or
# finds a crash, leak or failed check (inputs in build/fuzz/artifacts/<name>/).
#
# Environment:
#   TARGETS="a b"    only these targets (default: every tests/fuzz/fuzz_*.c)
#   CC=clang-14      the compiler (default: clang)
#   FUZZ_SKIP_KNOWN=1  skip the checks of findings already reported (README.md)
#   FUZZ_ARGS="..."  extra libFuzzer flags (e.g. -jobs=2)
#   FUZZ_REPLAY_ONLY=1  no fuzzing: replay the reproducers and run every seed
#                    corpus input once (make fuzz-replay, part of make test)
#   FUZZ_OUT=dir     build and work directory (default: build/fuzz)
#   REDISMODULE_H=/path/redismodule.h  (default: build/include/redismodule.h,
#                    fetched by `make` if missing)
set -u

SECONDS_PER_TARGET=${1:-60}
case $SECONDS_PER_TARGET in
'' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FUZZ=$ROOT/tests/fuzz
OUT=${FUZZ_OUT:-$ROOT/build/fuzz}
CC=${CC:-clang}
REDISMODULE_H=${REDISMODULE_H:-$ROOT/build/include/redismodule.h}
CFLAGS="-g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
mkdir -p "$OUT"

if [ ! -f "$REDISMODULE_H" ]; then
    echo "== fetching redismodule.h (make $REDISMODULE_H)"
    (cd "$ROOT" && make --no-print-directory "build/include/redismodule.h") || exit 1
fi

# The pure cores come from the Makefile's CORE_SRC, with a fallback.
vars=$(cd "$ROOT" && make -s --no-print-directory -f Makefile -f - fuzz-print-vars 2>/dev/null <<'EOF'
fuzz-print-vars:
	@echo "CORE_SRC=$(CORE_SRC)"
EOF
)
CORE_SRC=$(printf '%s\n' "$vars" | sed -n 's/^CORE_SRC=//p')
[ -n "$CORE_SRC" ] || CORE_SRC=$(cd "$ROOT" && ls src/core/*.c | tr '\n' ' ')
# Glue helpers a harness links: for each src/ .c file it #includes, every
# src/<dir>/<x>.c whose header "<dir>/<x>.h" that file includes and that is not
# a pure core file (e.g. server/bucket_io.c for captcha/captcha_type.c); the
# clock, the cluster view and the wait queues excepted (the harness stands in
# for them).
helpers_for() {
    for g in $(sed -n 's|^#include "\.\./\.\./src/\([a-z_0-9/]*\.c\)".*|\1|p' "$1"); do
        for h in $(sed -n 's|^#include "\([a-z_0-9/]*\)\.h".*|\1|p' "$ROOT/src/$g"); do
            f=src/$h.c
            [ -f "$ROOT/$f" ] || continue
            case $f in src/server/clock.c | src/server/cluster.c | src/server/waitq.c) continue ;; esac
            case " $CORE_SRC " in *" $f "*) continue ;; esac
            echo "$ROOT/$f"
        done
    done | sort -u
}

if [ -n "${TARGETS:-}" ]; then
    names=$TARGETS
else
    names=$(cd "$FUZZ" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')
fi

status=0
built=
echo "== building into $OUT (core: $(echo $CORE_SRC))"
for n in $names; do
    src=$FUZZ/fuzz_$n.c
    extra=
    if grep -q 'include "fuzz_stubs.h"' "$src"; then
        extra="-isystem $(dirname "$REDISMODULE_H") $(helpers_for "$src")"
        echo "   fuzz_$n links:$(helpers_for "$src" | sed "s|^$ROOT/| |" | tr -d '\n')"
    fi
    # shellcheck disable=SC2086
    if (cd "$ROOT" && $CC $CFLAGS -I"$ROOT/src" -o "$OUT/fuzz_$n" "$src" $extra $CORE_SRC -ljansson) \
        >"$OUT/build_$n.log" 2>&1; then
        built="$built $n"
    else
        echo "BUILD FAILED: fuzz_$n (see $OUT/build_$n.log)"
        sed 's/^/    /' "$OUT/build_$n.log" | head -40
        status=1
    fi
done

summary=
for n in $built; do
    work=$OUT/work/$n
    art=$OUT/artifacts/$n
    rm -rf "$work"
    mkdir -p "$work" "$art"
    [ -d "$FUZZ/corpus/$n" ] && cp "$FUZZ/corpus/$n"/* "$work"/ 2>/dev/null
    dict=
    [ -f "$FUZZ/fuzz_$n.dict" ] && dict="-dict=$FUZZ/fuzz_$n.dict"
    log=$OUT/fuzz_$n.log
    # Regression: the kept reproducers (crashes/<target>-*) must pass first.
    for c in "$FUZZ"/crashes/"$n"-*; do
        [ -f "$c" ] || continue
        if ! "$OUT/fuzz_$n" "$c" >"$OUT/replay_$n.log" 2>&1; then
            echo "REGRESSION: fuzz_$n fails on $c (see $OUT/replay_$n.log)"
            grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error|FUZZ CHECK FAILED' "$OUT/replay_$n.log" | sed 's/^/    /'
            status=1
        fi
    done
    if [ -n "${FUZZ_REPLAY_ONLY:-}" ]; then
        echo "== fuzz_$n: replaying $(ls "$work" | wc -l) corpus inputs (log: $log)"
        # -runs=0: run each input of the corpus once, no mutation
        "$OUT/fuzz_$n" -runs=0 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$work" >"$log" 2>&1
    else
        echo "== fuzz_$n for ${SECONDS_PER_TARGET}s (log: $log)"
        # shellcheck disable=SC2086
        "$OUT/fuzz_$n" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$art/" $dict ${FUZZ_ARGS:-} "$work" >"$log" 2>&1
    fi
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -eq 0 ]; then
        result=ok
    else
        result="FAILED (exit $rc)"
        status=1
        grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|FUZZ CHECK FAILED' "$log" | sed 's/^/    /'
        ls "$art" | sed "s|^|    artifact: $art/|"
    fi
    line=$(printf '%-16s execs=%-12s corpus=%-6s %s' "$n" "${execs:-?}" "$(ls "$work" | wc -l)" "$result")
    echo "$line"
    summary="$summary$line
"
done

echo "== summary (${SECONDS_PER_TARGET}s per target)"
printf '%s' "$summary"
exit $status
