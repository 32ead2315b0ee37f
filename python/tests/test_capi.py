"""kiln's ctypes layer: importable without torch; the header parser reads nested structs,
anonymous unions, enums and #define'd array sizes with the C compiler's offsets (a synthetic
header shaped like the schedule options moving into a nested `KilnSchedule schedule;`); fields
set by dotted name; statuses raised as the documented Python exceptions."""
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import kiln
from kiln import _capi

PKG = os.path.join(os.path.dirname(__file__), "..")


def test_import_without_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None            # any `import torch` now fails
        import kiln
        print(kiln.version())
        sig = kiln.load(kiln.data_path("examples/vec_add.tile")).vec_add.signature(BLOCK=256)
        print([p[0] for p in sig])
        try:
            kiln.attention
        except ImportError:
            print("attention needs torch")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                         cwd=PKG, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].count(".") == 2
    assert lines[1] == "['X', 'Y', 'Z', 'n']"
    assert lines[2] == "attention needs torch"


HEADER = """
#include <stdint.h>
#define N_KNOBS 3
typedef enum Mode { MODE_A, MODE_B = 5, MODE_C } Mode;
typedef uint64_t Addr;
typedef struct Schedule { int pingpong, mbarrier; int knobs[N_KNOBS]; } Schedule;
typedef struct Params {
    char tag;
    Schedule schedule;        /* nested */
    Mode mode;
    Addr ptr;
    const char *name;
    const char *const *dirs;
    union { int64_t i; double f; } v;
    unsigned long long mask;
    int64_t stride[3];
} Params;
"""


def test_header_parser_matches_the_c_compiler(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    h = tmp_path / "t.h"
    h.write_text(HEADER)
    parsed = _capi.Header([str(h)])
    assert parsed.consts["MODE_B"] == 5 and parsed.consts["MODE_C"] == 6 and parsed.consts["N_KNOBS"] == 3
    P = parsed.types["Params"]
    checks = ["tag", "schedule", "schedule.mbarrier", "schedule.knobs", "mode", "ptr", "name", "dirs", "v", "v.f",
              "mask", "stride"]
    c = ['#include <stdio.h>', '#include <stddef.h>', '#include "t.h"', "int main(void) {",
         '    printf("%zu\\n", sizeof(Params));']
    c += [f'    printf("%zu\\n", offsetof(Params, {f}));' for f in checks]
    c += ["    return 0;", "}"]
    (tmp_path / "t.c").write_text("\n".join(c) + "\n")
    subprocess.run([cc, "-std=c17", "-I", str(tmp_path), str(tmp_path / "t.c"), "-o", str(tmp_path / "t")], check=True)
    got = [int(x) for x in subprocess.run([str(tmp_path / "t")], capture_output=True, text=True).stdout.split()]

    def offset(path):
        t, off = P, 0
        for part in path.split("."):
            off += getattr(t, part).offset
            t = dict(t._fields_)[part]
        return off
    assert got == [ctypes.sizeof(P)] + [offset(f) for f in checks]
    p = _capi.set_fields(P(), {"schedule.pingpong": 1, "schedule.knobs": [4, 5, 6], "mode": 5})
    assert p.schedule.pingpong == 1 and list(p.schedule.knobs) == [4, 5, 6] and p.mode == 5
    with pytest.raises(AttributeError, match="no field 'schedule.nope'"):
        _capi.set_fields(P(), {"schedule.nope": 1})


def test_statuses_become_python_exceptions():
    lib = _capi.lib()
    p = lib.new("KilnAttentionParams", batch=1, heads_q=1, heads_kv=1, seqlen_q=8, seqlen_k=8, head_dim=48)
    with pytest.raises(NotImplementedError, match="head_dim"):
        lib.call("kiln_attention_check", ctypes.byref(p))
    p.head_dim, p.heads_kv = 64, 0
    with pytest.raises(ValueError, match="heads_kv"):
        lib.call("kiln_attention_check", ctypes.byref(p))
    with pytest.raises(kiln.CompileError, match=r"<string>:2:\d+: error"):
        kiln.load("kernel k(X: *f32) {\n    store(X, 1 +);\n}\n").k.signature()
