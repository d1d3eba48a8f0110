#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# fetch-redismodule-h.sh OUT -- put the redismodule.h of the installed redis-server at OUT.
#
# Debian ships no header for Redis modules, so this takes it from Debian's `redis`
# source package, matching the installed server's version, without touching the
# system's apt configuration: a private deb-src list in a scratch folder, built
# from the Debian archives the machine already uses. apt checks the source
# package against the archive's signed index; this script then checks the
# header's own SHA-256 against the known values below.
set -eu
out=$1
mkdir -p "$(dirname "$out")"
work=$(cd "$(dirname "$out")" && pwd)/apt
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"

version=$(dpkg-query -W -f '${Version}' redis-server 2>/dev/null || true)
[ -n "$version" ] || { echo "fetch-redismodule-h: redis-server is not installed (or pass REDISMODULE_H=/path/to/redismodule.h)" >&2; exit 1; }
upstream=${version#*:}; upstream=${upstream%%-*}

# Known headers: upstream version -> sha256 of src/redismodule.h.
case "$upstream" in
    7.0.15) want=dcc23952d82cd8f06e4fe6ee32de0b04d437cfe03779963230b3f0dde2c731e0 ;;
    *) want= ;;
esac

# Same archives as the system's own sources, as deb-src.
srcs="$work/sources.sources"
: > "$srcs"
for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v RS= -v ORS="\n\n" '/URIs: [^ \n]*debian/ && /Components:[^\n]*main/' "$f" |
        sed -e 's/^Types: .*/Types: deb-src/' -e '/^#/d' >> "$srcs"
    printf '\n' >> "$srcs"
done
if ! grep -q URIs "$srcs"; then
    # Classic one-line sources.list.
    grep -hE '^deb [^ ]*debian' /etc/apt/sources.list 2>/dev/null | sed 's/^deb /deb-src /' > "$work/sources.list" || true
    srcs="$work/sources.list"
fi
[ -s "$srcs" ] || { echo "fetch-redismodule-h: no Debian archive found in the apt sources" >&2; exit 1; }
case "$srcs" in *.sources) opt="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$work/parts"; mkdir -p "$work/parts"; cp "$srcs" "$work/parts/";;
                *) opt="-o Dir::Etc::SourceList=$srcs -o Dir::Etc::SourceParts=/dev/null";; esac

apt_opts="$opt -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o APT::Sandbox::User=root -q"
# shellcheck disable=SC2086
apt-get $apt_opts update >"$work/update.log" 2>&1 || { cat "$work/update.log" >&2; exit 1; }
# shellcheck disable=SC2086
(cd "$work" && apt-get $apt_opts source --download-only "redis=$version" >"$work/source.log" 2>&1) ||
    { cat "$work/source.log" >&2; exit 1; }
tarball=$(ls "$work"/redis_"$upstream".orig.tar.* | head -n 1)
tar -xaOf "$tarball" "redis-$upstream/src/redismodule.h" > "$out.tmp"
got=$(sha256sum "$out.tmp" | cut -d' ' -f1)
if [ -z "$want" ]; then
    echo "fetch-redismodule-h: no known checksum for redis $upstream; header sha256 is $got." >&2
    echo "Check it, then build with REDISMODULE_H=$out.tmp" >&2
    exit 1
fi
[ "$got" = "$want" ] || { echo "fetch-redismodule-h: checksum mismatch: $got != $want" >&2; rm -f "$out.tmp"; exit 1; }
mv "$out.tmp" "$out"
echo "fetch-redismodule-h: $out is redis $upstream's (sha256 $got)"
