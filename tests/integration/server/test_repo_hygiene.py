# SPDX-License-Identifier: BSD-3-Clause
"""The repository holds sources, not server data, and says its license.

- `git ls-files` lists no data file a server writes (*.rdb, *.aof, anything under an
  appendonlydir/) outside tests/fixtures/ (the golden fixtures). A dump.rdb once got
  committed at the root: a plain redis-server started there refused to start on it.
- No such file lies in the working tree outside tests/fixtures/, build/ (outputs) and data/
  (`make run`'s directory), committed or not: every test and script runs its servers in
  temporary directories, so one found elsewhere was written by a server started with its
  working directory in the tree (as the committed dump.rdb was).
- Every source file we wrote says `SPDX-License-Identifier: BSD-3-Clause` near its top."""

import os
import subprocess

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPDX = "SPDX-License-Identifier: BSD-3-Clause"


def git(*args):
    p = subprocess.run(["git", "-C", REPO_ROOT] + list(args), capture_output=True, timeout=60)
    if p.returncode != 0:
        pytest.skip("not a git checkout: %s" % p.stderr.decode(errors="replace").strip())
    return [f for f in p.stdout.decode().split("\0") if f]


def is_data_file(path):
    return path.endswith((".rdb", ".aof")) or "appendonlydir" in path.split("/")[:-1]


def test_is_data_file():
    assert is_data_file("dump.rdb") and is_data_file("a/appendonly.aof")
    assert is_data_file("appendonlydir/appendonly.aof.1.base.rdb")
    assert is_data_file("x/appendonlydir/appendonly.aof.manifest")
    assert not is_data_file("src/rdb_load.h") and not is_data_file("appendonlydir")


def test_no_data_file_committed():
    bad = [f for f in git("ls-files", "-z") if is_data_file(f) and not f.startswith("tests/fixtures/")]
    assert bad == [], "data files in git outside tests/fixtures/: %s" % bad


def test_no_data_file_written_into_the_tree():
    others = git("ls-files", "-z", "--others")  # untracked, ignored ones included
    bad = sorted({f for f in others if is_data_file(f)
                  and not f.startswith(("tests/fixtures/", "build/", "data/"))})
    assert bad == [], ("server data files in the working tree (a server ran with its directory in "
                       "the tree; run it under a temporary directory, or data/): %s" % bad)


SOURCE_SUFFIXES = (".c", ".h", ".py", ".sh", ".js", ".mjs", ".ts", ".lua", ".rb")
NOT_OURS = ("tests/fixtures/", "tests/fuzz/corpus/", "tests/fuzz/crashes/", "src/compat/valkey/redismodule.h")


def test_every_source_file_carries_the_spdx_line():
    missing = []
    for f in git("ls-files", "-z"):
        base = f.rsplit("/", 1)[-1]
        if f.startswith(NOT_OURS) or "node_modules/" in f:
            continue
        if not (f.endswith(SOURCE_SUFFIXES) or base in ("Makefile", "Rakefile", "Gemfile", "rules") or f == ".ci/run"):
            continue
        path = os.path.join(REPO_ROOT, f)
        if not os.path.isfile(path):  # deleted, not yet committed
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = [fh.readline() for _ in range(5)]
        if not any(SPDX in line for line in head):
            missing.append(f)
    assert missing == [], "no %r in the first lines of: %s" % (SPDX, missing)


def test_license_file():
    with open(os.path.join(REPO_ROOT, "LICENSE"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("BSD 3-Clause License\n")
    assert "the mcaptcha-cache authors" in text
