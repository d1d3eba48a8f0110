#!/bin/sh
# fetch-server.sh NAME -- print the path of a newer server binary for the test
# matrix, fetching it from Debian into the cache first when it is missing.
#
#   valkey-8.0   the valkey-server binary of bookworm-backports (valkey-tools)
#   valkey-9.1   Debian forky's `valkey` source package, built here
#   redis-8.0    Debian forky's `redis` source package, built here
#
# Like fetch-redismodule-h.sh, it never touches the system's apt configuration:
# a private sources list, lists and cache under the cache directory. apt checks
# every download against the archive's signed index. Builds are offline (the
# orig tarballs carry their own jemalloc, Lua and hiredis; we build with the
# libc allocator and no TLS): `make -C src MALLOC=libc BUILD_TLS=no`, 2-5
# minutes each on 2 cores. The cache (default /var/cache/mcaptcha-servers,
# MCAPTCHA_SERVER_CACHE to change) lives outside the clone and is reused.
set -eu
name=${1:?usage: fetch-server.sh valkey-8.0|valkey-9.1|redis-8.0}
cache=${MCAPTCHA_SERVER_CACHE:-/var/cache/mcaptcha-servers}
dir=$cache/$name
bin=$dir/bin/server
[ -x "$bin" ] && { echo "$bin"; exit 0; }

case "$name" in
    valkey-8.0) suite=bookworm-backports; kind=binary; pkg=valkey-tools; exe=valkey-check-rdb ;;
    valkey-9.1) suite=forky; kind=source; pkg=valkey; exe=valkey-server ;;
    redis-8.0)  suite=forky; kind=source; pkg=redis; exe=redis-server ;;
    *) echo "fetch-server: unknown server $name" >&2; exit 2 ;;
esac

work=$dir/apt
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
log=$dir/fetch.log
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
    (cd "$work" && apt-get $apt_opts source --download-only "$pkg" >>"$log" 2>&1) || { cat "$log" >&2; exit 1; }
    tarball=$(ls "$work"/"$pkg"_*.orig.tar.* | head -n 1)
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
