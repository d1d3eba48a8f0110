#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# fetch-server.sh NAME -- print the path of a newer server binary for the test
# matrix, fetching it from Debian into the cache first when it is missing.
#
#   valkey-8.0   the valkey-server binary of bookworm-backports (valkey-tools)
#   valkey-8.1   Debian trixie's `valkey` source package (8.1.1), built here
#   valkey-9.1   Debian forky's `valkey` source package, built here
#   redis-8.0    Debian forky's `redis` source package, built here
#
# fetch-server.sh --header NAME (valkey-9.1 or redis-8.0) only unpacks the
# source package's module header (src/valkeymodule.h, src/redismodule.h) into
# the cache and prints its path, without building the server (seconds, not
# minutes; `make valkey-header-check` uses it). fetch-server.sh --cached NAME
# prints the server's path only if it is already cached (exit 1 otherwise).
#
# Like fetch-redismodule-h.sh, it never touches the system's apt configuration:
# a private sources list, lists and cache under the cache directory. apt checks
# every download against the archive's signed index. Where the mirror serves
# only a source package's orig tarball (trixie's valkey: its .dsc and
# debian.tar are 404 here), `apt-get source --download-only` fails after
# fetching it; the tarball is then used only if its SHA256 equals the one in the
# Checksums-Sha256 of the signed Sources index (apt-cache showsrc). Builds are
# offline (the orig tarballs carry their own jemalloc, Lua and hiredis; we
# build with the libc allocator and no TLS): `make -C src MALLOC=libc
# BUILD_TLS=no`, 1-5 minutes each on 2 cores. The cache (default /var/cache/mcaptcha-servers,
# MCAPTCHA_SERVER_CACHE to change) lives outside the clone and is reused.
set -eu
header='' cached=''
case "${1:-}" in --header) header=1; shift ;; --cached) cached=1; shift ;; esac
name=${1:?usage: fetch-server.sh [--header|--cached] valkey-8.0|valkey-8.1|valkey-9.1|redis-8.0}
cache=${MCAPTCHA_SERVER_CACHE:-/var/cache/mcaptcha-servers}
dir=$cache/$name
bin=$dir/bin/server
[ -n "$cached" ] && { [ -x "$bin" ] && echo "$bin"; exit $?; }
if [ -n "$header" ]; then
    case "$name" in
        valkey-9.1) hdr=valkeymodule.h ;;
        redis-8.0)  hdr=redismodule.h ;;
        *) echo "fetch-server: no source package (so no header) for $name" >&2; exit 2 ;;
    esac
    bin=$dir/include/$hdr
    [ -f "$bin" ] && { echo "$bin"; exit 0; }
fi
[ -x "$bin" ] && { echo "$bin"; exit 0; }

case "$name" in
    valkey-8.0) suite=bookworm-backports; kind=binary; pkg=valkey-tools; exe=valkey-check-rdb ;;
    valkey-8.1) suite=trixie; kind=source; pkg=valkey; exe=valkey-server ;;
    valkey-9.1) suite=forky; kind=source; pkg=valkey; exe=valkey-server ;;
    redis-8.0)  suite=forky; kind=source; pkg=redis; exe=redis-server ;;
    *) echo "fetch-server: unknown server $name" >&2; exit 2 ;;
esac

work=$dir/apt${header:+-header}
rm -rf "$work"
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/parts" "$dir/bin"
types=deb; [ "$kind" = source ] && types=deb-src
cat > "$work/parts/private.sources" <<SRC
Types: $types
URIs: http://deb.debian.org/debian
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt_opts="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$work/parts -o Dir::State::Lists=$work/lists"
apt_opts="$apt_opts -o Dir::Cache=$work/cache -o APT::Sandbox::User=root -q"
log=$dir/fetch${header:+-header}.log
: > "$log"
# shellcheck disable=SC2086
apt-get $apt_opts update >>"$log" 2>&1 || { cat "$log" >&2; exit 1; }

if [ "$kind" = binary ]; then
    # shellcheck disable=SC2086
    (cd "$work" && apt-get $apt_opts download "$pkg" >>"$log" 2>&1) || { cat "$log" >&2; exit 1; }
    dpkg-deb -x "$work"/"$pkg"_*.deb "$dir/root"
    # valkey-server is valkey-check-rdb under another name (it looks at argv[0]).
    ln -sf "$dir/root/usr/bin/$exe" "$dir/bin/valkey-server"
    ln -sf valkey-server "$dir/bin/server"
else
    # shellcheck disable=SC2086
    if ! (cd "$work" && apt-get $apt_opts source --download-only "$pkg" >>"$log" 2>&1); then
        # Only the orig tarball may have come (the .dsc/debian.tar are not
        # served everywhere); it is checked against the signed index below.
        ls "$work"/"$pkg"_*.orig.tar.* >/dev/null 2>&1 || { cat "$log" >&2; exit 1; }
        echo "fetch-server: apt-get source $pkg ($suite) fetched only the orig tarball; checking it against the Sources index" >>"$log"
    fi
    tarball=$(ls "$work"/"$pkg"_*.orig.tar.* | head -n 1)
    # The SHA256 the signed Sources index gives for this file name (apt has
    # checked it while downloading; this makes the fallback above explicit).
    # shellcheck disable=SC2086
    want=$(apt-cache $apt_opts showsrc "$pkg" 2>>"$log" | awk -v f="$(basename "$tarball")" '
        /^Checksums-Sha256:/ { s = 1; next } /^[^ ]/ { s = 0 } s && $3 == f { print $1; exit }')
    got=$(sha256sum "$tarball" | cut -d' ' -f1)
    if [ -z "$want" ] || [ "$want" != "$got" ]; then
        echo "fetch-server: $(basename "$tarball"): sha256 $got, Sources index says '${want:-nothing}'" >&2
        exit 1
    fi
    echo "fetch-server: $(basename "$tarball"): sha256 $got, as in the Sources index" >>"$log"
    if [ -n "$header" ]; then
        mkdir -p "$dir/include"
        tar -xaOf "$tarball" --wildcards "*/src/$hdr" > "$bin.tmp"
        [ -s "$bin.tmp" ] || { echo "fetch-server: no src/$hdr in $(basename "$tarball")" >&2; exit 1; }
        mv "$bin.tmp" "$bin"
        rm -rf "$work"
        echo "fetch-server: $hdr of $(basename "$tarball") (sha256 $(sha256sum "$bin" | cut -d' ' -f1))" >&2
        echo "$bin"
        exit 0
    fi
    rm -rf "$dir/src"
    mkdir -p "$dir/src"
    tar -xaf "$tarball" -C "$dir/src" --strip-components=1
    echo "fetch-server: building $name from $(basename "$tarball") (a few minutes)" >&2
    make -C "$dir/src/src" -j2 MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no "$exe" >>"$log" 2>&1 ||
        { tail -40 "$log" >&2; exit 1; }
    cp "$dir/src/src/$exe" "$dir/bin/$exe"
    ln -sf "$exe" "$dir/bin/server"
    rm -rf "$dir/src"
fi
rm -rf "$work"
"$bin" --version >&2
echo "$bin"
