#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# redis-server-sanitized.sh ARGS... -- run redis-server with the ASan/UBSan
# runtimes preloaded, for a module built with -fsanitize=address,undefined.
# Reports go to $SANITIZER_REPORT_DIR (one file per process); the suite fails
# when any appears (see the Makefile's integration-asan target).
dir=${SANITIZER_REPORT_DIR:-/tmp}
mkdir -p "$dir"
asan=$(gcc -print-file-name=libasan.so)
ubsan=$(gcc -print-file-name=libubsan.so)
export LD_PRELOAD="$asan $ubsan"
# Redis keeps its own allocations at exit (not leaks of ours): no leak check.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$dir/asan:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$dir/ubsan"
exec "${REDIS_SERVER_BIN:-/usr/bin/redis-server}" "$@"
