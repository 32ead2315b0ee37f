#!/usr/bin/env python3
"""bench_flex.py — Kiln's shipped attention variants raced against PyTorch's FlexAttention,
side by side in one run, on one GPU (issue 15).

Each variant of lang/lib/variants/ runs through Kiln's runtime call (kiln_attention_fwd /
kiln_attention_bwd with a KilnAttentionVariant: the variant's file and its runtime arguments,
through tools/bench/kiln_ctypes.py) and through torch.compile(flex_attention) with the same
mask as a mask_mod (create_block_mask) and the same bias as a score_mod, on the same tensors:

  causal     causal.tile (a mask_mod; Kiln's causal flag off)         Flex: causal mask_mod
  swa1024    sliding_window.tile, window_left 1024, right 0, causal   Flex: window & causal
  alibi      alibi.tile (slopes tensor 2^(-8 (h+1) / H)), causal      Flex: score_mod + causal
  softcap    softcap.tile (cap 50), causal                            Flex: score_mod + causal
  document   document.tile: 8 packed documents per sequence of random lengths (doc_ids tensor)
  prefix_lm  prefix_lm.tile, prefix N / 4
  rel_bias   relative_bias.tile: T5 buckets (32, max distance 128), table tensor [H, 32]
  gemma2     gemma2.tile: soft-cap 50 inside a causal window of 4096 (left 4095, right 0)

Default shape B 2, H 16, N 8192, d 128, f16, layout [b, h, s, d] (--quick: N 4096).

What it measures, per variant:
- correctness first (on a smaller ragged shape, B 2, H 4, N 1000: not a multiple of any block;
  random inputs; Kiln's outputs poisoned with NaN before its call): Kiln's O, LSE and
  dQ, dK, dV against a float64 PyTorch reference with the mask and the bias materialised,
  by FlashAttention's rule max|x - ref| <= 2 x max|torch-in-dtype - ref| + 1e-5 (LSE:
  within 1e-3 relative); Flex's errors on the same are reported, not enforced; the exact
  visible count below equals the materialised mask's count. The window, cap and prefix are
  scaled to the small shape (check_params in CASES).
- times with CUDA events (common.torch_median_ms: median over ~--target-ms of launches after
  a warm-up), forward (Flex's with inputs that require grad: one compiled graph for all
  passes, the LSE kept as Kiln's forward writes it), backward (on the forward's O and LSE;
  Flex: autograd.grad of one recorded forward) and forward + backward; TFLOP/s over the VISIBLE entries: the count of
  (q, k) pairs the mask lets through, exact (closed forms, checked against brute force by
  tests/tools/test_bench_flex.py), times 4 d for the forward, 2.5 x that for the backward,
  3.5 x for both; Kiln's ratio to Flex; the variant's overhead against Kiln's plain kernel
  (no variant; causal flag as the variant's, the plain causal kernel for causal.tile).
- cold compile, seconds: each variant's first Kiln call (forward, then backward) in a fresh
  KILN_CACHE_DIR (the on-disk cache, jit/cache.c) after kiln_attention_cache_clear,
  and Flex's first calls (torch.compile: the forward, then its backward) with fresh
  TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR for the process; plus
  a probe: a variant text never seen (an ALiBi-like bias with a random constant) on both.
- Kiln block masks: used for the mask variants when kiln_ctypes has the block-mask API
  (hasattr), else the table says "no" (Kiln then evaluates the mask on every block in range).

Output (under --out, default $OUT or ./bench_out): flex_bench.csv (one line per variant,
provider, pass: tools/bench/plot_svg.py --preset flex draws it), .json, .md; the tables are
printed, the short summary last. Exit status 1, with FAILED lines, when any check fails or
a provider fails on a variant; the other variants still run.

  python3 tools/bench/bench_flex.py --lib build/libkiln.so --quick   # ~4 min
  python3 tools/bench/bench_flex.py --lib build/libkiln.so           # ~6 min
  python3 tools/bench/bench_flex.py --dry-run --quick                 # no GPU, no torch: fake numbers
On the GPU machine: tools/device_bench_flex.sh (after tools/device_pack.sh here).
"""
import argparse
import ctypes
import math
import os
import random
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

PASSES = ("fwd", "bwd", "fwd_bwd")
PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd_bwd": 3.5}   # x the forward's FLOPs (FlashAttention's count)
CSV_FIELDS = ["variant", "dtype", "d", "n", "batch", "heads", "causal", "visible", "block_mask", "provider",
              "pass", "ms", "tflops", "error"]
T5_BUCKETS, T5_EXACT, T5_MAX_DISTANCE = 32, 8, 128   # relative_bias.tile's consts


class Case:
    """One shipped variant: its file, Kiln's causal flag, its mask and score kinds (MASKS,
    SCORES), the runtime parameters at the timing shape and at the check shape (functions
    of N), and the plain kernel its overhead is measured against."""

    def __init__(self, name, file, causal, mask=None, score=None, params=None, check_params=None):
        self.name, self.file, self.causal, self.mask, self.score = name, file, causal, mask, score
        self.params = params or (lambda n: {})
        self.check_params = check_params or self.params
        self.path = f"lang/lib/variants/{file}.tile"
        # causal.tile's mask is the causal one: its plain kernel is the causal kernel
        self.base_causal = causal or mask == "causal"


