#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""scripts/valkey-compat.py [--check] [VALKEYMODULE_H] -- write
src/compat/valkey/redismodule.h, the header that lets the unchanged sources
build against Valkey's own valkeymodule.h (make valkey-header-check).

Our sources include "redismodule.h"; with -Isrc/compat/valkey that is this
generated header, which includes "valkeymodule.h" and #defines every
RedisModule*/REDISMODULE_* name the sources mention to its Valkey name. The
names are those of
    grep -rhoE '\\b(RedisModule[A-Za-z0-9_]*|REDISMODULE_[A-Z0-9_]*)\\b' src tests/fuzz
(text files only, src/compat left out); each must exist in valkeymodule.h under
the Valkey prefix, or after Valkey's renames (SLAVE -> REPLICA, MASTER ->
PRIMARY); a name with no Valkey equivalent fails the run. Names only mentioned
in prose (comments, strings, docs) are reported and not mapped, nor are those
of KEEP below.

VALKEYMODULE_H defaults to Valkey 9.1's, from Debian forky's `valkey` source
package (sh scripts/fetch-server.sh --header valkey-9.1: cached, not built).
With --check nothing is written: exit 1 when the header differs from what
would be generated. With --smoke SERVER MODULE: start SERVER with MODULE (the
.so built against valkeymodule.h) and run a few commands of each family."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "compat", "valkey", "redismodule.h")
SCAN = ["src", os.path.join("tests", "fuzz")]
SKIP_DIRS = {os.path.join(ROOT, "src", "compat")}
NAME = re.compile(r"\b(RedisModule[A-Za-z0-9_]*|REDISMODULE_[A-Z0-9_]*)\b")
# Valkey's inclusive-naming renames, tried when the plain prefix swap is not found.
RENAMES = [("SLAVE", "REPLICA"), ("MASTER", "PRIMARY")]
# Names that stay as they are, and why.
KEEP = {
    "REDISMODULE_H": "this header's include guard, as in Redis's redismodule.h",
    "RedisModule_OnLoad": "our entry point, defined in module.c (Valkey's loader\n"
                          " *         looks up ValkeyModule_OnLoad, then RedisModule_OnLoad)",
}


def source_files():
    for top in SCAN:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if os.path.join(d, x) not in SKIP_DIRS)
            for f in sorted(files):
                path = os.path.join(d, f)
                with open(path, "rb") as fh:
                    data = fh.read()
                if b"\0" in data:
                    continue  # binary (fuzz corpora), as grep -I
                yield path, data.decode("utf-8", "replace")


def strip_prose(c):
    """C code without its comments and string/char literals."""
    pat = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pat.sub(" ", c)


def used_names():
    """All names (sorted), and those used as code in C files."""
    every, code = set(), set()
    for path, text in source_files():
        every.update(NAME.findall(text))
        if path.endswith((".c", ".h")):
            code.update(NAME.findall(strip_prose(text)))
    return sorted(every), code


def valkey_name(name, valkey_ids):
    base = name.replace("RedisModule", "ValkeyModule", 1).replace("REDISMODULE_", "VALKEYMODULE_", 1)
    if base in valkey_ids:
        return base
    renamed = base
    for old, new in RENAMES:
        renamed = re.sub(r"(?<![A-Za-z])%s(?![a-z])" % old, new, renamed)
    return renamed if renamed in valkey_ids else None


def kind(vname, hdr):
    if vname == "ValkeyModule_Init":
        return "entry"
    if vname.startswith("ValkeyModuleEvent_"):
        return "event"
    if vname.startswith("ValkeyModule_") and re.search(r"\*\s*%s\s*\)" % re.escape(vname), hdr):
        return "api"
    if vname.startswith("VALKEYMODULE_"):
        return "macro"  # #defines and enum values
    return "type"


SECTIONS = [
    ("type", "Types"),
    ("api", "API function pointers (filled by ValkeyModule_Init)"),
    ("macro", "Constants and macros"),
    ("event", "Server events"),
    ("entry", "Entry point: RedisModule_Init is ValkeyModule_Init"),
]


