#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh GROUP... -- install the Debian packages a make target needs, when missing.
# Groups: build, run, test, bench, deb, fuzz, servers, python, node, ruby. Installs only as root; otherwise says what is missing.
set -eu
pkgs=
for g in "$@"; do
    case "$g" in
        build) pkgs="$pkgs gcc make libc6-dev libjansson-dev pkg-config redis-server ca-certificates" ;;
        run)   pkgs="$pkgs redis-server redis-tools" ;;
        test)  pkgs="$pkgs redis-server redis-tools python3 python3-pytest python3-redis python3-hypothesis python3-pytest-xdist python3-pip python3-setuptools libcmocka-dev valgrind dpkg-dev debhelper" ;;
        bench) pkgs="$pkgs redis-server redis-tools gnuplot-nox nodejs npm python3 valgrind" ;;
        deb)   pkgs="$pkgs dpkg-dev debhelper lintian libjansson-dev libcmocka-dev" ;;
        fuzz)  pkgs="$pkgs clang libclang-rt-14-dev" ;;
        python) pkgs="$pkgs python3 python3-redis python3-pytest python3-venv python3-mypy python3-limits python3-flask-limiter python3-flask" ;;
        node)  pkgs="$pkgs nodejs npm redis-server redis-tools" ;;
        ruby)  pkgs="$pkgs ruby ruby-rubygems ruby-redis ruby-rspec ruby-timecop redis-server redis-tools" ;;
        servers) pkgs="$pkgs gcc make pkg-config libc6-dev dpkg-dev debian-archive-keyring libatomic1 libjemalloc2 liblzf1 libssl3 libsystemd0" ;;
        *) echo "deps.sh: unknown group $g" >&2; exit 2 ;;
    esac
done
missing=
for p in $pkgs; do
    case " $missing " in *" $p "*) continue ;; esac
    # Node.js installed from elsewhere (e.g. NodeSource's nodejs, which bundles npm and
    # conflicts with Debian's npm package) serves as well as Debian's
    case "$p" in nodejs) command -v node >/dev/null 2>&1 && continue ;; npm) command -v npm >/dev/null 2>&1 && continue ;; esac
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing Debian packages:$missing (run as root, or install them)" >&2
    exit 1
fi
echo "deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
