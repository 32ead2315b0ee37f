#!/usr/bin/env python3
"""test_kiln_ctypes.py — tools/bench/kiln_ctypes.py, the Python mirror of Kiln's attention
API that the backward benchmark calls libkiln.so through, is the C API.

1. Layout: every field of the structs it reads from include/kiln/kiln_attention.h has the offset,
   and every struct the size, that the C compiler gives (a generated C program prints
   offsetof/sizeof; compiled with the compiler the build uses). A field the header gains
   that the parser cannot read fails here, naming it.
2. Calls, no GPU needed: kiln_attention_bwd_scratch_size of a filled struct equals the
   documented size (delta rows rounded up to 256 bytes, plus the f32 dQ accumulator unless
   deterministic), so batch, heads_q, seqlen_q, head_dim and deterministic are read where
   Python wrote them; kiln_attention_bwd_check accepts a complete call and names the field
   that is wrong in a broken one (fields after the embedded forward struct, too);
   kiln_attention_check names a bad head_dim.
3. Variants (kiln_ctypes.variant, the header-read KilnAttentionVariant / KilnVariantArg /
   KilnArg, in the layout check of 1. too): the forward on the CPU interpreter
   (kiln_attention_fwd_cpu) with document.tile (a pointer and two integer arguments) and
   softcap.tile (a float) matches float64 attention in Python and differs from plain
   attention; a misspelt argument name is refused, naming it.

Usage: test_kiln_ctypes.py SOURCE_DIR LIBKILN_SO CC
"""
import ctypes
import math
import os
import random
import struct
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
        if isinstance(ftype, type) and issubclass(ftype, (ctypes.Structure, ctypes.Union)):
            out += [(p, off + o, s) for p, o, s in fields_of(ftype, prefix + name + ".")]
    return out


# ---- 1. layout against the C compiler
types = kiln_ctypes.parse_structs(os.path.join(src_dir, "include", "kiln", "kiln_attention.h"))
lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "kiln.h"', "int main(void) {"]
expected = []
# the parsed structs, then the hand-written ones of the variant API
hand = (kiln_ctypes.KilnArg, kiln_ctypes.KilnVariantArg, kiln_ctypes.KilnDefine, kiln_ctypes.KilnAttentionVariant)
# and every struct of the three public headers as the kiln package reads them (nested structs
# and unions included)
every = kiln_ctypes._header(os.path.join(src_dir, "include", "kiln", "kiln_attention.h"))
pkg = [(n, every.types[n]) for n in every.structs if not n.startswith("_")]
for sname, ct in list(types.items()) + [(ct.__name__, ct) for ct in hand] + pkg:
    lines.append(f'    printf("{sname} sizeof %zu\\n", sizeof({sname}));')
    expected.append(f"{sname} sizeof {ctypes.sizeof(ct)}")
    for path, off, size in fields_of(ct):
        lines.append(f'    printf("{sname}.{path} %zu %zu\\n", offsetof({sname}, {path}), '
                     f'sizeof((({sname} *)0)->{path}));')
        expected.append(f"{sname}.{path} {off} {size}")
lines.append('    printf("KILN_PARAM %d %d %d %d %d\\n", KILN_PARAM_PTR, KILN_PARAM_I32, KILN_PARAM_I64, '
             'KILN_PARAM_F32, KILN_PARAM_F64);')
expected.append("KILN_PARAM " + " ".join(str(getattr(kiln_ctypes, "KILN_PARAM_" + t))
                                         for t in ("PTR", "I32", "I64", "F32", "F64")))
lines.append('    printf("KILN_F16 %d KILN_BF16 %d\\n", (int)KILN_F16, (int)KILN_BF16);')
expected.append(f"KILN_F16 {kiln_ctypes.KILN_F16} KILN_BF16 {kiln_ctypes.KILN_BF16}")
lines += ["    return 0;", "}"]
with tempfile.TemporaryDirectory() as tmp:
    c_file, exe = os.path.join(tmp, "layout.c"), os.path.join(tmp, "layout")
    with open(c_file, "w") as f:
        f.write("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c17", "-I", os.path.join(src_dir, "include", "kiln"), c_file, "-o", exe], check=True)
    got = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.splitlines()
expect(len(expected) > 60, f"only {len(expected)} layout facts: the parser missed fields")
for e, g in zip(expected, got):
    expect(e == g, f"layout: Python says '{e}', C says '{g}'")
expect(len(expected) == len(got), "layout: different number of lines")

# ---- 2. calls through libkiln.so (no device needed)
k = kiln_ctypes.Kiln(lib_path, header=os.path.join(src_dir, "include", "kiln", "kiln_attention.h"))
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
    p.scratch_size = 1 << 20      # the scratch's size (issue 24): ample here, checked below
    return p


for det in (0, 1):
    p = bwd_call(det)
    rows = 3 * 7 * 5
    want = (rows * 4 + 255) // 256 * 256 + (0 if det else rows * 64 * 4)
    got = k.fn.kiln_attention_bwd_scratch_size(ctypes.byref(p))
    expect(got == want, f"kiln_attention_bwd_scratch_size(deterministic={det}) = {got}, want {want}")
    st = k.fn.kiln_attention_bwd_check(ctypes.byref(p))
    expect(st == 0, f"kiln_attention_bwd_check of a complete call: status {st}: {k.last_error()}")

