#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tests/mutants/run.sh [PATCH...] -- hand-written mutation testing (make mutants).
#
# Each tests/mutants/NN-name.patch is one small, deliberate bug in src/ (a
# unified diff; its first lines say what it breaks and which tests must notice:
# "# test: make unit" or "# test: pytest <files...>"). For each mutant this
# copies the tree to a scratch directory (build/mutants/<name>/), applies the
# patch, builds, and runs the named tests there. The tests must FAIL: a mutant
# whose tests pass "survived" and fails the run; so does a patch that no longer
# applies (update it with the code). Exit status 0 only when every mutant is
# killed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$ROOT/build/mutants
REDISMODULE_H=${REDISMODULE_H:-$ROOT/build/include/redismodule.h}
patches=${*:-$(ls "$ROOT"/tests/mutants/*.patch)}
status=0
# MUTANTS_CHECK_ONLY=1 (make mutants-check, part of make test): only check that
# every patch still applies to src/, so an edit that moves a mutant's context
# fails locally rather than in CI's make mutants.
if [ "${MUTANTS_CHECK_ONLY:-0}" = 1 ]; then
    for p in $patches; do
        if (cd "$ROOT" && patch -p1 --dry-run --quiet <"$p") >/dev/null 2>&1; then
            echo "applies  $(basename "$p")"
        else
            echo "DOES NOT APPLY (update the patch): $(basename "$p")"
            status=1
        fi
    done
    exit $status
fi
[ -f "$REDISMODULE_H" ] || (cd "$ROOT" && make --no-print-directory build/include/redismodule.h) || exit 1
summary=
for p in $patches; do
    name=$(basename "$p" .patch)
    desc=$(sed -n '1s/^# //p' "$p")
    test=$(sed -n 's/^# test: //p' "$p" | head -1)
    dir=$OUT/$name
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$ROOT" && tar -cf - --exclude=./build --exclude=./.git --exclude=./data --exclude='*.so' \
        --exclude=__pycache__ .) | (cd "$dir" && tar -xf -)
    log=$OUT/$name.log
    if ! (cd "$dir" && patch -p1 --quiet --no-backup-if-mismatch <"$p") >"$log" 2>&1; then
        result="DOES NOT APPLY (update the patch)"
        status=1
    elif ! (cd "$dir" && make -j2 --no-print-directory REDISMODULE_H="$REDISMODULE_H" build/mcaptcha_cache.so) >>"$log" 2>&1; then
        result="DOES NOT BUILD (fix the patch)"
        status=1
    else
        case $test in
        "make unit") cmd="make --no-print-directory REDISMODULE_H=$REDISMODULE_H unit" ;;
        pytest*) cmd="MCAPTCHA_MODULE=$dir/build/mcaptcha_cache.so /usr/bin/python3 -m pytest -q -x -p no:cacheprovider ${test#pytest }" ;;
        *) cmd=$test ;;
        esac
        if (cd "$dir" && sh -c "$cmd") >>"$log" 2>&1; then
            result="SURVIVED: its tests pass with the bug in (log: $log)"
            status=1
        else
            result="killed"
        fi
    fi
    line=$(printf '%-32s %s  -- %s' "$name" "$result" "$desc")
    echo "$line"
    summary="$summary$line
"
    [ "$result" = killed ] && rm -rf "$dir"
done
echo "== mutants"
printf '%s' "$summary"
exit $status
