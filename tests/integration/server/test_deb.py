# SPDX-License-Identifier: BSD-3-Clause
"""The Debian package, end to end: `make deb` builds
redis-mcaptcha-cache_<version>_<arch>.deb with dpkg-deb; its control fields and
file list are what Debian expects (module 0755 under /usr/lib/redis/modules,
everything root-owned, no maintainer scripts, nothing under /etc); extracted
with `dpkg-deb -x` into a scratch root (never installed on this machine), the
md5sums match and a redis-server started from a config file holding the
packaged snippet's `loadmodule` line, uncommented, answers a command of every
family."""

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
    out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=600, **kw)
    assert out.returncode == 0, "%s: %s%s" % (" ".join(cmd), out.stdout, out.stderr)
    return out.stdout


def module_version():
    with open(os.path.join(REPO_ROOT, "src", "module.c")) as f:
        m = re.search(r'^#define MODULE_VERSION_STRING "([^"]+)"', f.read(), re.M)
    assert m, "MODULE_VERSION_STRING not found in src/module.c"
    return m.group(1)


def test_make_deb_contents_then_serve_from_extracted_root(tmp_path):
    version = module_version()
    arch = run("dpkg", "--print-architecture").strip()
    deb = run("make", "--no-print-directory", "-C", REPO_ROOT, "deb").strip().splitlines()[-1]
    deb = os.path.join(REPO_ROOT, deb)
    assert os.path.basename(deb) == "%s_%s_%s.deb" % (PKG, version, arch)

    # Control fields.
    fields = {f: run("dpkg-deb", "-f", deb, f).strip()
              for f in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Description")}
    assert fields["Package"] == PKG
    assert fields["Version"] == version
    assert fields["Architecture"] == arch
    assert [d.strip() for d in fields["Depends"].split(",")] == ["redis-server (>= 5:7.0)", "libjansson4"]
    assert re.fullmatch(r".+ <[^<>@\s]+@[^<>\s]+>", fields["Maintainer"]), fields["Maintainer"]
    assert fields["Description"].splitlines()[0].strip()

    # The control archive: control and md5sums only, no maintainer scripts.
    ctrl = run("sh", "-c", 'dpkg-deb --ctrl-tarfile "$1" | tar -t', "-", deb).split()
    assert sorted(c for c in ctrl if c != "./") == ["./control", "./md5sums"], ctrl

    # The file list: modes, owners, paths.
    entries = {}
    for line in run("dpkg-deb", "-c", deb).splitlines():
        mode, owner, _size, _date, _time, path = line.split(None, 5)
        entries[path[1:].rstrip("/") or "/"] = (mode, owner)
    assert all(owner == "root/root" for _, owner in entries.values()), entries
    files = {p: m for p, (m, _) in entries.items() if m.startswith("-")}
    docs = sorted(DOC + "/docs/" + n for n in os.listdir(os.path.join(REPO_ROOT, "docs")) if n.endswith(".md"))
    assert docs
    expected = {SO: "-rwxr-xr-x", SNIPPET: "-rw-r--r--", DOC + "/README.md": "-rw-r--r--",
                DOC + "/copyright": "-rw-r--r--"}
    expected.update({d: "-rw-r--r--" for d in docs})
    assert files == expected
    assert all(m == "drwxr-xr-x" for m in (m for p, (m, _) in entries.items() if p not in files))
    assert not any(p.startswith("/etc") for p in entries)

    # Extract into a scratch root: the md5sums hold, the module is the built one, 0755.
    root = tmp_path / "root"
    run("dpkg-deb", "-x", deb, str(root))
    control = tmp_path / "control"
    run("dpkg-deb", "-e", deb, str(control))
    md5 = (control / "md5sums").read_text().split("\n")
    assert sorted(l.split(None, 1)[1] for l in md5 if l) == sorted(p[1:] for p in files)
    run("md5sum", "--quiet", "-c", str(control / "md5sums"), cwd=str(root))
    installed = str(root) + SO
    assert stat.S_IMODE(os.stat(installed).st_mode) == 0o755
    with open(installed, "rb") as a, open(os.path.join(REPO_ROOT, "build", "mcaptcha_cache.so"), "rb") as b:
        assert a.read() == b.read()

    # The snippet: only comments, one of them the loadmodule line to uncomment.
    snippet = (root / SNIPPET[1:]).read_text().splitlines()
    assert all(l.startswith("#") or not l.strip() for l in snippet), snippet
    assert "# loadmodule %s" % SO in snippet

    # What a user does: uncomment the line into redis.conf (here, pointing under the scratch root).
    conf = tmp_path / "redis.conf"
    conf.write_text("loadmodule %s\n" % installed)
    s = ConfigFileServer(str(conf), dir=str(tmp_path / "data"), module=None)
    s.start()
    try:
        r = s.client()
        listed = [m if isinstance(m, dict) else dict(zip(m[::2], m[1::2]))
                  for m in r.execute_command("MODULE", "LIST")]
        mods = {m[b"name"]: int(m[b"ver"]) for m in listed}
        major, minor, patch = (int(x) for x in version.split("."))
        assert mods.get(b"mcaptcha_cache") == major * 10000 + minor * 100 + patch, mods
        cfg = '{"levels":[{"visitor_threshold":10,"difficulty_factor":100}],"duration":30}'
        assert r.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "site", cfg) == b"OK"
        assert r.execute_command("MCAPTCHA_CACHE.ADD_VISITOR", "site") is not None
        assert r.execute_command("MCAPTCHA_CACHE.GET", "site") == 1
        assert r.execute_command("RL.GCRA", "rl", 10, 1000)[0] == 1
        assert r.execute_command("LOCK.ACQUIRE", "lk", "me", 1000)[0] == 1
    finally:
        s.stop()
