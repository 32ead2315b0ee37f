#!/usr/bin/env python3
"""check_exports.py — libkiln.so exports the public API and nothing else.

The library is built with -fvisibility=hidden and LLVM's archives linked with
--exclude-libs: the dynamic symbols it defines must be exactly the functions
the public headers declare with KILN_API (include/kiln/:
kiln_runtime.h, kiln_compile.h, kiln_attention.h, kiln_tune.h), and every function they declare carries KILN_API. A missing one means a public function lost its
KILN_API; an extra one means an internal name (a compiler or runtime
internal, an LLVM symbol) leaks to programs linking the library.

Usage: check_exports.py NM LIBKILN_SO HEADER...
Exit 0 when the sets agree; else 1, listing the differences.
"""
import re
import subprocess
import sys


def declared(headers):
    names = set()
    for h in headers:
        text = open(h, encoding="utf-8").read()
        for m in re.finditer(r"\bKILN_API\b[^;{]*?\b(kiln_\w+)\s*\(", text):
            names.add(m.group(1))
    return names


def unmarked(headers):
    """Function declarations of the headers that lack KILN_API (hidden by mistake)."""
    bad = []
    for h in headers:
        for lineno, line in enumerate(open(h, encoding="utf-8"), 1):
            if re.match(r"^(?!static\b|typedef\b|KILN_API\b|#)[A-Za-z_][\w\s\*]*\bkiln_\w+\s*\(", line):
                bad.append(f"{h}:{lineno}: public function without KILN_API: {line.strip()}")
    return bad


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", "-P", lib], check=True, capture_output=True,
                         text=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] not in "UwvN":
            names.add(parts[0].split("@")[0])
    # Symbols every shared object defines (the linker's, not ours).
    return names - {"_init", "_fini", "_edata", "_end", "__bss_start"}


def main():
    if len(sys.argv) < 4:
        print("usage: check_exports.py NM LIBKILN_SO HEADER...", file=sys.stderr)
        return 2
    want = declared(sys.argv[3:])
    have = exported(sys.argv[1], sys.argv[2])
    missing, extra = sorted(want - have), sorted(have - want)
    bare = unmarked(sys.argv[3:])
    for b in bare:
        print(b)
    for n in missing:
        print(f"declared KILN_API but not exported: {n}")
    for n in extra[:50]:
        print(f"exported but not public API: {n}")
    if len(extra) > 50:
        print(f"... and {len(extra) - 50} more")
    print(f"check_exports: {len(want)} public functions, {len(have)} exported, "
          f"{len(missing)} missing, {len(extra)} extra")
    return 1 if missing or extra or bare or not want else 0


if __name__ == "__main__":
    sys.exit(main())