CASES = [
    Case("causal", "causal", False, mask="causal"),
    Case("swa1024", "sliding_window", True, mask="window",
         params=lambda n: {"window_left": 1024, "window_right": 0},
         check_params=lambda n: {"window_left": 255, "window_right": 0}),
    Case("alibi", "alibi", True, score="alibi"),
    Case("softcap", "softcap", True, score="softcap", params=lambda n: {"softcap": 50.0},
         check_params=lambda n: {"softcap": 5.0}),
    Case("document", "document", False, mask="document", params=lambda n: {"ndocs": 8}),
    Case("prefix_lm", "prefix_lm", False, mask="prefix", params=lambda n: {"prefix_len": n // 4},
         check_params=lambda n: {"prefix_len": 300}),
    Case("rel_bias", "relative_bias", False, score="relbias"),
    Case("gemma2", "gemma2", True, mask="window", score="softcap",
         params=lambda n: {"softcap": 50.0, "window_left": 4095, "window_right": 0},
         check_params=lambda n: {"softcap": 5.0, "window_left": 200, "window_right": 0}),
]
CASE_BY_NAME = {c.name: c for c in CASES}


# ---------------------------------------------------------------- visible entries (pure Python)

def doc_lengths(n, ndocs, b, seed=0):
    """The lengths of the `ndocs` packed documents of sequence b (random cuts, each >= 1,
    summing to n; a fixed seed per sequence)."""
    ndocs = max(1, min(ndocs, n))
    cuts = sorted(random.Random(1000003 * seed + 7919 * b + n).sample(range(1, n), ndocs - 1))
    edges = [0] + cuts + [n]
    return [edges[i + 1] - edges[i] for i in range(ndocs)]


def doc_ids(n, ndocs, b, seed=0):
    """Token -> document id of sequence b (ids 7 b + 1, 7 b + 2, ...: distinct across sequences)."""
    out = []
    for i, ln in enumerate(doc_lengths(n, ndocs, b, seed)):
        out += [7 * b + 1 + i] * ln
    return out


def visible_pred(case, p, batch, n, seed=0):
    """The mask as a Python predicate f(b, i, j) -> bool (Kiln's causal flag included):
    what the brute-force count and the tests use."""
    docs = [doc_ids(n, p["ndocs"], b, seed) for b in range(batch)] if case.mask == "document" else None

    def f(b, i, j):
        if case.causal and j > i:
            return False
        m = case.mask
        if m == "causal":
            return j <= i
        if m == "window":
            left, right = p["window_left"], p["window_right"]
            return (left < 0 or j >= i - left) and (right < 0 or j <= i + right)
        if m == "prefix":
            return j <= i or j < p["prefix_len"]
        if m == "document":
            return docs[b][i] == docs[b][j]
        return True
    return f


def visible_count(case, p, batch, heads, n, seed=0):
    """The exact number of visible (q, k) pairs over the batch and heads, by closed forms
    per row or per document (O(B N)); tests/tools/test_bench_flex.py checks it against
    visible_pred summed over every pair."""
    causal, m, per_b = case.causal, case.mask, []
    for b in range(batch):
        if m == "document":
            lens = doc_lengths(n, p["ndocs"], b, seed)
            per_b.append(sum(ln * (ln + 1) // 2 if causal else ln * ln for ln in lens))
            continue
        total = 0
        for i in range(n):
            lo, hi = 0, n - 1
            if causal or m == "causal":
                hi = i
            if m == "window":
                if p["window_left"] >= 0:
                    lo = max(lo, i - p["window_left"])
                if p["window_right"] >= 0:
                    hi = min(hi, i + p["window_right"])
            row = max(0, hi - lo + 1)
            if m == "prefix" and not causal:    # j <= i or j < prefix: the union of two ranges
                row = max(i + 1, min(p["prefix_len"], n))
            total += row
        per_b.append(total)
    return heads * sum(per_b)


def fwd_flops(visible, d):
    """FlashAttention's count over the visible entries: 2 matmuls of 2 d FLOPs per pair."""
    return 4.0 * d * visible


# ---------------------------------------------------------------- torch: tensors and mods

def torch_dtype(name):
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16}[name]


def case_tensors(case, p, batch, heads, n, seed=0):
    """The variant's tensors on the GPU: ALiBi slopes f32 [H], document ids i32 [B, N],
    the relative-bias table f32 [H, 32] (random in [-1, 1])."""
    import torch
    t = {}
    if case.score == "alibi":
        t["slopes"] = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)],
                                   device="cuda", dtype=torch.float32)
    if case.mask == "document":
        t["doc"] = torch.tensor([doc_ids(n, p["ndocs"], b, seed) for b in range(batch)], device="cuda",
                                dtype=torch.int32)
    if case.score == "relbias":
        g = torch.Generator(device="cuda").manual_seed(99 + seed)
        t["table"] = torch.rand(heads, T5_BUCKETS, device="cuda", generator=g) * 2 - 1
    return t


def mask_mod(case, p, t):
    """FlexAttention's mask_mod (None: no mask); also evaluated on broadcast index tensors
    for the dense reference."""
    m = case.mask
    if m == "causal":
        base = lambda b, h, q, kv: q >= kv  # noqa: E731
    elif m == "window":
        left, right = p["window_left"], p["window_right"]

        def base(b, h, q, kv):
            ok = (q - kv <= left) if left >= 0 else (q >= 0)
            return ok & (kv - q <= right) if right >= 0 else ok
    elif m == "prefix":
        plen = p["prefix_len"]
        base = lambda b, h, q, kv: (kv <= q) | (kv < plen)  # noqa: E731
    elif m == "document":
        doc = t["doc"]
        base = lambda b, h, q, kv: doc[b, q] == doc[b, kv]  # noqa: E731
    else:
        base = None
    if not case.causal:
        return base
    if base is None:
        return lambda b, h, q, kv: q >= kv
    return lambda b, h, q, kv: base(b, h, q, kv) & (q >= kv)


