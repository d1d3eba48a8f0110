#!/bin/sh
# build-deb.sh MODULE OUTDIR -- build redis-mcaptcha-cache_<version>_<arch>.deb with dpkg-deb.
# Stages OUTDIR/root (DEBIAN/control and md5sums, the module, the commented loadmodule
# snippet, the docs and copyright), then writes OUTDIR/<package>_<version>_<arch>.deb and
# prints its path. No maintainer scripts: installing never edits /etc/redis/redis.conf.
# DEB_MAINTAINER overrides the Maintainer field.
set -eu
module=$1
out=$2
pkg=redis-mcaptcha-cache
maint=${DEB_MAINTAINER:-mcaptcha-cache maintainers <maintainers@users.noreply.a-seed-ef7e39f0.example>}
version=$(sed -n 's/^#define MODULE_VERSION_STRING "\([^"]*\)".*/\1/p' src/module.c)
[ -n "$version" ] || { echo "build-deb.sh: no MODULE_VERSION_STRING in src/module.c" >&2; exit 1; }
arch=$(dpkg --print-architecture)
root=$out/root
doc=$root/usr/share/doc/$pkg

umask 022
rm -rf "$root"
install -d "$root/DEBIAN" "$root/usr/lib/redis/modules" "$doc/docs" "$doc/examples"
# The same bytes `make install` copies (built with -g, not stripped: gdb and core dumps
# get symbols and line numbers). Redis will not load a module without execute permission.
install -m 0755 "$module" "$root/usr/lib/redis/modules/mcaptcha_cache.so"
install -m 0644 packaging/deb/mcaptcha_cache.conf "$doc/examples/mcaptcha_cache.conf"
install -m 0644 packaging/deb/copyright "$doc/copyright"
install -m 0644 README.md "$doc/README.md"
install -m 0644 docs/*.md "$doc/docs/"

size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $size
Depends: redis-server (>= 5:7.0), libjansson4
Section: database
Priority: optional
Description: mCaptcha cache, rate limiter and lock module for Redis
 mcaptcha_cache is a Redis module: mCaptcha's captcha counters and
 proof-of-work challenges (MCAPTCHA_CACHE.*), GCRA rate limiting (RL.*) and
 fenced locks and semaphores with server-side waiting (LOCK.*).
 .
 Installing the package does not load the module: add the line
 loadmodule /usr/lib/redis/modules/mcaptcha_cache.so
 to /etc/redis/redis.conf (see examples/mcaptcha_cache.conf in
 /usr/share/doc/redis-mcaptcha-cache) and restart redis-server.
CONTROL
(cd "$root" && find usr -type f | LC_ALL=C sort | xargs md5sum) > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums"

deb=$out/${pkg}_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