for field, value in (("dv", 0), ("scratch", 0), ("scratch_size", 16), ("dk_stride", None)):
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


# ---- 3. a variant through kiln_ctypes.variant(): the forward on the CPU interpreter
# (kiln_attention_fwd_cpu, host buffers) with document masking (a pointer and two integer
# arguments) and soft-capping (a float one), against float64 attention in Python.
B, H, N, D = 2, 2, 21, 32
scale = 1 / math.sqrt(D)
rng = random.Random(7)
n_el = B * H * N * D
qkv = [[rng.uniform(-1, 1) for _ in range(n_el)] for _ in range(3)]
doc_ids = [1 if t < 9 else 2 for t in range(N)] + [5 if t < 15 else 6 for t in range(N)]


def half_buf(vals):
    return ctypes.create_string_buffer(struct.pack(f"<{len(vals)}e", *vals), 2 * len(vals))


def ref_attention(mask, score):
    """float64 attention of the f16-rounded inputs: [b][h][i][dd]."""
    q, kk, vv = (struct.unpack(f"<{n_el}e", struct.pack(f"<{n_el}e", *x)) for x in qkv)
    at = lambda t, b, h, i: t[((b * H + h) * N + i) * D:((b * H + h) * N + i + 1) * D]  # noqa: E731
    out = []
    for b in range(B):
        for h in range(H):
            for i in range(N):
                qi = at(q, b, h, i)
                sc = [score(scale * sum(x * y for x, y in zip(qi, at(kk, b, h, j)))) if mask(b, i, j) else None
                      for j in range(N)]
                m = max(x for x in sc if x is not None)
                w = [math.exp(x - m) if x is not None else 0.0 for x in sc]
                out.append([sum(w[j] * at(vv, b, h, j)[dd] for j in range(N)) / sum(w) for dd in range(D)])
    return out


def run_cpu(var):
    bufs = [half_buf(x) for x in qkv]
    o = ctypes.create_string_buffer(b"\xff" * (2 * n_el), 2 * n_el)          # NaN until written
    lse = ctypes.create_string_buffer(b"\xff" * (4 * B * H * N), 4 * B * H * N)
    p = k.new("KilnAttentionParams", dtype=kiln_ctypes.KILN_F16, batch=B, heads_q=H, heads_kv=H, seqlen_q=N,
              seqlen_k=N, head_dim=D, softmax_scale=scale)
    for name, buf in zip(("q", "k", "v"), bufs):
        setattr(p, name, ctypes.addressof(buf))
    p.o, p.lse = ctypes.addressof(o), ctypes.addressof(lse)
    for st in (p.q_stride, p.k_stride, p.v_stride, p.o_stride):
        st[:] = (H * N * D, N * D, D)
    p.variant = ctypes.addressof(var)
    p.q_bytes = p.k_bytes = p.v_bytes = p.o_bytes = 2 * n_el   # the host buffers' sizes (bounded there)
    p.lse_bytes = 4 * B * H * N
    status = k.fn.kiln_attention_fwd_cpu(ctypes.byref(p))
    if status != 0:
        return None, k.last_error()
    got = struct.unpack(f"<{n_el}e", o.raw)
    return [got[r * D:(r + 1) * D] for r in range(B * H * N)], ""


def max_err(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


ids = (ctypes.c_int32 * len(doc_ids))(*doc_ids)
plain = ref_attention(lambda b, i, j: True, lambda s: s)
cases = [("document", kiln_ctypes.variant("lang/lib/variants/document.tile", args={
             "doc_ids": kiln_ctypes.Ptr(ctypes.addressof(ids), ctypes.sizeof(ids)), "doc_stride": N, "doc_len": N}),
          lambda b, i, j: doc_ids[b * N + i] == doc_ids[b * N + j], lambda s: s),
         ("softcap", kiln_ctypes.variant("lang/lib/variants/softcap.tile", args={"softcap": 0.3}),
          lambda b, i, j: True, lambda s: 0.3 * math.tanh(s / 0.3))]
for name, var, mask, score in cases:
    got, why = run_cpu(var)
    expect(got is not None, f"kiln_attention_fwd_cpu with {name}.tile: {why}")
    if got is not None:
        ref = ref_attention(mask, score)
        err = max_err(got, ref)
        # 2e-3: f16 output rounding (values in [-1, 1]); the variant must move O well beyond that
        expect(err < 2e-3, f"{name}: max |O - float64| = {err:.3g}")
        expect(max_err(ref, plain) > 0.05, f"{name}: the reference does not differ from plain attention")
bad = kiln_ctypes.variant("lang/lib/variants/softcap.tile", args={"softcapp": 1.0})
got, why = run_cpu(bad)
expect(got is None and "softcapp" in why, f"a misspelt variant argument: '{why}'")
try:
    kiln_ctypes.variant("x.tile", args={"n": "3"})
    expect(False, "variant() took a str argument")
except TypeError:
    pass

print(f"kiln_ctypes: {len(expected)} layout facts, {'FAIL' if failures else 'ok'}")
sys.exit(1 if failures else 0)
