#!/usr/bin/env python3
"""test_kiln_ctypes.py — tools/bench/kiln_ctypes.py, the Python mirror of Kiln's attention
API that the backward benchmark calls libkiln.so through, is the C API.

1. Layout: every field of the structs it reads from runtime/kiln_compile.h has the offset,
   and every struct the size, that the C compiler gives (a generated C program prints
   offsetof/sizeof; compiled with the compiler the build uses). A field the header gains
   that the parser cannot read fails here, naming it.
2. Calls, no GPU needed: kiln_attention_bwd_scratch_size of a filled struct equals the
   documented size (delta rows rounded up to 256 bytes, plus the f32 dQ accumulator unless
   deterministic), so batch, heads_q, seqlen_q, head_dim and deterministic are read where
   Python wrote them; kiln_attention_bwd_check accepts a complete call and names the field
   that is wrong in a broken one (fields after the embedded forward struct, too);
   kiln_attention_check names a bad head_dim.

Usage: test_kiln_ctypes.py SOURCE_DIR LIBKILN_SO CC
"""
import ctypes
import os
import subprocess
import sys
import tempfile

src_dir, lib_path, cc = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(src_dir, "tools", "bench"))
sys.dont_write_bytecode = True
import kiln_ctypes  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def fields_of(ct, prefix=""):
    """(C path, Python offset, size) of every field, nested structs and arrays flattened
    to their first element's path for arrays of scalars."""
    out = []
    for name, ftype in ct._fields_:
        off = getattr(ct, name).offset
        out.append((prefix + name, off, ctypes.sizeof(ftype)))
        if isinstance(ftype, type) and issubclass(ftype, ctypes.Structure):
            out += [(p, off + o, s) for p, o, s in fields_of(ftype, prefix + name + ".")]
    return out


# ---- 1. layout against the C compiler
types = kiln_ctypes.parse_structs(os.path.join(src_dir, "runtime", "kiln_compile.h"))
lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "kiln.h"', "int main(void) {"]
expected = []
for sname, ct in types.items():
    lines.append(f'    printf("{sname} sizeof %zu\\n", sizeof({sname}));')
    expected.append(f"{sname} sizeof {ctypes.sizeof(ct)}")
    for path, off, size in fields_of(ct):
        lines.append(f'    printf("{sname}.{path} %zu %zu\\n", offsetof({sname}, {path}), '
                     f'sizeof((({sname} *)0)->{path}));')
        expected.append(f"{sname}.{path} {off} {size}")
lines.append('    printf("KILN_F16 %d KILN_BF16 %d\\n", (int)KILN_F16, (int)KILN_BF16);')
expected.append(f"KILN_F16 {kiln_ctypes.KILN_F16} KILN_BF16 {kiln_ctypes.KILN_BF16}")
lines += ["    return 0;", "}"]
with tempfile.TemporaryDirectory() as tmp:
    c_file, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
    with open(c_file, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c17", "-I", os.path.join(src_dir, "runtime"), c_file, "-o", exe], check=True)
    got = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()
expect(len(expected) > 60, f"only {len(expected)} layout facts: the parser missed fields")
for e, g in zip(expected, got):
    expect(e == g, f"layout: Python says '{e}', C says '{g}'")
expect(len(expected) == len(got), "layout: different number of lines")

# ---- 2. calls through libkiln.so (no device needed)
k = kiln_ctypes.Kiln(lib_path, header=os.path.join(src_dir, "runtime", "kiln_compile.h"))
expect(k.fn.kiln_version().decode().count(".") == 2, "kiln_version")


def bwd_call(det):
    strides_q = (5 * 7 * 64, 64, 7 * 64)          # [b, s, h, d] with 7 heads: the last
    strides_kv = (6 * 1 * 64, 64, 1 * 64)         # field of each triple is the row stride
    p = k.new("KilnAttentionBwdParams", deterministic=det)
    f = p.fwd
    f.dtype, f.batch, f.heads_q, f.heads_kv = kiln_ctypes.KILN_BF16, 3, 7, 1
    f.seqlen_q, f.seqlen_k, f.head_dim = 5, 6, 64
    f.q, f.k, f.v, f.o, f.lse = 0x10000, 0x20000, 0x30000, 0x40000, 0x50000
    p.dout, p.dq, p.dk, p.dv, p.scratch = 0x60000, 0x70000, 0x80000, 0x90000, 0xA0000
    for dst, st in ((f.q_stride, strides_q), (f.o_stride, strides_q), (p.dout_stride, strides_q),
                    (p.dq_stride, strides_q), (f.k_stride, strides_kv), (f.v_stride, strides_kv),
                    (p.dk_stride, strides_kv), (p.dv_stride, strides_kv)):
        dst[:] = st
    return p


for det in (0, 1):
    p = bwd_call(det)
    rows = 3 * 7 * 5
    want = (rows * 4 + 255) // 256 * 256 + (0 if det else rows * 64 * 4)
    got = k.fn.kiln_attention_bwd_scratch_size(ctypes.byref(p))
    expect(got == want, f"kiln_attention_bwd_scratch_size(deterministic={det}) = {got}, want {want}")
    st = k.fn.kiln_attention_bwd_check(ctypes.byref(p))
    expect(st == 0, f"kiln_attention_bwd_check of a complete call: status {st}: {k.last_error()}")

for field, value in (("dv", 0), ("scratch", 0), ("dk_stride", None)):
    p = bwd_call(0)
    if value is None:
        p.dk_stride[2] = -1
    else:
        setattr(p, field, value)
    st = k.fn.kiln_attention_bwd_check(ctypes.byref(p))
    msg = k.last_error()
    expect(st != 0 and field in msg, f"kiln_attention_bwd_check with a bad {field}: status {st}, '{msg}'")

# block masks (KilnBlockMask, laid out in 1.): the size query reads the call's lengths and the
# mask's blocks, batch and heads where Python wrote them; the CPU create fills the descriptor
f = bwd_call(0).fwd                      # batch 3, heads_q 7, seqlen_q 5, seqlen_k 6
m = k.new("KilnBlockMask", block_q=16, block_kv=32, batch=3, heads=1)
g, nq, nk = 3, 1, 1
want = sum((n + 3) // 4 * 16 for n in (g * nq, g * nq * nk, g * nq, g * nq * nk, g * nk, g * nk * nq, g * nk,
                                       g * nk * nq, g * nq * nk))