def generate(hdr_path, report=True):
    with open(hdr_path, encoding="utf-8") as fh:
        hdr = fh.read()
    # Identifiers only: not "ValkeyModule_" of VALKEYMODULE_GET_API's string or ## paste.
    valkey_ids = set(re.findall(r"\b(?:ValkeyModule|VALKEYMODULE_)[A-Za-z0-9_]*\b(?!\s*##)", strip_prose(hdr)))
    names, code = used_names()
    mapped, prose_only, missing = {}, [], []
    for n in names:
        if n in KEEP:
            continue
        if n not in code:
            prose_only.append(n)
            continue
        v = valkey_name(n, valkey_ids)
        if v:
            mapped[n] = v
        else:
            missing.append(n)
    if missing:
        sys.exit("valkey-compat: no Valkey equivalent in %s for: %s" % (hdr_path, " ".join(missing)))
    for have, what in ((True, "in Valkey too"), (False, "no Valkey equivalent")) if report else ():
        group = [n for n in prose_only if (valkey_name(n, valkey_ids) is not None) == have]
        if group:
            print("valkey-compat: only in comments/strings/docs, not mapped (%s): %s" % (what, " ".join(group)),
                  file=sys.stderr)
    renamed = ["%s -> %s" % (n, v) for n, v in mapped.items()
               if v != n.replace("RedisModule", "ValkeyModule", 1).replace("REDISMODULE_", "VALKEYMODULE_", 1)]
    width = max(len(n) for n in mapped) + 1
    out = [
        "/* src/compat/valkey/redismodule.h -- GENERATED by scripts/valkey-compat.py; do not edit.",
        " *",
        " * Lets the unchanged sources build against Valkey's own valkeymodule.h",
        " * (`make valkey-header-check`): with -Isrc/compat/valkey -I<dir of valkeymodule.h>,",
        " * their #include \"redismodule.h\" finds this file, which includes valkeymodule.h",
        " * and maps every RedisModule* and REDISMODULE_* name the code of src and tests/fuzz",
        " * uses to its Valkey name. The normal build never sees it (it uses Redis's",
        " * redismodule.h). Regenerate after using a new module API name:",
        " *     python3 scripts/valkey-compat.py",
        " * which takes valkeymodule.h from Debian forky's `valkey` source package",
        " * (scripts/fetch-server.sh --header valkey-9.1) and fails on a name Valkey lacks.",
        " * Names only in comments or strings are not mapped: RedisModule_GetApi(\"RedisModule_X\")",
        " * finds X on Valkey too, which registers its API under both prefixes.",
        " *",
        " * Renamed by Valkey (not just the prefix):",
    ] + [" *     %s" % r for r in renamed or ["none"]] + [
        " * Kept as they are:",
    ] + [" *     %s: %s" % kv for kv in sorted(KEEP.items())] + [
        " */",
        "#ifndef REDISMODULE_H",
        "#define REDISMODULE_H",
        "",
        "#include \"valkeymodule.h\"",
    ]
    for key, title in SECTIONS:
        group = [(n, v) for n, v in mapped.items() if kind(v, hdr) == key]
        if not group:
            continue
        out += ["", "/* %s */" % title]
        out += ["#define %s %s" % (n.ljust(width - 1), v) for n, v in group]
    out += ["", "#endif /* REDISMODULE_H */", ""]
    return "\n".join(out)


def smoke(server, module):
    import tempfile
    os.environ["REDIS_SERVER"] = server  # read by the harness at import
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    from servers import RedisServer
    with tempfile.TemporaryDirectory() as d:
        s = RedisServer(dir=d, module=os.path.abspath(module))
        s.start()
        try:
            r = s.client(decode_responses=True)
            steps = [
                (("MODULE", "LIST"), lambda x: "mcaptcha_cache" in str(x)),
                (("MCAPTCHA_CACHE.ADD_CAPTCHA", "smoke",
                  '{"levels":[{"visitor_threshold":5,"difficulty_factor":500}],"duration":30}'), lambda x: x),
                (("MCAPTCHA_CACHE.ADD_VISITOR", "smoke"), lambda x: '"difficulty_factor":500' in x),
                (("CL.THROTTLE", "smoke:rl", "1", "10", "60"), lambda x: x[:3] == [0, 2, 1]),
                (("LOCK.ACQUIRE", "smoke:lock", "me", "10000"), lambda x: x[0] == 1),
                (("SAVE",), lambda x: x),
            ]
            for cmd, ok in steps:
                got = r.execute_command(*cmd)
                if not ok(got):
                    sys.exit("valkey-compat: smoke: %s replied %r" % (" ".join(cmd[:2]), got))
            version = r.info("server").get("valkey_version") or r.info("server").get("redis_version")
        finally:
            s.stop()
    print("valkey-compat: smoke test passed on %s (%s)" % (server, version), file=sys.stderr)


def main():
    args = sys.argv[1:]
    if args[:1] == ["--smoke"] and len(args) == 3:
        return smoke(args[1], args[2])
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    if args:
        hdr_path = args[0]
    else:
        hdr_path = subprocess.run(["sh", os.path.join(ROOT, "scripts", "fetch-server.sh"), "--header", "valkey-9.1"],
                                  check=True, stdout=subprocess.PIPE, text=True).stdout.strip()
    text = generate(hdr_path, report=not check)
    old = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else None
    if check:
        if old != text:
            sys.exit("valkey-compat: %s is out of date: run python3 scripts/valkey-compat.py"
                     % os.path.relpath(OUT, ROOT))
        return
    if old != text:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w", encoding="utf-8") as fh:
            fh.write(text)
        print("valkey-compat: wrote %s" % os.path.relpath(OUT, ROOT), file=sys.stderr)


if __name__ == "__main__":
    main()
