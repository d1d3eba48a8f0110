# SPDX-License-Identifier: BSD-3-Clause
"""Installing the Python client (clients/python) with pip, offline, where the `wheel` package
is missing: a fresh venv (Debian's venvs carry pip and setuptools, not wheel) installs it
with pip's default build isolation and with --no-build-isolation, editable too, through the
in-tree build backend (_build.py); the wheel carries py.typed, the compat modules and the
BSD-3-Clause license metadata. Skips when the venv module is not available."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "clients", "python")


def run(args, **kw):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240, **kw)
    assert p.returncode == 0, p.stdout.decode(errors="replace")
    return p.stdout.decode(errors="replace")


@pytest.mark.parametrize("flags", [[], ["--no-build-isolation"], ["-e"]])
def test_pip_install_without_wheel(tmp_path, flags):
    venv = tmp_path / "venv"
    p = subprocess.run([sys.executable, "-m", "venv", str(venv)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=240)
    if p.returncode != 0:
        pytest.skip("no venv/ensurepip here: " + p.stdout.decode(errors="replace")[-200:])
    py = str(venv / "bin" / "python")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    assert "no wheel" in run([py, "-c", "import importlib.util as u; "
                              "print('no wheel' if u.find_spec('wheel') is None else 'wheel')"],
                             env=env)
    run([py, "-m", "pip", "install", "-q", "--no-deps"] + flags + [CLIENT_DIR], env=env)
    # redis is not in this venv: read the files and the metadata without importing the package
    code = ("import importlib.metadata as m, importlib.util as u\n"
            "d = m.distribution('mcaptcha-cache')\n"
            "print(d.metadata['License'], d.metadata['Requires-Python'])\n"
            "s = u.find_spec('mcaptcha_cache')\n"
            "import os; base = os.path.dirname(s.origin)\n"
            "print(all(os.path.exists(os.path.join(base, f)) for f in "
            "('py.typed', 'compat/redis_py.py', 'compat/limits.py')))\n"
            "print(base)\n")
    out = run([py, "-c", code], env=env, cwd=str(tmp_path)).split("\n")
    assert out[0] == "BSD-3-Clause >=3.9" and out[1] == "True"
    if flags == ["-e"]:
        assert out[2] == os.path.join(CLIENT_DIR, "mcaptcha_cache")
    else:
        assert out[2].startswith(str(venv))
    # nothing written into the source tree
    assert not [n for n in os.listdir(CLIENT_DIR) if n.endswith(".egg-info") or n == "build"]
