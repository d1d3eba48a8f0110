# SPDX-License-Identifier: BSD-3-Clause
"""The Debian package, end to end: `make deb` builds it the Debian way (debian/, debhelper,
`dpkg-buildpackage -b -us -uc` in a copy of the tree) and every output lands in build/deb/:
the .deb, the -dbgsym .deb, the .buildinfo and the .changes. The .deb's control fields and
file list are what Debian expects (the module 0755 under /usr/lib/redis/modules, stripped,
hardened, its debug info in the -dbgsym package under its build-id; the docs; no maintainer
scripts and nothing under /etc, so installing never edits redis.conf). Installed with dpkg
into a scratch root (`dpkg --root`, its own database; never into this machine), it verifies,
and a clean redis-server started from a redis.conf holding the packaged example's
`loadmodule` line, uncommented, lists the module at the version of VERSION and answers a
command of every family; purging it leaves no file behind."""

import gzip
import os
import re
import stat
import subprocess

from servers import ConfigFileServer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PKG = "redis-mcaptcha-cache"
SO = "/usr/lib/redis/modules/mcaptcha_cache.so"
DOC = "/usr/share/doc/" + PKG
SNIPPET = DOC + "/examples/mcaptcha_cache.conf"


def run(*cmd, **kw):
    out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=900, **kw)
    assert out.returncode == 0, "%s: %s%s" % (" ".join(cmd), out.stdout, out.stderr)
    return out.stdout


def version():
    with open(os.path.join(REPO_ROOT, "VERSION")) as f:
        return f.read().strip()


def readelf(*args):
    return run("readelf", "-W", *args)


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", readelf("-n", path))
    assert m, "no GNU build-id note in %s" % path
    return m.group(1)


def files_of(deb):
    """{path: (mode string, owner)} of a .deb's data archive."""
    entries = {}
    for line in run("dpkg-deb", "-c", deb).splitlines():
        mode, owner, _size, _date, _time, path = line.split(None, 5)
        entries[path[1:].split(" -> ")[0].rstrip("/") or "/"] = (mode, owner)
    return entries


def files_in_changes(path):
    """The file names a .changes lists in its Files field."""
    names, inside = [], False
    for line in open(path).read().splitlines():
        if line.startswith("Files:"):
            inside = True
        elif inside and line.startswith(" "):
            names.append(line.split()[-1])
        else:
            inside = False
    return names


