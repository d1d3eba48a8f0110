# SPDX-License-Identifier: BSD-3-Clause
"""The documented install path, end to end: `make install` into a scratch root
(DESTDIR), then a redis-server started from a config file whose only module
line is the README's `loadmodule /usr/lib/redis/modules/mcaptcha_cache.so`
(under that root), answering a command of every family.

Redis refuses to load a module file without execute permission ("It does not
have execute permissions"), so the installed file must be 0755."""

import os
import stat
import subprocess

from servers import ConfigFileServer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODULEDIR = "/usr/lib/redis/modules"



def test_make_install_then_loadmodule_from_config(tmp_path):
    root = tmp_path / "root"
    out = subprocess.run(["make", "--no-print-directory", "-C", REPO_ROOT, "install", "DESTDIR=%s" % root],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    installed = str(root) + MODULEDIR + "/mcaptcha_cache.so"
    mode = stat.S_IMODE(os.stat(installed).st_mode)
    assert mode == 0o755, oct(mode)
    assert "loadmodule %s/mcaptcha_cache.so" % MODULEDIR in out.stdout  # the hint it prints

    conf = tmp_path / "redis.conf"
    conf.write_text("loadmodule %s\n" % installed)
    s = ConfigFileServer(str(conf), dir=str(tmp_path / "data"), module=None)
    s.start()
    try:
        r = s.client()
        assert any(b"mcaptcha_cache" in m for m in r.execute_command("MODULE", "LIST"))
        cfg = '{"levels":[{"visitor_threshold":10,"difficulty_factor":100}],"duration":30}'
        assert r.execute_command("MCAPTCHA_CACHE.ADD_CAPTCHA", "site", cfg) == b"OK"
        assert r.execute_command("MCAPTCHA_CACHE.GET", "site") == 0
        assert r.execute_command("RL.GCRA", "rl", 10, 1000)[0] == 1
        assert r.execute_command("LOCK.ACQUIRE", "lk", "me", 1000)[0] == 1
    finally:
        s.stop()
