# SPDX-License-Identifier: BSD-3-Clause
"""One version, everywhere: VERSION holds it (x.y.z), and the module's MODULE LIST version
(MMmmpp: 0.2.0 is 200, from src/module.c's defines), the Python client
(clients/python/pyproject.toml and mcaptcha_cache.__version__, the Ruby gem, the npm package), the Debian package
(debian/changelog's top entry) and CHANGELOG.md's newest version heading all agree with it.
A release changes VERSION and each of these together."""

import os
import json
import re
import tomllib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def read(*parts):
    with open(os.path.join(REPO_ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def version():
    v = read("VERSION").strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", v), "VERSION must hold x.y.z, not %r" % v
    return v


def as_int(v):
    major, minor, patch = (int(x) for x in v.split("."))
    assert minor < 100 and patch < 100, v
    return major * 10000 + minor * 100 + patch


def test_module_defines_agree():
    src = read("src", "module.c")
    s = re.search(r'^#define MODULE_VERSION_STRING "([^"]+)"', src, re.M)
    n = re.search(r"^#define MODULE_VERSION (\d+)\b", src, re.M)
    assert s and n, "MODULE_VERSION_STRING / MODULE_VERSION not found in src/module.c"
    assert (s.group(1), int(n.group(1))) == (version(), as_int(version()))


def test_module_list_shows_it(r):
    listed = [m if isinstance(m, dict) else dict(zip(m[::2], m[1::2])) for m in r.execute_command("MODULE", "LIST")]
    mods = {m[b"name"]: int(m[b"ver"]) for m in listed}
    assert mods[b"mcaptcha_cache"] == as_int(version()), mods


def test_python_client_agrees():
    meta = tomllib.loads(read("clients", "python", "pyproject.toml"))["project"]
    assert meta["version"] == version()
    m = re.search(r'^__version__ = "([^"]+)"', read("clients", "python", "mcaptcha_cache", "__init__.py"), re.M)
    assert m and m.group(1) == version()


def test_ruby_and_node_clients_agree():
    m = re.search(r'^\s*VERSION = "([^"]+)"', read("clients", "ruby", "lib", "mcaptcha_cache", "version.rb"), re.M)
    assert m and m.group(1) == version()
    pkg = json.loads(read("clients", "node", "package.json"))
    lock = json.loads(read("clients", "node", "package-lock.json"))
    assert pkg["version"] == lock["version"] == lock["packages"][""]["version"] == version()


def test_debian_changelog_top_entry_agrees():
    first = read("debian", "changelog").splitlines()[0]
    m = re.match(r"redis-mcaptcha-cache \(([^)]+)\) \S+; urgency=\w+$", first)
    assert m, first
    # a native package: the Debian version is the upstream one, no revision
    assert m.group(1) == version(), first


def test_changelog_newest_version_heading_agrees():
    text = read("CHANGELOG.md")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert headings and headings[0][0] == "Unreleased", "CHANGELOG.md opens with an [Unreleased] section"
    released = [(v, d) for v, d in headings if v != "Unreleased"]
    assert released and released[0][0] == version(), released[:1]
    assert all(d for _, d in released), "every released heading carries its date"
    dates = [d for _, d in released]
    assert dates == sorted(dates, reverse=True), dates