def test_make_deb_then_install_into_a_scratch_root_and_load(tmp_path):
    ver = version()
    arch = run("dpkg", "--print-architecture").strip()
    out_dir = os.path.join(REPO_ROOT, "build", "deb")
    changes = run("make", "--no-print-directory", "-C", REPO_ROOT, "deb").strip().splitlines()[-1]
    changes = os.path.join(REPO_ROOT, changes)
    assert changes == os.path.join(out_dir, "%s_%s_%s.changes" % (PKG, ver, arch))

    # Every output in build/deb/, as the .changes lists them (binary-only: no source).
    deb = os.path.join(out_dir, "%s_%s_%s.deb" % (PKG, ver, arch))
    dbgsym = os.path.join(out_dir, "%s-dbgsym_%s_%s.deb" % (PKG, ver, arch))
    buildinfo = os.path.join(out_dir, "%s_%s_%s.buildinfo" % (PKG, ver, arch))
    listed = sorted(files_in_changes(changes))
    assert listed == sorted(os.path.basename(p) for p in (deb, dbgsym, buildinfo)), listed
    assert all(os.path.isfile(p) for p in (deb, dbgsym, buildinfo))

    # Control fields: debhelper's shlibs (libc, libjansson), a server, the version of VERSION.
    fields = {f: run("dpkg-deb", "-f", deb, f).strip()
              for f in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Description")}
    assert (fields["Package"], fields["Version"], fields["Architecture"]) == (PKG, ver, arch)
    depends = [d.strip() for d in fields["Depends"].split(",")]
    assert any(re.fullmatch(r"libc6 \(>= [\d.]+\)", d) for d in depends), depends
    assert any(re.fullmatch(r"libjansson4 \(>= [\d.]+\)", d) for d in depends), depends
    assert "redis-server (>= 5:7.0) | valkey-server" in depends, depends
    assert re.fullmatch(r".+ <[^<>@\s]+@[^<>\s]+\.[a-z]+>", fields["Maintainer"]), fields["Maintainer"]
    assert fields["Description"].splitlines()[0].strip()

    # The control archive: no maintainer script (installing runs nothing, edits nothing).
    ctrl = run("sh", "-c", 'dpkg-deb --ctrl-tarfile "$1" | tar -t', "-", deb).split()
    assert sorted(c for c in ctrl if c != "./") == ["./control", "./md5sums"], ctrl

    # The file list: root-owned, the module 0755, the docs, nothing under /etc.
    entries = files_of(deb)
    assert all(owner == "root/root" for _, owner in entries.values()), entries
    files = {p: m for p, (m, _) in entries.items() if m.startswith("-")}
    assert files.pop(SO) == "-rwxr-xr-x"
    docs = {DOC + "/docs/" + n for n in os.listdir(os.path.join(REPO_ROOT, "docs")) if n.endswith(".md")}
    assert docs
    docs |= {DOC + "/README.md", DOC + "/CHANGELOG.md"}
    # dh_compress gzips the larger docs
    for d in docs:
        assert files.pop(d, None) == "-rw-r--r--" or files.pop(d + ".gz", None) == "-rw-r--r--", d
    assert files == {SNIPPET: "-rw-r--r--", DOC + "/copyright": "-rw-r--r--", DOC + "/changelog.gz": "-rw-r--r--",
                     "/usr/share/lintian/overrides/" + PKG: "-rw-r--r--"}, files
    assert all(m == "drwxr-xr-x" for p, (m, _) in entries.items() if m.startswith("d"))
    assert not any(p.startswith("/etc") for p in entries)

    # Installed by dpkg into a scratch root with its own database (dependencies are this
    # machine's, not the scratch root's: --force-depends).
    root = tmp_path / "root"
    admin = root / "var" / "lib" / "dpkg"
    for d in ("updates", "info"):
        (admin / d).mkdir(parents=True)
    (admin / "status").write_text("")
    dpkg = ["dpkg", "--root=%s" % root, "--force-not-root", "--force-script-chrootless"]
    run(*dpkg, "--force-depends", "-i", deb)
    assert "Status: install ok installed" in run(*dpkg, "-s", PKG)
    run(*dpkg, "--verify", PKG)
    installed = str(root) + SO
    assert stat.S_IMODE(os.stat(installed).st_mode) == 0o755

    # Stripped, hardened, its debug info in the -dbgsym package under its build-id.
    sections = readelf("-S", installed)
    assert ".debug_info" not in sections and ".symtab" not in sections and ".gnu_debuglink" in sections
    assert "BIND_NOW" in readelf("-d", installed) and "GNU_RELRO" in readelf("-l", installed)
    assert re.search(r"__(?!stack_chk)\w+_chk\b", readelf("--dyn-syms", installed)), "no fortified libc call"
    bid = build_id(installed)
    debug = "/usr/lib/debug/.build-id/%s/%s.debug" % (bid[:2], bid[2:])
    assert debug in files_of(dbgsym)
    run("dpkg-deb", "-x", dbgsym, str(tmp_path / "dbg"))
    assert ".debug_info" in readelf("-S", str(tmp_path / "dbg") + debug)

    # The example: only comments, one of them the loadmodule line to uncomment.
    snippet = (root / SNIPPET[1:]).read_text().splitlines()
    assert all(l.startswith("#") or not l.strip() for l in snippet), snippet
    assert "# loadmodule %s" % SO in snippet
    with gzip.open(str(root / DOC[1:] / "changelog.gz"), "rt") as f:
        assert f.readline().startswith("%s (%s) " % (PKG, ver))

    # What a user does: uncomment the line into redis.conf (here, the scratch root's path).
    conf = tmp_path / "redis.conf"
    conf.write_text("loadmodule %s\n" % installed)
    s = ConfigFileServer(str(conf), dir=str(tmp_path / "data"), module=None)
    s.start()
    try:
        r = s.client()
        listed = [m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
                  for m in r.execute_command("MODULE", "LIST")]
        mods = {m[b"name"]: int(m[b"ver"]) for m in listed}
        major, minor, patch = (int(x) for x in ver.split("."))
        assert mods.get(b"mcaptcha_cache") == major * 10000 + minor * 100 + patch, mods
        cfg = '{"levels":[{"visitor_threshold":10,"difficulty_factor":100}],"duration":30}'
        assert r.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "site", cfg) == b"OK"
        assert r.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "site") is not None
        assert r.execute_command("MCAPTCHA_CACHE.GET", "site") == 1
        assert r.execute_command("RL.GCRA", "rl", 10, 1000)[0] == 1
        assert r.execute_command("LOCK.ACQUIRE", "lk", "me", 1000)[0] == 1
    finally:
        s.stop()

    # Purged, it leaves nothing but dpkg's own database.
    run(*dpkg, "--purge", PKG)
    left = [os.path.join(d, f) for d, _, fs in os.walk(str(root)) for f in fs]
    assert all(p.startswith(str(admin)) for p in left), left


def test_deb_under_an_organisations_own_maintainer(tmp_path):
    """DEB_MAINTAINER (make deb DEB_MAINTAINER=...) packages it under another
    maintainer: the package's Maintainer and its newest changelog entry's
    signature both name it, the tree's own debian/ is untouched, and a value
    that is not 'Name <address>' is refused."""
    header = os.path.join(REPO_ROOT, "build", "include", "redismodule.h")
    if not os.path.isfile(header):
        run("make", "--no-print-directory", "-C", REPO_ROOT, "build/include/redismodule.h")
    control = open(os.path.join(REPO_ROOT, "debian", "control")).read()
    chlog = open(os.path.join(REPO_ROOT, "debian", "changelog")).read()
    who = "Platform Team <platform@corp.example>"
    out = str(tmp_path / "deb")
    env = dict(os.environ, DEB_MAINTAINER=who)
    p = subprocess.run(["sh", "scripts/build-deb.sh", out, header], cwd=REPO_ROOT, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    deb = [os.path.join(out, f) for f in os.listdir(out) if f.endswith(".deb") and "-dbgsym" not in f]
    assert len(deb) == 1, os.listdir(out)
    assert run("dpkg-deb", "-f", deb[0], "Maintainer").strip() == who
    run("dpkg-deb", "-x", deb[0], str(tmp_path / "x"))
    with gzip.open(str(tmp_path / "x" / DOC[1:] / "changelog.gz"), "rt") as f:
        signatures = [l for l in f.read().splitlines() if l.startswith(" -- ")]
    assert signatures[0].startswith(" -- %s  " % who), signatures
    assert all(who not in s for s in signatures[1:]), signatures   # older entries keep theirs
    assert open(os.path.join(REPO_ROOT, "debian", "control")).read() == control
    assert open(os.path.join(REPO_ROOT, "debian", "changelog")).read() == chlog
    bad = subprocess.run(["sh", "scripts/build-deb.sh", str(tmp_path / "bad"), header], cwd=REPO_ROOT,
                         env=dict(os.environ, DEB_MAINTAINER="just a name"), capture_output=True, text=True)
    assert bad.returncode != 0 and "DEB_MAINTAINER must read 'Name <address>'" in bad.stderr