def score_mod(case, p, t):
    """FlexAttention's score_mod (None: none): natural units, raw indices, as the hooks."""
    import torch
    s = case.score
    if s == "softcap":
        cap = p["softcap"]
        return lambda score, b, h, q, kv: cap * torch.tanh(score / cap)
    if s == "alibi":
        slopes = t["slopes"]
        return lambda score, b, h, q, kv: score - slopes[h] * (q - kv).abs()
    if s == "relbias":
        table = t["table"]
        half, exact = T5_BUCKETS // 2, T5_EXACT
        factor = (half - exact) / math.log2(T5_MAX_DISTANCE / exact)

        def relbias(score, b, h, q, kv):
            rel = kv - q
            n = rel.abs()
            big = exact + (torch.log2(torch.clamp(n, min=1).to(torch.float32) / exact) * factor).to(torch.int32)
            bucket = (rel > 0).to(torch.int32) * half + torch.where(n < exact, n, torch.clamp(big, max=half - 1))
            return score + table[h, bucket]
        return relbias
    return None


def kiln_args(case, p, t, n):
    """The variant's runtime arguments for kiln_ctypes.variant (names of its `param`s)."""
    import kiln_ctypes
    a = {k: p[k] for k in ("window_left", "window_right", "softcap", "prefix_len") if k in p}
    if "slopes" in t:
        a["alibi_slopes"] = kiln_ctypes.Ptr(t["slopes"].data_ptr(), t["slopes"].numel() * 4)
    if "doc" in t:
        a.update(doc_ids=kiln_ctypes.Ptr(t["doc"].data_ptr(), t["doc"].numel() * 4), doc_stride=n, doc_len=n)
    if "table" in t:
        a["rel_bias"] = kiln_ctypes.Ptr(t["table"].data_ptr(), t["table"].numel() * 4)
    return a


def dense_attention(q, k, v, scale, mask, smod):
    """Plain attention with the mask and bias materialised: scores in q's dtype (the score
    mod's result cast back to it), -inf where masked."""
    import torch
    B, H, N, _ = q.shape
    dev = q.device
    b = torch.arange(B, device=dev).view(B, 1, 1, 1)
    h = torch.arange(H, device=dev).view(1, H, 1, 1)
    qi = torch.arange(N, device=dev).view(1, 1, N, 1)
    kj = torch.arange(k.shape[2], device=dev).view(1, 1, 1, -1)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if smod is not None:
        s = smod(s, b, h, qi, kj).to(q.dtype)
    if mask is not None:
        s = s.masked_fill(~mask(b, h, qi, kj).expand_as(s), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v), torch.logsumexp(s, dim=-1)


# ---------------------------------------------------------------- the check

def max_err(x, ref):
    return (x.double() - ref).abs().max().item()


def run_check(args, kiln, flex, case, seed):
    """Kiln's (and Flex's) O, LSE, dQ, dK, dV against float64 on the check shape."""
    import torch
    import bench_attention_bwd
    import kiln_ctypes
    from torch.nn.attention.flex_attention import create_block_mask
    B, H, N, d = 2, 4, args.check_n, args.head_dim
    tdt = torch_dtype(args.dtype)
    p = case.check_params(N)
    t = case_tensors(case, p, B, H, N, seed)
    g = torch.Generator(device="cuda").manual_seed(1234 + seed)
    q, k, v, dout = (torch.randn(B, H, N, d, device="cuda", dtype=tdt, generator=g) for _ in range(4))
    scale = 1 / math.sqrt(d)
    mm, sm = mask_mod(case, p, t), score_mod(case, p, t)
    t64 = {key: x.double() if x.is_floating_point() else x for key, x in t.items()}
    mm64, sm64 = mask_mod(case, p, t64), score_mod(case, p, t64)
    res = {"variant": case.name, "shape": [B, H, N, d], "params": p, "ok": True, "failed": []}

    def fail(what):
        res["ok"] = False
        res["failed"].append(what)

    # the exact count against the materialised mask
    want = visible_count(case, p, B, H, N, seed)
    if mm is not None:
        dev = q.device
        full = mm(torch.arange(B, device=dev).view(B, 1, 1, 1), torch.arange(H, device=dev).view(1, H, 1, 1),
                  torch.arange(N, device=dev).view(1, 1, N, 1), torch.arange(N, device=dev).view(1, 1, 1, N))
        got = int(full.expand(B, H, N, N).sum().item())
    else:
        got = B * H * N * N
    res["visible"], res["visible_materialised"] = want, got
    if got != want:
        fail(f"visible count {want} != the materialised mask's {got}")

    def ref_grads(dt, mask, smod):
        x = [z.detach().to(dt).requires_grad_() for z in (q, k, v)]
        o, lse = dense_attention(*x, scale, mask, smod)
        return (o, lse) + torch.autograd.grad(o, x, dout.to(dt))
    ref = ref_grads(torch.float64, mm64, sm64)
    plain = ref_grads(tdt, mm, sm)
    names = ("o", "lse", "dq", "dk", "dv")
    bounds = {nm: 2 * max_err(pl, r) + 1e-5 for nm, pl, r in zip(names, plain, ref)}
    res["bound"] = {nm: bounds[nm] for nm in names if nm != "lse"}

    # Kiln: outputs poisoned, forward then backward
    var = kiln_ctypes.variant(case.path, args=kiln_args(case, p, t, N))
    call = bench_attention_bwd.KilnCall(kiln, q, k, v, dout, case.causal, args.deterministic, var)
    attach_block_mask(kiln, call, case, B, res)
    for z in (call.o, call.lse, call.dq, call.dk, call.dv):
        z.fill_(float("nan"))
    try:
        call.fwd_bwd()
        torch.cuda.synchronize()
        kerr = {nm: max_err(x, r) for nm, x, r in zip(names, (call.o, call.lse, call.dq, call.dk, call.dv), ref)}
        kerr["lse"] = ((call.lse.double() - ref[1]).abs() / ref[1].abs().clamp(min=1)).max().item()
        res["kiln"] = kerr
        for nm in ("o", "dq", "dk", "dv"):
            if not (math.isfinite(kerr[nm]) and kerr[nm] <= bounds[nm]):
                fail(f"Kiln {nm} error {kerr[nm]:.3g} > bound {bounds[nm]:.3g}")
        if not (math.isfinite(kerr["lse"]) and kerr["lse"] <= 1e-3):
            fail(f"Kiln LSE relative error {kerr['lse']:.3g} > 1e-3")
    except Exception as exc:
        fail(f"Kiln: {type(exc).__name__}: {str(exc)[:400]}")
    call = None

    # Flex on the same (reported; its rule is not enforced)
    try:
        bm = create_block_mask(mm, B if case.mask == "document" else None, None, N, N, device="cuda") \
            if mm is not None else None
        x = [z.detach().requires_grad_() for z in (q, k, v)]
        o = flex(*x, score_mod=sm, block_mask=bm, scale=scale)
        grads = torch.autograd.grad(o, x, dout)
        torch.cuda.synchronize()
        ferr = {nm: max_err(z, r) for nm, z, r in zip(("o", "dq", "dk", "dv"), (o,) + tuple(grads),
                                                         (ref[0],) + ref[2:])}
        res["flex"] = ferr
        res["flex_in_bound"] = all(ferr[nm] <= bounds[nm] for nm in ("o", "dq", "dk", "dv"))
    except Exception as exc:
        res["flex"] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return res