got = k.fn.kiln_attention_block_mask_size(ctypes.byref(f), ctypes.byref(m))
expect(got == want, f"kiln_attention_block_mask_size = {got}, want {want}")
buf = ctypes.create_string_buffer(got + 16)
m.data, m.bytes = (ctypes.addressof(buf) + 15) // 16 * 16, got
f.seqlen_q, f.seqlen_k = 16, 40         # one query block; key blocks 0 (full) and 1 (ragged: partial)
m.bytes = k.fn.kiln_attention_block_mask_size(ctypes.byref(f), ctypes.byref(m))
buf = ctypes.create_string_buffer(m.bytes + 16)
m.data = (ctypes.addressof(buf) + 15) // 16 * 16
st = k.fn.kiln_attention_block_mask_create_cpu(ctypes.byref(f), ctypes.byref(m))
expect(st == 0, f"kiln_attention_block_mask_create_cpu: {k.last_error()}")
arrays = [ctypes.cast(m.data + m.offset[i], ctypes.POINTER(ctypes.c_int32)) for i in range(4)]
expect((m.num_q_blocks, m.num_kv_blocks, m.seqlen_k) == (1, 2, 40),
       f"block mask descriptor: {m.num_q_blocks} x {m.num_kv_blocks} blocks, seqlen_k {m.seqlen_k}")
# KV_NUM, KV_IDX, FULL_KV_NUM, FULL_KV_IDX of (batch 0, query block 0)
got = st == 0 and [arrays[0][0], arrays[1][0], arrays[2][0], arrays[3][0]]
expect(got == [1, 1, 1, 0], f"block mask lists of a plain call: {got}, want partial [1] and full [0]")
m.batch = 2
st = k.fn.kiln_attention_block_mask_create_cpu(ctypes.byref(f), ctypes.byref(m))
expect(st != 0 and "block_mask.batch" in k.last_error(), f"a bad block_mask.batch: '{k.last_error()}'")

p = bwd_call(0).fwd
p.head_dim = 100
st = k.fn.kiln_attention_check(ctypes.byref(p))
expect(st != 0 and "head_dim" in k.last_error(), f"kiln_attention_check head_dim 100: '{k.last_error()}'")
try:
    k.check(st, "kiln_attention_check")
    expect(False, "Kiln.check did not raise")
except kiln_ctypes.KilnError as exc:
    expect("head_dim" in str(exc), f"KilnError text: {exc}")

print(f"kiln_ctypes: {len(expected)} layout facts, {'FAIL' if failures else 'ok'}")
sys.exit(1 if failures else 0)
