#!/usr/bin/env python3
"""check_layers.py — the layers of Kiln form a DAG, and this keeps it true.

    support <- ir <- {lang, passes, interp, gpuir <- codegen} <- driver <- jit <- apps
    runtime (core: no compiler code) <- jit

gpuir holds the GPU passes, layouts and plans (IR in, IR out); codegen the
LLVM lowering and emission. Only codegen may use LLVM: no other layer
includes an llvm-c header, and no other layer's archive leaves an LLVM
symbol undefined.

Two checks, both must pass:
1. Includes: every #include "..." of a library, application, example or tool
   source resolves (same directory first, then the build's include path) to a
   file of its own layer, of a layer below, or to a public header
   (include/kiln/: kiln.h, kiln_runtime.h, kiln_compile.h, kiln_attention.h, kiln_tune.h). Examples and tools may
   include public headers and their own folders only.
2. Symbols (given the layer archives): every symbol a layer's objects leave
   undefined and that some Kiln layer defines is defined by the layer itself
   or a layer below it (no upward call), no Kiln layer defines or references
   a weak symbol, and no two layers define the same symbol.

Usage: check_layers.py SOURCE_DIR [NM LAYER=ARCHIVE ...]
Exit 0 when the DAG holds; else 1, one line per violation.
"""
import os
import re
import subprocess
import sys

# layer -> the layers it may use (itself included); "public" is the API headers.
BELOW = {
    "support": {"support"},
    "ir": {"support", "ir"},
    "lang": {"support", "ir", "lang"},
    "passes": {"support", "ir", "passes"},
    "interp": {"support", "ir", "interp"},
    "gpuir": {"support", "ir", "gpuir"},
    "codegen": {"support", "ir", "gpuir", "codegen"},
    "driver": {"support", "ir", "lang", "passes", "interp", "gpuir", "codegen", "driver"},
    # The runtime core uses no compiler code at all (the f16 helpers its
    # header declares are support's; the core itself never calls them).
    "runtime": {"runtime"},
    "jit": {"support", "ir", "lang", "passes", "interp", "gpuir", "codegen", "driver", "runtime", "jit"},
    "apps": {"support", "ir", "lang", "passes", "interp", "gpuir", "codegen", "driver", "runtime", "jit", "apps"},
    # Examples and tools are what users write: public headers only.
    "examples": {"examples", "tools"},
    "tools": {"examples", "tools"},
}
PUBLIC = {"include/kiln/kiln.h", "include/kiln/kiln_compile.h", "include/kiln/kiln_runtime.h",
          "include/kiln/kiln_attention.h", "include/kiln/kiln_tune.h"}
# The build's include path, relative to the source dir (CMakeLists.txt).
INCLUDE_PATH = ["", "include/kiln", "runtime", "jit", "compiler", "compiler/driver"]
GENERATED = {"parser.tab.h", "lexer.yy.h"}  # flex/bison output, part of lang


def layer_of(rel):
    """The layer a source-relative path belongs to (None: not checked)."""
    if rel in PUBLIC:
        return "public"
    for prefix, layer in (("compiler/support/", "support"), ("compiler/ir/", "ir"),
                          ("compiler/passes/", "passes"), ("compiler/interp/", "interp"),
                          ("compiler/gpuir/", "gpuir"), ("compiler/codegen/", "codegen"), ("compiler/driver/", "driver"),
                          ("compiler/lang/", "lang"), ("jit/", "jit"), ("runtime/", "runtime"),
                          ("apps/", "apps"), ("examples/", "examples"), ("tools/", "tools")):
        if rel.startswith(prefix):
            return layer
    return None


def check_includes(src):
    bad = []
    for top in ("compiler", "runtime", "jit", "apps", "examples", "tools"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for name in sorted(files):
                if not name.endswith((".c", ".h", ".y", ".l")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, src)
                layer = layer_of(rel)
                if layer is None or layer == "public":
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        if layer != "codegen" and re.match(r'\s*#\s*include\s+<llvm-c/', line):
                            bad.append(f"{rel}:{lineno}: layer {layer} includes an LLVM header (only codegen may)")
                            continue
                        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                        if not m or m.group(1) in GENERATED:
                            continue
                        target = resolve(src, os.path.dirname(rel), m.group(1))
                        if target is None:
                            bad.append(f"{rel}:{lineno}: #include \"{m.group(1)}\" resolves to no file")
                            continue
                        tl = layer_of(target)
                        if tl == "public" or tl in BELOW[layer]:
                            continue
                        bad.append(f"{rel}:{lineno}: layer {layer} includes {target} (layer {tl})")
    return bad


def resolve(src, here, inc):
    for d in [here] + INCLUDE_PATH:
        cand = os.path.normpath(os.path.join(d, inc))
        if os.path.isfile(os.path.join(src, cand)):
            return cand
    return None


def symbols(nm, archive):
    """(defined, undefined, weak) global symbol sets of an archive."""
    out = subprocess.run([nm, "-g", "-P", archive], check=True, capture_output=True, text=True).stdout
    defined, undefined, weak = set(), set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or line.endswith(":"):
            continue
        sym, kind = parts[0], parts[1]
        if kind in "wWvV":
            weak.add(sym)
        elif kind == "U":
            undefined.add(sym)
        else:
            defined.add(sym)
    return defined, undefined, weak


def check_symbols(nm, archives):
    bad = []
    tables = {layer: symbols(nm, path) for layer, path in archives.items()}
    owner = {}
    for layer, (defined, _, weak) in tables.items():
        for sym in sorted(weak):
            bad.append(f"layer {layer}: weak symbol {sym}")
        for sym in defined:
            if sym in owner:
                bad.append(f"{sym} is defined by both layer {owner[sym]} and layer {layer}")
            owner[sym] = layer
    for layer, (_, undefined, _) in tables.items():
        llvm = sorted(sym for sym in undefined if sym.startswith("LLVM"))
        if llvm and layer != "codegen":
            bad.append(f"layer {layer} uses LLVM ({llvm[0]}, ...): only codegen lowers to LLVM")
        for sym in sorted(undefined):
            o = owner.get(sym)
            if o is not None and o not in BELOW[layer]:
                bad.append(f"layer {layer} uses {sym} of layer {o} (not below it)")
    return bad


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    src = sys.argv[1]
    bad = check_includes(src)
    if len(sys.argv) > 2:
        nm = sys.argv[2]
        archives = dict(a.split("=", 1) for a in sys.argv[3:])
        bad += check_symbols(nm, archives)
    for b in bad:
        print(b)
    print(f"check_layers: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