# ---------------------------------------------------------------- Kiln's block masks

def block_mask_support(kiln):
    """(usable, why not): the block-mask API in kiln_ctypes (KilnBlockMask,
    kiln_attention_block_mask_size / _create, KilnAttentionParams.block_mask)."""
    if kiln is None:
        return False, "dry run"
    fields = [f for f, _ in kiln.types["KilnAttentionParams"]._fields_]
    if not (hasattr(kiln.fn, "kiln_attention_block_mask_create") and hasattr(kiln.fn, "kiln_attention_block_mask_size")
            and "KilnBlockMask" in kiln.types and "block_mask" in fields):
        return False, "kiln_ctypes.py has no block-mask API (KilnBlockMask, kiln_attention_block_mask_create)"
    return True, ""


def attach_block_mask(kiln, call, case, batch, rec):
    """For a variant with a mask_mod when block masks are on: Kiln's block mask of the call,
    made once (kiln_attention_block_mask_create; per batch for the document mask, else stored
    once), set on its params and kept alive with it. rec gets "block_mask" (whether) and
    "block_mask_s" (the first creation, compile included)."""
    import torch
    use = getattr(kiln, "use_block_mask", False) and case is not None and case.mask is not None
    rec["block_mask"] = bool(use)
    if not use:
        return
    f = call.p.fwd
    m = kiln.new("KilnBlockMask", batch=batch if case.mask == "document" else 1, heads=1)
    size = kiln.fn.kiln_attention_block_mask_size(ctypes.byref(f), ctypes.byref(m))
    if not size:
        raise kiln_error(kiln, "kiln_attention_block_mask_size")
    buf = torch.empty(size, dtype=torch.uint8, device="cuda")
    m.data, m.bytes = buf.data_ptr(), size
    rec["block_mask_s"] = first_call_s(lambda: kiln.check(kiln.fn.kiln_attention_block_mask_create(
        kiln.dev, ctypes.byref(f), ctypes.byref(m), None), "kiln_attention_block_mask_create"))
    f.block_mask = ctypes.addressof(m)
    call.block_mask = (m, buf)


def kiln_error(kiln, what):
    import kiln_ctypes
    return kiln_ctypes.KilnError(f"{what}: {kiln.last_error()}")


# ---------------------------------------------------------------- timing one variant

def flex_callables(flex, q, k, v, dout, sm, bm, scale):
    """Flex's forward, backward alone (of the last recorded forward) and forward+backward.
    The forward is the training one (inputs that require grad: it keeps the LSE, as Kiln's
    forward always writes it), so one compiled graph serves all three passes."""
    import torch
    x = [z.detach().requires_grad_() for z in (q, k, v)]
    state = {}

    def fwd():
        state["out"] = flex(*x, score_mod=sm, block_mask=bm, scale=scale)
        return state["out"]

    def bwd():
        return torch.autograd.grad(state["out"], x, dout, retain_graph=True)

    def fwd_bwd():
        return torch.autograd.grad(flex(*x, score_mod=sm, block_mask=bm, scale=scale), x, dout)
    return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd_bwd}


def first_call_s(fn):
    import torch
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def fresh_kiln_cache(kiln, tmp, tag):
    """A new, empty on-disk cache (KILN_CACHE_DIR is read at each call) and no variant loaded."""
    d = os.path.join(tmp, "kiln-cache-" + tag)
    os.makedirs(d, exist_ok=True)
    os.environ["KILN_CACHE_DIR"] = d
    kiln.fn.kiln_attention_cache_clear(kiln.dev)


def time_kiln(args, kiln, q, k, v, dout, causal, var, case=None, tmp=None, tag="plain"):
    """Kiln's first calls in a fresh cache (seconds) and its timings: {"fwd": {...}, ...}."""
    import bench_attention_bwd
    out, cold = {}, {}
    call = bench_attention_bwd.KilnCall(kiln, q, k, v, dout, causal, args.deterministic, var)
    fresh_kiln_cache(kiln, tmp, tag)
    attach_block_mask(kiln, call, case, q.shape[0], cold)
    cold["fwd_s"] = first_call_s(call.fwd)
    cold["bwd_s"] = first_call_s(call.bwd)
    for ps, fn in (("fwd", call.fwd), ("bwd", call.bwd), ("fwd_bwd", call.fwd_bwd)):
        out[ps] = {"ms": common.torch_median_ms(fn, args.target_ms)}
    return out, cold


