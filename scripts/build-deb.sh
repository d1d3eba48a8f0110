#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# build-deb.sh OUTDIR REDISMODULE_H -- build the Debian package the Debian way
# (debian/, debhelper) from a copy of the tree, so that nothing is written into the tree
# itself: OUTDIR/redis-mcaptcha-cache-<version>/ holds the copy (the files git knows,
# committed or not, without what .gitignore excludes), with the header at
# build/include/redismodule.h (Debian ships none); `dpkg-buildpackage -b -us -uc` in it
# writes the .deb, the -dbgsym .deb, the .buildinfo and the .changes into OUTDIR.
# Prints the path of the .changes file.
#
# DEB_MAINTAINER="Name <address>" (make deb DEB_MAINTAINER=...) packages it under
# that maintainer: the copy's debian/control Maintainer and the newest
# debian/changelog entry's signature line both take it (the tree's own files name
# the project's maintainers), as an organisation that rebuilds packages needs.
set -eu
out=$1
header=$2
pkg=redis-mcaptcha-cache
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
arch=$(dpkg --print-architecture)
src=$out/$pkg-$version

mkdir -p "$out"
rm -rf "$src"
rm -f "$out/${pkg}_"* "$out/${pkg}-dbgsym_"*
mkdir -p "$src/build/include"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # (a file deleted but not yet committed is skipped)
    git ls-files -z --cached --others --exclude-standard |
        tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$src"
else
    # not a git checkout (an unpacked tarball): everything but the outputs and server data
    tar --exclude=./build --exclude=./data --exclude=./.git -cf - . | tar -xf - -C "$src"
fi
cp "$header" "$src/build/include/redismodule.h"
if [ -n "${DEB_MAINTAINER:-}" ]; then
    case $DEB_MAINTAINER in
    *"<"*@*">") ;;
    *) echo "build-deb.sh: DEB_MAINTAINER must read 'Name <address>'" >&2; exit 1 ;;
    esac
    m=$(printf '%s' "$DEB_MAINTAINER" | sed 's/[\\&|]/\\&/g')
    sed -i "s|^Maintainer: .*|Maintainer: $m|" "$src/debian/control"
    # the first signature line only: the entry being built
    sed -i "0,/^ -- .*>  /s|^ -- .*>  | -- $m  |" "$src/debian/changelog"
fi
(cd "$src" && dpkg-buildpackage -b -us -uc >../build.log 2>&1) || {
    tail -40 "$out/build.log" >&2
    echo "build-deb.sh: dpkg-buildpackage failed (log: $out/build.log)" >&2
    exit 1
}
echo "$out/${pkg}_${version}_${arch}.changes"
