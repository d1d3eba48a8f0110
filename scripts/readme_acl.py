#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/readme_acl.py -- rewrite the example ACL lines of docs/operations.md (the
`reader` and `writer` users of its "ACLs" section) from the module's command table, as a
running server reports it: reader gets every read-only public command, writer
every public command; the internal commands of replication and the AOF are left
out. Run by `make readme-acl` after adding a command;
tests/integration/server/test_readme_acl.py fails until the doc is updated."""
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests", "integration"), os.path.join(ROOT, "tests", "integration", "server")]
from servers import RedisServer  # noqa: E402
import test_readme_acl as acl  # noqa: E402

with tempfile.TemporaryDirectory() as d:
    s = RedisServer(dir=d, module=os.path.join(ROOT, "build", "mcaptcha_cache.so"))
    s.start()
    try:
        want = acl._expected(acl._module_commands(s.client()))
    finally:
        s.stop()
path = acl.DOC
text = open(path, encoding="utf-8").read()
for user, line in want.items():
    text = re.sub(r"^((?:127\.0\.0\.1:6379> )?)ACL SETUSER %s .*$" % user, lambda m: m.group(1) + line, text, flags=re.M)
open(path, "w", encoding="utf-8").write(text)
print("\n".join(want.values()))