def run_variant(args, kiln, flex, case, tmp, seed):
    """Cold first calls, then the timings, Kiln and Flex, at the timing shape."""
    import torch
    import kiln_ctypes
    from torch.nn.attention.flex_attention import create_block_mask
    B, H, N, d = args.batch, args.heads, args.n, args.head_dim
    p = case.params(N)
    t = case_tensors(case, p, B, H, N, seed)
    g = torch.Generator(device="cuda").manual_seed(N + d + seed)
    q, k, v, dout = (torch.randn(B, H, N, d, device="cuda", dtype=torch_dtype(args.dtype), generator=g)
                     for _ in range(4))
    scale = 1 / math.sqrt(d)
    visible = visible_count(case, p, B, H, N, seed)
    flops = fwd_flops(visible, d)
    row = {"variant": case.name, "params": p, "visible": visible, "fraction": visible / (B * H * N * N),
           "results": {}, "cold": {}}
    try:
        var = kiln_ctypes.variant(case.path, args=kiln_args(case, p, t, N))
        res, cold = time_kiln(args, kiln, q, k, v, dout, case.causal, var, case, tmp, case.name)
        row["results"]["kiln"], row["cold"]["kiln"] = res, cold
        row["block_mask"] = cold.pop("block_mask", False)
    except Exception as exc:
        log(f"  kiln {case.name}: {type(exc).__name__}: {str(exc)[:400]}")
        row["results"]["kiln"] = {ps: {"error": common_error(exc)} for ps in PASSES}
        row["kiln_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    torch.cuda.empty_cache()
    try:
        mm, sm = mask_mod(case, p, t), score_mod(case, p, t)
        cold = {}
        t0 = time.perf_counter()
        bm = create_block_mask(mm, B if case.mask == "document" else None, None, N, N, device="cuda") \
            if mm is not None else None
        torch.cuda.synchronize()
        cold["block_mask_s"] = time.perf_counter() - t0
        fns = flex_callables(flex, q, k, v, dout, sm, bm, scale)
        cold["fwd_s"] = first_call_s(fns["fwd"])
        cold["bwd_s"] = first_call_s(fns["bwd"])
        row["results"]["flex"] = {ps: {"ms": common.torch_median_ms(fns[ps], args.target_ms)} for ps in PASSES}
        row["cold"]["flex"] = cold
    except Exception as exc:
        log(f"  flex {case.name}: {type(exc).__name__}: {str(exc)[:400]}")
        row["results"]["flex"] = {ps: {"error": common_error(exc)} for ps in PASSES}
        row["flex_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    fns = None
    torch.cuda.empty_cache()
    add_tflops(row, flops)
    return row


def common_error(exc):
    text = str(exc)
    return "oom" if "out of memory" in text else "fail"


def add_tflops(row, flops):
    for by_pass in row["results"].values():
        for ps, r in by_pass.items():
            if "ms" in r:
                r["tflops"] = PASS_FACTOR[ps] * flops / (r["ms"] * 1e-3) / 1e12


def run_plain(args, kiln, tmp):
    """Kiln's plain kernels (no variant), full and causal, at the timing shape."""
    import torch
    B, H, N, d = args.batch, args.heads, args.n, args.head_dim
    g = torch.Generator(device="cuda").manual_seed(N)
    q, k, v, dout = (torch.randn(B, H, N, d, device="cuda", dtype=torch_dtype(args.dtype), generator=g)
                     for _ in range(4))
    out = {}
    for name, causal in (("plain", False), ("plain_causal", True)):
        res, cold = time_kiln(args, kiln, q, k, v, dout, causal, None, tmp=tmp, tag=name)
        visible = B * H * (N * (N + 1) // 2 if causal else N * N)
        row = {"variant": name, "params": {}, "visible": visible, "fraction": visible / (B * H * N * N),
               "results": {"kiln": res}, "cold": {"kiln": cold}, "block_mask": False}
        add_tflops(row, fwd_flops(visible, d))
        out[name] = row
    return out


PROBE_TILE = """// a cold-compile probe (bench_flex.py): an ALiBi-like bias of one slope, {nonce}
import "attention";
fn score_mod(s, b, h, q_idx, kv_idx) {{ return s - {slope:.9f} * abs((q_idx - kv_idx).to(f32)); }}
"""


def run_probe(args, kiln, flex, tmp):
    """A variant never seen (its text and its constant new): first calls, Kiln and Flex."""
    import torch
    import kiln_ctypes
    nonce = random.SystemRandom().randrange(1 << 30)
    slope = 1e-3 + (nonce % 100003) * 1e-8
    B, H, N, d = args.batch, args.heads, args.n, args.head_dim
    g = torch.Generator(device="cuda").manual_seed(5)
    q, k, v, dout = (torch.randn(B, H, N, d, device="cuda", dtype=torch_dtype(args.dtype), generator=g)
                     for _ in range(4))
    row = {"variant": "probe", "slope": slope, "cold": {}}
    try:
        var = kiln_ctypes.variant(None, source=PROBE_TILE.format(nonce=nonce, slope=slope))
        import bench_attention_bwd
        call = bench_attention_bwd.KilnCall(kiln, q, k, v, dout, False, args.deterministic, var)
        fresh_kiln_cache(kiln, tmp, "probe")
        row["cold"]["kiln"] = {"fwd_s": first_call_s(call.fwd), "bwd_s": first_call_s(call.bwd)}
    except Exception as exc:
        row["kiln_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    try:
        fns = flex_callables(flex, q, k, v, dout, lambda s, b, h, qi, kj: s - slope * (qi - kj).abs(), None,
                             1 / math.sqrt(d))
        row["cold"]["flex"] = {"fwd_s": first_call_s(fns["fwd"]), "bwd_s": first_call_s(fns["bwd"])}
    except Exception as exc:
        row["flex_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
    torch.cuda.empty_cache()
    return row


# ---------------------------------------------------------------- --dry-run

class Faker:
    """--dry-run: plausible numbers (no GPU, no torch), so the tables, the CSV and the chart
    can be checked anywhere."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def ms(self, flops, ps, tflops):
        return PASS_FACTOR[ps] * flops / (tflops * self.rng.uniform(0.85, 1.15) * 1e12) * 1e3

    def row(self, args, case):
        B, H, N, d = args.batch, args.heads, args.n, args.head_dim
        p = case.params(N)
        visible = visible_count(case, p, B, H, N)
        row = {"variant": case.name, "params": p, "visible": visible, "fraction": visible / (B * H * N * N),
               "block_mask": False, "results": {},
               "cold": {"kiln": {"fwd_s": 0.4, "bwd_s": 1.1},
                        "flex": {"fwd_s": 3.0, "bwd_s": 6.0, "block_mask_s": 0.05}}}
        for prov, tf in (("kiln", 300), ("flex", 250)):
            row["results"][prov] = {ps: {"ms": self.ms(fwd_flops(visible, d), ps, tf)} for ps in PASSES}
        add_tflops(row, fwd_flops(visible, d))
        return row

    def plain(self, args):
        B, H, N, d = args.batch, args.heads, args.n, args.head_dim
        out = {}
        for name, causal in (("plain", False), ("plain_causal", True)):
            visible = B * H * (N * (N + 1) // 2 if causal else N * N)
            row = {"variant": name, "params": {}, "visible": visible, "fraction": visible / (B * H * N * N),
                   "block_mask": False, "cold": {"kiln": {"fwd_s": 0.3, "bwd_s": 0.9}},
                   "results": {"kiln": {ps: {"ms": self.ms(fwd_flops(visible, d), ps, 350)} for ps in PASSES}}}
            add_tflops(row, fwd_flops(visible, d))
            out[name] = row
        return out


# ---------------------------------------------------------------- report

cell = common.tflops_cell
ratio = common.tflops_ratio


def overhead(var, base):
    """The variant's cost over the plain kernel's at equal visible work: plain TFLOP/s over
    the variant's, minus 1, in percent."""
    if not var or not base or "tflops" not in var or "tflops" not in base or var["tflops"] <= 0:
        return "—"
    return f"{(base['tflops'] / var['tflops'] - 1) * 100:+.0f}%"


def secs(x):
    return "—" if x is None else f"{x:.2f}"


def param_text(p):
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in p.items()) or "—"


def check_table(res):
    rows = []
    for ch in res.get("checks", []):
        kl, fl, bd = ch.get("kiln", {}), ch.get("flex", {}), ch.get("bound", {})
        cells = [ch["variant"], param_text(ch.get("params", {}))]
        for nm in ("o", "dq", "dk", "dv"):
            cells.append(f"{kl[nm]:.1e} / {bd[nm]:.1e}" if nm in kl and nm in bd else "—")
        cells.append(f"{kl['lse']:.0e}" if "lse" in kl else "—")
        if "error" in fl:
            cells.append("fail")
        else:
            cells.append(" ".join(f"{fl[nm]:.1e}" for nm in ("o", "dq", "dk", "dv") if nm in fl) or "—")
        cells.append("dry run" if ch.get("fake") else "PASS" if ch["ok"] else "FAIL: " + "; ".join(ch["failed"])[:200])
        rows.append(cells)
    head = ["variant", "check params", "Kiln O err / bound", "dQ", "dK", "dV", "LSE rel", "Flex O dQ dK dV err",
            "Kiln"]
    return common.markdown_table(head, rows, align="ll" + "r" * 6 + "l")


def timing_table(res):
    plain = res.get("plain", {})
    head = ["variant", "visible", "Kiln fwd", "Flex fwd", "Kiln/Flex", "Kiln bwd", "Flex bwd", "Kiln/Flex",
            "Kiln f+b", "Flex f+b", "Kiln/Flex", "Kiln ovh fwd", "ovh bwd", "Kiln block mask"]
    rows = []
    for row in res["rows"]:
        r = row["results"]
        kl, fx = r.get("kiln", {}), r.get("flex", {})
        base = plain.get("plain_causal" if CASE_BY_NAME[row["variant"]].base_causal else "plain", {}) \
            .get("results", {}).get("kiln", {})
        cells = [row["variant"], f"{100 * row['fraction']:.1f}%"]
        for ps in PASSES:
            cells += [cell(kl.get(ps)), cell(fx.get(ps)), ratio(kl.get(ps), fx.get(ps))]
        cells += [overhead(kl.get("fwd"), base.get("fwd")), overhead(kl.get("bwd"), base.get("bwd")),
                  "yes" if row.get("block_mask") else "no"]
        rows.append(cells)
    for name in ("plain", "plain_causal"):
        if name in plain:
            kl = plain[name]["results"]["kiln"]
            cells = [f"({name}, no variant)", f"{100 * plain[name]['fraction']:.1f}%"]
            for ps in PASSES:
                cells += [cell(kl.get(ps)), "", ""]
            rows.append(cells + ["", "", ""])
    return common.markdown_table(head, rows, align="lr" + "r" * 11 + "l")


def cold_table(res):
    head = ["variant", "Kiln fwd s", "Kiln bwd s", "Kiln block mask s", "Flex fwd s", "Flex bwd s",
            "Flex create_block_mask s"]
    rows = []
    extra = [res[k] for k in ("probe",) if res.get(k)]
    for row in list(res.get("plain", {}).values()) + res["rows"] + extra:
        kc, fc = row.get("cold", {}).get("kiln", {}), row.get("cold", {}).get("flex", {})
        rows.append([row["variant"] + (" (a text never seen)" if row["variant"] == "probe" else ""),
                     secs(kc.get("fwd_s")), secs(kc.get("bwd_s")), secs(kc.get("block_mask_s")),
                     secs(fc.get("fwd_s")), secs(fc.get("bwd_s")), secs(fc.get("block_mask_s"))])
    return common.markdown_table(head, rows, align="l" + "r" * 6)


def summary_table(res):
    checks = {c["variant"]: c for c in res.get("checks", [])}
    head = ["variant", "check", "fwd Kiln/Flex", "bwd Kiln/Flex", ">= 1.3x both", "Kiln cold fwd+bwd s"]
    rows = []
    for row in res["rows"]:
        r = row["results"]
        kl, fx = r.get("kiln", {}), r.get("flex", {})
        ratios = [kl.get(ps, {}).get("tflops", 0) / fx[ps]["tflops"] if fx.get(ps, {}).get("tflops") else None
                  for ps in ("fwd", "bwd")]
        ch = checks.get(row["variant"])
        kc = row.get("cold", {}).get("kiln", {})
        cold = kc["fwd_s"] + kc["bwd_s"] if "fwd_s" in kc and "bwd_s" in kc else None
        verdict = "—" if ch is None else "dry run" if ch.get("fake") else "PASS" if ch["ok"] else "FAIL"
        rows.append([row["variant"], verdict,
                     ratio(kl.get("fwd"), fx.get("fwd")), ratio(kl.get("bwd"), fx.get("bwd")),
                     "—" if None in ratios else ("yes" if min(ratios) >= 1.3 else "no"), secs(cold)])
    return common.markdown_table(head, rows, align="ll" + "r" * 4)


def markdown(res):
    a = res["args"]
    bm = "used for the mask variants" if res.get("block_mask") else f"not used: {res.get('block_mask_why')}"
    lines = [f"Kiln's variants against FlexAttention ({res['device']}; torch {res.get('torch', '—')}; "
             f"B {a['batch']}, H {a['heads']}, N {a['n']}, d {a['head_dim']}, {a['dtype']}, [b, h, s, d]; "
             f"Kiln backward {'deterministic' if a['deterministic'] else 'non-deterministic: the runtime picks the dQ path (on sm_90 the dQ pass)'}; Kiln block masks {bm})", ""]
    if res.get("checks"):
        lines += [f"Correctness (B 2, H 4, N {a['check_n']}, d {a['head_dim']}; max |x - float64| against the "
                  "bound 2 x torch-in-dtype + 1e-5; Flex's errors reported, not enforced):", "",
                  check_table(res), ""]
    lines += ["TFLOP/s over the visible entries (forward 4 d per visible pair, backward 2.5 x, forward+backward "
              "3.5 x); overhead: the plain kernel's TFLOP/s (causal for the causal variants) over the variant's:", "",
              timing_table(res), "",
              "Cold compile, seconds (first call; Kiln in a fresh KILN_CACHE_DIR, Flex in fresh inductor/Triton "
              "caches, its forward the training one):", "", cold_table(res), ""]
    if res.get("skipped"):
        lines += [f"Not run (--budget-s {a['budget_s']:.0f} s ran out): {', '.join(res['skipped'])}", ""]
    pr = res.get("probe") or {}
    if pr.get("cold"):
        kc, fc = pr["cold"].get("kiln", {}), pr["cold"].get("flex", {})
        lines += [f"A variant never seen (the probe): Kiln's first forward {secs(kc.get('fwd_s'))} s + backward "
                  f"{secs(kc.get('bwd_s'))} s; Flex's {secs(fc.get('fwd_s'))} s + {secs(fc.get('bwd_s'))} s "
                  "(target: <= 1 s for Kiln).", ""]
    lines += ["Summary:", "", summary_table(res)]
    if res.get("failures"):
        lines += [""] + [f"FAILED: {f}" for f in res["failures"]]
    return "\n".join(lines) + "\n"


def csv_records(res):
    a = res["args"]
    rows = list(res.get("plain", {}).values()) + res["rows"]
    for row in rows:
        case = CASE_BY_NAME.get(row["variant"])
        for prov, by_pass in row["results"].items():
            for ps, r in by_pass.items():
                yield {"variant": row["variant"], "dtype": a["dtype"], "d": a["head_dim"], "n": a["n"],
                       "batch": a["batch"], "heads": a["heads"],
                       "causal": int(case.causal if case else row["variant"] == "plain_causal"),
                       "visible": row["visible"], "block_mask": int(bool(row.get("block_mask"))), "provider": prov,
                       "pass": ps, "ms": r.get("ms"), "tflops": r.get("tflops"), "error": r.get("error")}


def failures(res):
    out = [f"kiln plain kernels: {res['plain_error']}"] if res.get("plain_error") else []
    for ch in res.get("checks", []):
        out += [f"{ch['variant']}: check: {f}" for f in ch.get("failed", [])]
    for row in res["rows"]:
        for key in ("kiln_error", "flex_error"):
            if key in row:
                out.append(f"{row['variant']}: {key.split('_')[0]}: {row[key]}")
    if res.get("probe"):
        out += [f"probe: {k.split('_')[0]}: {res['probe'][k]}" for k in ("kiln_error", "flex_error")
                if k in res["probe"]]
    return out


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None, help="libkiln.so or libkiln_all.so (default: $KILN_LIB, else the "
                                                "newest build*/libkiln*.so, else one on $LD_LIBRARY_PATH)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    ap.add_argument("--quick", action="store_true", help="N 4096 and shorter measurements")
    ap.add_argument("--variants", default=",".join(c.name for c in CASES),
                    help="comma list of " + ", ".join(c.name for c in CASES))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--n", type=int, default=None, help="sequence length (default 8192; --quick 4096)")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--dtype", choices=("f16", "bf16"), default="f16")
    ap.add_argument("--check-n", type=int, default=1000, help="the correctness check's sequence length")
    ap.add_argument("--target-ms", type=float, default=None, help="measurement length per time (default 40; "
                                                                   "--quick 15)")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="wall-clock budget: variants not started by then are reported as not run")
    ap.add_argument("--deterministic", action="store_true", help="Kiln's deterministic backward (separate dQ)")
    ap.add_argument("--block-mask", choices=("auto", "off"), default="auto",
                    help="auto: Kiln block masks for the mask variants when kiln_ctypes has the API")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-probe", action="store_true", help="skip the never-seen variant's cold compile")
    ap.add_argument("--warm-caches", action="store_true",
                    help="keep TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR as they are (default: fresh ones)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU, no torch: fake timings, real tables and CSV")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    bad = [v for v in names if v not in CASE_BY_NAME]
    if bad or not names:
        ap.error(f"unknown variant(s) {bad}: expected some of {[c.name for c in CASES]}")
    args.variants = names
    args.n = args.n or (4096 if args.quick else 8192)
    args.target_ms = args.target_ms or (15.0 if args.quick else 40.0)
    for k in ("batch", "heads", "n", "check_n"):
        if getattr(args, k) < 1:
            ap.error(f"--{k.replace('_', '-')} must be positive")
    if args.check_n < 16:
        ap.error("--check-n must be at least 16 (8 documents, a prefix)")
    return args


def setup_torch(args, tmp):
    """torch with fresh compile caches (unless --warm-caches) and room for many recompiles."""
    if not args.warm_caches:
        for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
            os.environ[var] = os.path.join(tmp, var.lower())
    import torch
    import torch._dynamo
    if not torch.cuda.is_available():
        raise SystemExit("no GPU (torch.cuda.is_available() is false); --dry-run checks the script")
    from torch.nn.attention.flex_attention import flex_attention
    for knob in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):   # one compile per variant and shape, all kept
            setattr(torch._dynamo.config, knob, 1024)
    torch.zeros(1, device="cuda")            # the primary context, before Kiln retains it too
    return torch.compile(flex_attention, dynamic=False)


def main(argv=None):
    args = parse_args(argv)
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="bench_flex_")
    fake = Faker(args.seed) if args.dry_run else None
    kiln = flex = None
    res = {"args": vars(args), "rows": [], "dry_run": bool(fake), "skipped": []}
    if fake:
        res["device"], res["block_mask"], res["block_mask_why"] = "dry run (fake numbers)", False, "dry run"
        res["plain"] = fake.plain(args)
    else:
        flex = setup_torch(args, tmp)
        import torch
        import kiln_ctypes
        kiln = kiln_ctypes.Kiln(args.lib)
        kiln.init()
        log(f"kiln {kiln.fn.kiln_version().decode()} from {kiln.path}; torch {torch.__version__}")
        res["device"], res["torch"] = common.gpu_name(), torch.__version__
        ok, why = block_mask_support(kiln)
        kiln.use_block_mask = ok and args.block_mask == "auto"
        res["block_mask"] = kiln.use_block_mask
        res["block_mask_why"] = why or "--block-mask off"
        try:
            res["plain"] = run_plain(args, kiln, tmp)
        except Exception as exc:   # the variants still run; the overheads show "—"
            res["plain"], res["plain_error"] = {}, f"{type(exc).__name__}: {str(exc)[:400]}"
            log(f"kiln plain: {res['plain_error']}")
    res["checks"] = []
    for i, name in enumerate(args.variants):
        case = CASE_BY_NAME[name]
        if time.time() - t0 > args.budget_s:
            res["skipped"].append(name)
            continue
        if fake:
            res["rows"].append(fake.row(args, case))
            if not args.no_check:
                res["checks"].append({"variant": name, "params": case.check_params(args.check_n), "ok": True,
                                      "failed": [], "fake": True})
            continue
        try:
            row = run_variant(args, kiln, flex, case, tmp, args.seed + i)
        except Exception as exc:   # (setting up the variant failed) the other variants still run
            row = {"variant": name, "visible": 0, "fraction": 0.0, "cold": {},
                   "results": {p: {ps: {"error": "fail"} for ps in PASSES} for p in ("kiln", "flex")},
                   "kiln_error": f"set-up: {type(exc).__name__}: {str(exc)[:400]}"}
        res["rows"].append(row)
        log(f"{name}: " + ", ".join(f"{p} {ps} {cell(row['results'][p].get(ps))}"
                                    for p in ("kiln", "flex") for ps in PASSES))
        if not args.no_check:
            try:
                ch = run_check(args, kiln, flex, case, args.seed + i)
            except Exception as exc:
                ch = {"variant": name, "ok": False, "failed": [f"{type(exc).__name__}: {str(exc)[:400]}"]}
            res["checks"].append(ch)
            log(f"{name}: check {'PASS' if ch['ok'] else 'FAIL: ' + '; '.join(ch['failed'])}")
    if fake and not args.no_probe:
        res["probe"] = {"variant": "probe", "cold": {"kiln": {"fwd_s": 0.4, "bwd_s": 1.1},
                                                     "flex": {"fwd_s": 3.0, "bwd_s": 6.0}}}
    elif not args.no_probe and time.time() - t0 <= args.budget_s:
        res["probe"] = run_probe(args, kiln, flex, tmp)
    if kiln:
        kiln.shutdown()
    res["failures"] = failures(res)
    res["wall_s"] = time.time() - t0
    md = markdown(res)
    common.write_results(args.out, "flex_bench", res, md, CSV_FIELDS, csv_records(res))
    print(md)
    for f in res["failures"]:
        log(f"FAILED: {f}")
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
