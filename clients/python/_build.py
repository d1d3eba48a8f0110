"""The PEP 517 build backend of the mcaptcha-cache Python client (pure Python, no dependency).

SPDX-License-Identifier: BSD-3-Clause

Why: setuptools older than 70.1 builds wheels only with the separate ``wheel`` package, so
``pip install ./clients/python`` failed with ``invalid command 'bdist_wheel'`` on a python3
without it (Debian 12's venvs, for one), and pip's isolated build needs a package index. This
backend needs nothing but the standard library: it zips ``mcaptcha_cache/`` with its
``.dist-info`` (wheel; ``LICENSE`` included), packs the sources (sdist), and writes an editable
wheel (a ``.pth`` pointing here) for ``pip install -e``. The metadata comes from ``pyproject.toml``'s
``[project]`` table (read with ``tomllib`` where there is one, else a small reader for the
flat ``key = value`` lines that table uses).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "mcaptcha_cache"


def _project():
    """The [project] table of pyproject.toml as a dict."""
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(raw.decode("utf-8"))["project"]
    except ImportError:
        pass
    out, section, key, buf = {}, None, None, ""
    for line in raw.decode("utf-8").splitlines():
        s = line.strip()
        if key is not None:  # inside a multi-line list
            buf += s
            if s.startswith("]"):
                out[key] = re.findall(r'"((?:[^"\\]|\\.)*)"', buf)
                key = None
            continue
        if s.startswith("["):
            section = s
            continue
        m = re.match(r'([A-Za-z0-9_-]+)\s*=\s*(.*)$', s)
        if section != "[project]" or not m:
            continue
        k, v = m.group(1), m.group(2)
        if v.startswith("[") and not v.rstrip().endswith("]"):
            key, buf = k, v
        elif v.startswith("["):
            out[k] = re.findall(r'"((?:[^"\\]|\\.)*)"', v)
        elif v.startswith("{"):
            out[k] = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', v))
        else:
            out[k] = v.strip('"')
    return out


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p.get("description", "")]
    lic = p.get("license")
    if isinstance(lic, dict):
        lic = lic.get("text")
    if lic:
        lines.append("License: " + lic)
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    lines += ["Requires-Dist: " + d for d in p.get("dependencies", [])]
    lines += ["Classifier: " + c for c in p.get("classifiers", [])]
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str) and os.path.isfile(os.path.join(HERE, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = "\n" + f.read()
    return p, "\n".join(lines) + "\n" + body


def _dist(p):
    return "%s-%s" % (re.sub(r"[-_.]+", "_", p["name"]), p["version"])


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _write_wheel(wheel_directory, files):
    """files: [(archive name, bytes)]; adds the dist-info and RECORD; returns the file name."""
    p, metadata = _metadata()
    dist = _dist(p)
    info = dist + ".dist-info"
    files = list(files) + [
        (info + "/METADATA", metadata.encode("utf-8")),
        (info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: mcaptcha-cache _build\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
        (info + "/top_level.txt", (PACKAGE + "\n").encode()),
    ] + _license_files(info + "/")
    record = "".join("%s,%s,%d\n" % (n, _record_hash(d), len(d)) for n, d in files)
    record += info + "/RECORD,,\n"
    name = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            z.writestr(n, d)
        z.writestr(info + "/RECORD", record)
    return name


def _license_files(prefix):
    """The LICENSE file (BSD-3-Clause, the repository root's text), under prefix."""
    path = os.path.join(HERE, "LICENSE")
    if not os.path.isfile(path):
        return []
    with open(path, "rb") as f:
        return [(prefix + "LICENSE", f.read())]


def _package_files():
    out = []
    root = os.path.join(HERE, PACKAGE)
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") or n == "py.typed":
                path = os.path.join(d, n)
                with open(path, "rb") as f:
                    out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), f.read()))
    return out


# ------------------------------------------------------------------ PEP 517 / 660 hooks
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [("__editable__.%s.pth" % PACKAGE, (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p, metadata = _metadata()
    base = _dist(p)
    name = base + ".tar.gz"
    files = _package_files() + [(n, open(os.path.join(HERE, n), "rb").read())
                                for n in ("pyproject.toml", "_build.py", "README.md", "LICENSE")
                                if os.path.isfile(os.path.join(HERE, n))]
    files.append(("PKG-INFO", metadata.encode("utf-8")))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for n, d in files:
            ti = tarfile.TarInfo(base + "/" + n)
            ti.size, ti.mode = len(d), 0o644
            t.addfile(ti, io.BytesIO(d))
    return name
