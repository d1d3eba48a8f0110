# SPDX-License-Identifier: BSD-3-Clause
"""docs/commands.md is the command reference generated from the module's own
metadata (COMMAND DOCS / COMMAND INFO) and scripts/command_notes.py: every
registered command appears in it, and it is exactly what the generator makes
now (it fails when the metadata or the notes drift from the file; fix with
`make commands-md`)."""

import os
import re
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_every_registered_command_is_documented(r):
    conn = r.connection_pool.get_connection("_")
    try:
        conn.send_command("COMMAND", "LIST", "FILTERBY", "MODULE", "mcaptcha_cache")
        names = {n.decode().upper() for n in conn.read_response()}
    finally:
        r.connection_pool.release(conn)
    text = open(os.path.join(REPO_ROOT, "docs", "commands.md"), encoding="utf-8").read()
    documented = set(re.findall(r"^### (\S+)$", text, re.M))
    assert names == documented, (names - documented, documented - names)


def test_commands_md_is_up_to_date():
    p = subprocess.run(["/usr/bin/python3", os.path.join(REPO_ROOT, "scripts", "commands_md.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
