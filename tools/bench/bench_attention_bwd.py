#!/usr/bin/env python3
"""bench_attention_bwd.py — Kiln's FlashAttention backward against PyTorch SDPA's, on one GPU.

Providers
  kiln            kiln_attention_bwd (lang/lib/attention_bwd.tile), dQ by f32 atomic adds, called
                  through libkiln.so on torch's tensors (tools/bench/kiln_ctypes.py)
  kiln_det        the same with deterministic = 1 (the separate dQ pass)
  sdpa_flash      torch SDPA backward, FLASH_ATTENTION backend (FlashAttention-2)
  sdpa_cudnn      torch SDPA backward, CUDNN_ATTENTION backend
  sdpa_efficient  torch SDPA backward, EFFICIENT_ATTENTION backend (xformers/CUTLASS)
  fa4             FlashAttention-4 (`flash-attn-4`, CuTe DSL; on sm_90 FlashAttention-3's
                  design), flash_attn.cute.interface.flash_attn_func on [b, s, h, d] copies of
                  the same tensors; dropped with a note when the module does not import (how to
                  carry it to the GPU machine: ../shared/DESIGN.md, "The top anchor")

Passes: "bwd" times the backward alone (Kiln: kiln_attention_bwd on the forward's O and
LSE; torch: autograd.grad of one recorded SDPA forward, retain_graph); "fwd_bwd" times a
forward and its backward together (Kiln: kiln_attention_fwd + kiln_attention_bwd).

Shapes as the forward benchmark (bench_attention.py): 16k tokens per batch (batch = 16384 / N),
hidden 2048 (heads = 2048 / d), N in 512..16384, d 64 and 128, causal and not, f16 and bf16,
layout [b, h, s, d]. TFLOP/s with FlashAttention's count: forward 4 * B * H * N^2 * d (halved
when causal), backward 2.5 x that, forward + backward 3.5 x. Every time is the median over
~target_ms of back-to-back calls, each between CUDA events (common.torch_median_ms), the same
harness for every provider.

First, a correctness check of Kiln's gradients on small ragged shapes (GQA, causal with
seqlen_q < seqlen_k) against float64 autograd, by FlashAttention's rule for each of dQ, dK, dV:
max |g - ref| <= 2 x max |g_plain - ref| + 1e-5, g_plain plain PyTorch attention's gradient in
the same dtype; and the deterministic mode bit-identical across two runs.

Output (under --out, default $OUT or ./bench_out): attention_bwd_bench.csv (one line per
shape, provider and pass: what tools/bench/plot_svg.py draws), .json, .md; the markdown
tables are printed last. Kiln's scratch (delta, and the f32 dQ accumulator unless
deterministic: O(N) extra memory) is in the JSON and the table's notes.

  python3 tools/bench/bench_attention_bwd.py --lib build/libkiln.so            # ~5 min
  python3 tools/bench/bench_attention_bwd.py --lib build/libkiln.so --quick    # ~1.5 min
  python3 tools/bench/bench_attention_bwd.py --dry-run                         # no GPU: fake numbers
  python3 tools/bench/bench_attention_bwd.py --quick --schedules 64x128/8/2,64x128/8/2/ws/tma,16x64/4/1
      # also checks and times kiln and kiln_det at each caller schedule BMxBN/warps[/stages][/modes]
      # (the API's block_m, block_n, num_warps, num_stages, schedule): dK/dV gets BN keys walked BM
      # query rows at a time, the deterministic dQ pass BM rows walking BN keys (the table's
      # defaults differ per kernel; a caller's tiles are one pair for all), as providers
      # "kiln@BMxBN/W/S/modes"; modes /ws (warp specialisation), /tma, /ov, /pp, /mb, /sync
      # turn those schedule options on (KilnAttentionBwdParams.schedule); "+BMxBN/W/S" gives the
      # dQ pass tiles of its own (the dq_ fields), as the table's rows do: 64x128/8/2/ws/tma+128x64/8/2.
      # With the caller's tiles kiln (non-deterministic) takes the atomic dQ, kiln_det the dQ pass.
      # A "dA.B:" prefix keeps a candidate to those head dims (checked and timed there only), so
      # one run compares each head dim's own candidates, e.g. FA3's structure with the atomic dQ
      # at d 64 / 128 and with d 256's 64 x 64 tiles:
  python3 tools/bench/bench_attention_bwd.py --quick --head-dims 64,128,256 \
      --schedules d64.128:64x128/8/2/ws/tma/lp,d256:64x64/8/2/ws/tma/lp
On the GPU machine: tools/device_bench_bwd.sh (after tools/device_pack.sh here).
"""
import argparse
import ctypes
import math
import os
import random
import sys
import time

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

TOKENS, HIDDEN = 16384, 2048
PROVIDERS = ["kiln", "kiln_det", "fa4", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
PASSES = ("bwd", "fwd_bwd")
PASS_FACTOR = {"bwd": 2.5, "fwd_bwd": 3.5}      # x the forward's FLOPs (FlashAttention's count)
SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]
QUICK_SEQLENS = [1024, 4096, 16384]
CSV_FIELDS = ["dtype", "d", "causal", "n", "batch", "heads", "provider", "pass", "ms", "tflops", "error"]
# (batch, heads_q, heads_kv, seqlen_q, seqlen_k, d, causal): GQA and MHA, ragged, causal with
# seqlen_q < seqlen_k (bottom-right aligned, as Kiln and the reference both mask)
CHECK_SHAPES = [(2, 8, 2, 777, 1000, 64, True), (2, 4, 4, 1000, 600, 128, False), (1, 4, 1, 333, 333, 128, True)]
CHECK_SHAPES_256 = [(1, 4, 2, 555, 700, 256, True), (1, 2, 2, 300, 300, 256, False)]   # with --head-dims 256


def fwd_flops(b, h, n, d, causal):
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def torch_dtype(name):
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16}[name]


# ---------------------------------------------------------------- Kiln through libkiln.so

class KilnCall:
    """The parameter structs of one problem on torch tensors q, k, v ([b, h, s, d]) and dO:
    O, LSE, dQ, dK, dV and the scratch are allocated here and kept alive with the structs.
    variant: None, or a kiln_ctypes.variant() (bench_flex.py), kept alive here too."""

    def __init__(self, kiln, q, k, v, dout, causal, deterministic, variant=None, schedule=None):
        import torch
        import kiln_ctypes
        self.kiln = kiln
        b, h, n, d = q.shape
        self.o, self.dq = torch.empty_like(q), torch.empty_like(q)
        self.dk, self.dv = torch.empty_like(k), torch.empty_like(v)
        self.lse = torch.empty(b, h, n, device=q.device, dtype=torch.float32)
        p = kiln.new("KilnAttentionBwdParams", deterministic=int(deterministic))
        if schedule:   # (block_m, block_n, num_warps, num_stages, modes, dq): parse_schedule's
            p.block_m, p.block_n, p.num_warps, p.num_stages = schedule[:4]
            for field in schedule[4]:
                setattr(p.schedule, field, 1)
            if schedule[5]:   # the dQ pass's own tiles
                p.dq_block_m, p.dq_block_n, p.dq_num_warps, p.dq_num_stages = schedule[5]
        f = p.fwd
        f.dtype = kiln_ctypes.KILN_BF16 if q.dtype == torch.bfloat16 else kiln_ctypes.KILN_F16
        f.batch, f.heads_q, f.heads_kv = b, h, k.shape[1]
        f.seqlen_q, f.seqlen_k, f.head_dim = n, k.shape[2], d
        f.softmax_scale, f.causal = 1 / math.sqrt(d), int(bool(causal))
        for name, t in (("q", q), ("k", k), ("v", v), ("o", self.o)):
            setattr(f, name, t.data_ptr())
            getattr(f, name + "_stride")[:] = t.stride()[:3]
        f.lse = self.lse.data_ptr()
        f.variant = ctypes.addressof(variant) if variant is not None else None
        for name, t in (("dout", dout), ("dq", self.dq), ("dk", self.dk), ("dv", self.dv)):
            setattr(p, name, t.data_ptr())
            getattr(p, name + "_stride")[:] = t.stride()[:3]
        self.scratch_bytes = kiln.fn.kiln_attention_bwd_scratch_size(ctypes.byref(p))
        self.scratch = torch.empty(max(self.scratch_bytes, 16), device=q.device, dtype=torch.uint8)
        p.scratch = self.scratch.data_ptr()
        p.scratch_size = self.scratch_bytes
        self.p = p
        self.keep = (q, k, v, dout, variant)

    def fwd(self):
        self.kiln.attention_fwd(self.p.fwd)

    def bwd(self):
        self.kiln.attention_bwd(self.p)

    def fwd_bwd(self):
        self.kiln.attention_fwd(self.p.fwd)
        self.kiln.attention_bwd(self.p)


# ---------------------------------------------------------------- torch

def sdpa(provider, q, k, v, causal, scale):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[provider]
    with sdpa_kernel([backend]):   # the backward recorded by this forward is the backend's
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def torch_fns(provider, q, k, v, dout, causal):
    """(backward alone, forward + backward) callables of one SDPA backend."""
    import torch
    scale = 1 / math.sqrt(q.shape[-1])
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = sdpa(provider, q, k, v, causal, scale)

    def bwd():
        return torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)

    def fwd_bwd():
        return torch.autograd.grad(sdpa(provider, q, k, v, causal, scale), (q, k, v), dout)
    return {"bwd": bwd, "fwd_bwd": fwd_bwd}


def fa4_fns(q, k, v, dout, causal):
    """(backward alone, forward + backward) callables of FlashAttention-4 on [b, s, h, d] copies."""
    import torch
    from flash_attn.cute.interface import flash_attn_func
    qb, kb, vb = (t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
    db = dout.transpose(1, 2).contiguous()

    def fwd():
        o = flash_attn_func(qb, kb, vb, causal=bool(causal))
        return o[0] if isinstance(o, tuple) else o
    out = fwd()

    def bwd():
        return torch.autograd.grad(out, (qb, kb, vb), db, retain_graph=True)

    def fwd_bwd():
        return torch.autograd.grad(fwd(), (qb, kb, vb), db)
    return {"bwd": bwd, "fwd_bwd": fwd_bwd}


def classify(exc):
    import torch
    text = str(exc)
    return "oom" if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text else "fail"


def naive_attention(q, k, v, causal, scale):
    """Plain attention (materialises N x N); GQA by repeating K/V heads; bottom-right causal."""
    import torch
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


# ---------------------------------------------------------------- the gradient check

def kiln_check(kiln, dtype, shape, schedule=None):
    """Kiln's dQ, dK, dV (both modes) against float64 autograd, FlashAttention's rule; at the
    caller's schedule (parse_schedule's tuple) when given, else the runtime's."""
    import torch
    b, hq, hk, nq, nk, d, causal = shape
    g = torch.Generator(device="cuda").manual_seed(1234 + nq)
    tdt = torch_dtype(dtype)

    def rnd(*s):
        return torch.randn(*s, device="cuda", dtype=tdt, generator=g)
    q, k, v, dout = rnd(b, hq, nq, d), rnd(b, hk, nk, d), rnd(b, hk, nk, d), rnd(b, hq, nq, d)
    scale = 1 / math.sqrt(d)

    def grads(dt):
        x = [t.detach().to(dt).requires_grad_() for t in (q, k, v)]
        return torch.autograd.grad(naive_attention(*x, causal, scale), x, dout.to(dt))
    ref, plain = grads(torch.float64), grads(tdt)
    res = {"dtype": dtype, "shape": [b, hq, hk, nq, nk, d], "causal": causal, "ok": True, "schedule": schedule}
    for det in (0, 1):
        call = KilnCall(kiln, q, k, v, dout, causal, det, schedule=schedule)
        outs = []
        for _ in range(1 + det):   # the deterministic mode runs twice: bit-identical?
            for t in (call.dq, call.dk, call.dv, call.o, call.lse):
                t.fill_(float("nan"))
            call.fwd_bwd()
            torch.cuda.synchronize()
            outs.append([t.clone() for t in (call.dq, call.dk, call.dv)])
        mode = "det" if det else "atomic"
        for name, x, r, pl in zip(("dq", "dk", "dv"), outs[0], ref, plain):
            err = (x.double() - r).abs().max().item()
            bound = 2 * (pl.double() - r).abs().max().item() + 1e-5
            res[f"{mode}_{name}_err"], res[f"{mode}_{name}_bound"] = err, bound
            res["ok"] &= math.isfinite(err) and err <= bound
        if det:
            same = all(torch.equal(a, c) for a, c in zip(outs[0], outs[1]))
            res["det_bit_identical"] = same
            res["ok"] &= same
    return res


# ---------------------------------------------------------------- timing one shape

# schedule modes (bench_attention.py's names) -> KilnSchedule fields of KilnAttentionBwdParams.schedule
SCHED_MODES = {"sync": "no_wgmma", "pp": "pingpong", "mb": "mbarrier", "ov": "overlap", "tma": "tma",
               "ws": "warp_specialize", "lp": "lean_producer"}


def schedule_head_dims(text):
    """A candidate's "dA.B:" prefix -> ({A, B}, the rest); without one: (None, text) (every head dim)."""
    head, sep, rest = text.partition(":")
    if not sep:
        return None, text
    try:
        if not head.startswith("d"):
            raise ValueError(head)
        return {int(x) for x in head[1:].split(".")}, rest
    except ValueError:
        raise SystemExit(f"bad schedule {text!r}: the head-dim prefix is dA[.B...]:, e.g. d256:64x64/8/2/ws/tma")


def schedule_fits(text, d):
    """Whether the candidate `text` (a provider's part after "@", or None: the table's) runs at head dim d."""
    dims = schedule_head_dims(text)[0] if text else None
    return dims is None or d in dims


def parse_schedule(text):
    """"[dA.B:]BMxBN/W[/S][/MODE...][+BMxBN/W[/S]]" -> (block_m, block_n, num_warps, num_stages, (field, ...),
    dq) with dq None or the dQ pass's own (block_m, block_n, num_warps, num_stages) (the API's dq_
    fields); num_stages 0: the runtime's; MODE one of SCHED_MODES (as bench_attention.py's: /ws warp
    specialisation, /tma TMA copies, /ov, /pp, /mb, /sync), each turning that schedule option on for
    the dK/dV and dQ kernels (modes after the "+" too). E.g. 64x128/8/2/ws/tma+128x64/8/2:
    FlashAttention-3's dK/dV structure, the dQ pass at 128 x 64 on 8 warps, both warp-specialised.
    The head-dim prefix (schedule_head_dims) is dropped here."""
    text = schedule_head_dims(text)[1]
    main, _, dq = text.partition("+")
    if dq:
        a, b = parse_schedule(main), parse_schedule(dq)
        return a[:4] + (tuple(dict.fromkeys(a[4] + b[4])), b[:4])
    tiles, _, rest = text.partition("/")
    bm, _, bn = tiles.partition("x")
    parts = rest.split("/") if rest else []
    modes = []
    while parts and parts[-1] in SCHED_MODES:
        modes.insert(0, SCHED_MODES[parts.pop()])
    try:
        if len(parts) > 2:
            raise ValueError(parts)
        return (int(bm), int(bn), int(parts[0]) if parts else 0, int(parts[1]) if len(parts) > 1 else 0,
                tuple(modes), None)
    except ValueError:
        raise SystemExit(f"bad schedule {text!r}: expected BMxBN/warps[/stages][/ws|/lp|/tma|/ov|/pp|/mb|/sync...]"
                         "[+BMxBN/warps[/stages]], e.g. 64x128/8/2/ws/tma+128x64/8/2")


def provider_schedule(p):
    """A Kiln provider's caller schedule ("kiln@64x128/8/2"), or None for the runtime's table."""
    return parse_schedule(p.split("@", 1)[1]) if "@" in p else None


def run_shape(args, kiln, dtype, d, causal, n, providers, fake):
    """{provider: {pass: {"ms", "tflops"} | {"error"}}} and Kiln's scratch bytes."""
    b, h = max(TOKENS // n, 1), HIDDEN // d
    flops = fwd_flops(b, h, n, d, causal)
    out, scratch = {}, {}
    if fake:
        for p in providers:
            out[p] = {ps: fake.time(p, ps, flops) for ps in PASSES} if schedule_fits(p.partition("@")[2] or None, d) else {}
        scratch = {"kiln": b * h * n * (4 + 4 * d), "kiln_det": b * h * n * 4}
        return out, scratch
    import torch
    g = torch.Generator(device="cuda").manual_seed(n + d)
    q, k, v, dout = (torch.randn(b, h, n, d, device="cuda", dtype=torch_dtype(dtype), generator=g)
                     for _ in range(4))
    for p in providers:
        out[p] = {}
        if not schedule_fits(p.partition("@")[2] or None, d):
            continue   # a candidate of other head dims: not run ("—")
        try:
            if p.startswith("kiln"):
                call = KilnCall(kiln, q, k, v, dout, causal, p.startswith("kiln_det"),
                                schedule=provider_schedule(p))
                call.fwd()                 # O and LSE for the backward alone
                scratch[p] = call.scratch_bytes
                fns = {"bwd": call.bwd, "fwd_bwd": call.fwd_bwd}
            elif p == "fa4":
                fns = fa4_fns(q, k, v, dout, causal)
            else:
                fns = torch_fns(p, q, k, v, dout, causal)
            for ps in PASSES:
                ms = common.torch_median_ms(fns[ps], args.target_ms)
                out[p][ps] = {"ms": ms, "tflops": PASS_FACTOR[ps] * flops / (ms * 1e-3) / 1e12}
        except Exception as exc:  # a provider that cannot run a shape must not stop the run
            log(f"  {p} {dtype} d={d} causal={causal} N={n}: {type(exc).__name__}: {str(exc)[:300]}")
            err = classify(exc)
            for ps in PASSES:
                out[p].setdefault(ps, {"error": err})
        finally:
            fns = call = None
            torch.cuda.empty_cache()
    return out, scratch


class Faker:
    """--dry-run: plausible TFLOP/s per provider (no GPU), so the tables and the CSV can be
    checked anywhere."""
    BASE = {"kiln": 260, "kiln_det": 230, "fa4": 560, "sdpa_flash": 270, "sdpa_cudnn": 450, "sdpa_efficient": 160}

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def time(self, provider, ps, flops):
        t = self.BASE.get(provider, 100) * (1.1 if ps == "fwd_bwd" else 1.0) * self.rng.uniform(0.85, 1.1)
        return {"ms": PASS_FACTOR[ps] * flops / (t * 1e12) * 1e3, "tflops": t}


# ---------------------------------------------------------------- report

cell = common.tflops_cell      # a result as a table cell
ratio = common.tflops_ratio    # kiln / peer


SHORT = {"kiln": "kiln", "kiln_det": "kiln det", "fa4": "FA4", "sdpa_flash": "FA2", "sdpa_cudnn": "cuDNN",
         "sdpa_efficient": "efficient"}


def markdown(res):
    providers = res["providers"]
    peers = [p for p in ("fa4", "sdpa_flash", "sdpa_cudnn") if p in providers]
    lines = [f"Attention backward, TFLOP/s ({res['device']}; {TOKENS} tokens per batch, hidden {HIDDEN}, "
             "[b, h, s, d]; backward = 2.5 x the forward's FLOPs, forward+backward = 3.5 x; causal halves)", ""]
    head = ["dtype", "causal", "d", "N"] + [SHORT.get(p, p) for p in providers]
    if "kiln" in providers:
        head += [f"kiln/{SHORT[p]}" for p in peers]
    head += [f"f+b {SHORT[p]}" for p in providers if p in ("kiln", "fa4", "sdpa_flash", "sdpa_cudnn")]
    if "kiln" in providers and peers:
        head += [f"f+b kiln/{SHORT[peers[0]]}"]
    rows = []
    for row in res["rows"]:
        r = row["results"]
        cells = [row["dtype"], "yes" if row["causal"] else "no", str(row["d"]), str(row["n"])]
        cells += [cell(r.get(p, {}).get("bwd")) for p in providers]
        if "kiln" in providers:
            cells += [ratio(r["kiln"].get("bwd"), r[p].get("bwd")) for p in peers]
        cells += [cell(r.get(p, {}).get("fwd_bwd")) for p in providers if p in ("kiln", "fa4", "sdpa_flash", "sdpa_cudnn")]
        if "kiln" in providers and peers:
            cells += [ratio(r["kiln"].get("fwd_bwd"), r[peers[0]].get("fwd_bwd"))]
        rows.append(cells)
    lines.append(common.markdown_table(head, rows, align="llrr" + "r" * (len(head) - 4)))
    sc = [row for row in res["rows"] if row.get("scratch")]
    if sc:
        big = max(sc, key=lambda row: (row["n"], row["d"]))
        parts = ", ".join(f"{SHORT.get(p, p)} {v / 2**20:.1f} MiB" for p, v in big["scratch"].items())
        lines += ["", f"Kiln's scratch at N = {big['n']}, d = {big['d']} (batch {TOKENS // big['n'] or 1}): {parts} "
                  "(delta = rowsum(dO * O) in f32, plus the f32 dQ accumulator unless deterministic: O(N))."]
    if res.get("checks"):
        lines += ["", "Kiln's gradients vs float64 autograd (rule: max err <= 2 x plain PyTorch attention's err in "
                  "the dtype + 1e-5; deterministic mode run twice):", ""]
        for ch in res["checks"]:
            if "atomic_dq_err" in ch:
                errs = ", ".join(f"{m} {g} {ch[f'{m}_{g}_err']:.2e} (bound {ch[f'{m}_{g}_bound']:.2e})"
                                 for m in ("atomic", "det") for g in ("dq", "dk", "dv"))
                lines.append(f"- {ch['dtype']} [b, hq, hkv, sq, sk, d] = {ch['shape']} causal={ch['causal']}: "
                             f"{'PASS' if ch['ok'] else 'FAIL'}; {errs}; deterministic bit-identical: "
                             f"{ch.get('det_bit_identical')}")
            else:
                lines.append(f"- {ch.get('dtype')} {ch.get('shape')}: {'PASS' if ch.get('ok') else 'FAIL'} "
                             f"({ch.get('error', 'fake' if ch.get('fake') else '')})")
    if res.get("skipped"):
        lines += ["", f"{res['skipped']} shapes not run: the --budget-s of {res['args']['budget_s']:.0f} s ran out."]
    return "\n".join(lines) + "\n"


def csv_records(res):
    """One record per shape, provider and pass (CSV_FIELDS)."""
    for row in res["rows"]:
        for p, by_pass in row["results"].items():
            for ps, r in by_pass.items():
                yield dict({k: row[k] for k in ("dtype", "d", "causal", "n", "batch", "heads")},
                           provider=p, **{"pass": ps}, ms=r.get("ms"), tflops=r.get("tflops"), error=r.get("error"))


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=None, help="libkiln.so or libkiln_all.so (default: $KILN_LIB, else the "
                                                "newest build*/libkiln*.so, else one on $LD_LIBRARY_PATH)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    ap.add_argument("--quick", action="store_true", help=f"f16, N in {QUICK_SEQLENS}, shorter measurements")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--dtypes", default=None, help="f16,bf16 (default both; --quick: f16)")
    ap.add_argument("--seqlens", default=None, help="comma list (default 512..16384)")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--target-ms", type=float, default=None, help="measurement length per time (default 40; "
                                                                   "--quick 20)")
    ap.add_argument("--budget-s", type=float, default=400.0,
                    help="wall-clock budget: shapes not started by then are reported as not run")
    ap.add_argument("--schedules", default="", help="comma list of BMxBN/warps[/stages][/ws/tma/ov/pp/mb/sync]"
                                                     "[+BMxBN/warps[/stages] for the dQ pass]: "
                                                     "kiln and kiln_det are also checked and timed at each "
                                                     "(providers kiln@..., kiln_det@...)")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--dry-run", action="store_true", help="no GPU, no torch: fake timings, real tables and CSV")
    ap.add_argument("--seed", type=int, default=0, help="--dry-run: seed of the fake numbers")
    args = ap.parse_args()
    providers = [p for p in args.providers.split(",") if p]
    bad = [p for p in providers if p not in PROVIDERS]
    if bad:
        raise SystemExit(f"unknown provider(s) {bad}: expected some of {PROVIDERS}")
    for sch in (x for x in args.schedules.split(",") if x):
        parse_schedule(sch)
        providers += [f"{p}@{sch}" for p in ("kiln", "kiln_det") if p in providers]
    dtypes = (args.dtypes or ("f16" if args.quick else "f16,bf16")).split(",")
    ns = [int(x) for x in args.seqlens.split(",")] if args.seqlens else (QUICK_SEQLENS if args.quick else SEQLENS)
    ds = [int(x) for x in args.head_dims.split(",")]
    args.target_ms = args.target_ms or (20.0 if args.quick else 40.0)
    fake = Faker(args.seed) if args.dry_run else None
    t0 = time.time()
    kiln = None
    if not fake:
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("no GPU (torch.cuda.is_available() is false); --dry-run checks the script")
        torch.zeros(1, device="cuda")            # the primary context, before Kiln retains it too
        if "fa4" in providers:
            try:
                import flash_attn.cute.interface  # noqa: F401
            except Exception as exc:  # not installed here: the run goes on without it
                log(f"fa4 dropped: {type(exc).__name__}: {str(exc)[:200]}")
                providers.remove("fa4")
        if any(p.startswith("kiln") for p in providers):
            import kiln_ctypes
            kiln = kiln_ctypes.Kiln(args.lib)
            kiln.init()
            log(f"kiln {kiln.fn.kiln_version().decode()} from {kiln.path}")
    res = {"device": "dry run (fake numbers)" if fake else common.gpu_name(), "providers": providers,
           "rows": [], "args": vars(args), "dry_run": bool(fake)}
    if not fake:
        import torch
        res["torch"] = torch.__version__

    if kiln and not args.no_check:
        res["checks"] = []
        scheds = [None] + [x for x in args.schedules.split(",") if x]   # the runtime's, then each candidate
        shapes = CHECK_SHAPES + (CHECK_SHAPES_256 if 256 in ds else [])
        for dt in dtypes:
            for sch in scheds:
                for shape in (s for s in shapes if schedule_fits(sch, s[5])):
                    try:
                        res["checks"].append(kiln_check(kiln, dt, shape, parse_schedule(sch) if sch else None))
                    except Exception as exc:
                        res["checks"].append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300],
                                              "dtype": dt, "shape": list(shape), "schedule": sch})
                    log(f"check {dt} {shape}{' @' + sch if sch else ''}: "
                        f"{'PASS' if res['checks'][-1]['ok'] else 'FAIL'}")
    elif fake and not args.no_check:
        res["checks"] = [{"ok": True, "fake": True, "dtype": dt, "shape": list(s)} for dt in dtypes
                         for s in CHECK_SHAPES]

    skipped = 0
    for dt in dtypes:
        for d in ds:
            for causal in (False, True):
                for n in ns:
                    row = {"dtype": dt, "d": d, "causal": causal, "n": n, "batch": max(TOKENS // n, 1),
                           "heads": HIDDEN // d}
                    if time.time() - t0 > args.budget_s:
                        skipped += 1
                        row["results"] = {p: {ps: {"error": "budget"} for ps in PASSES} for p in providers}
                    else:
                        row["results"], row["scratch"] = run_shape(args, kiln, dt, d, causal, n, providers, fake)
                        log(f"{dt} d={d} causal={causal} N={n}: bwd " +
                            ", ".join(f"{p} {cell(row['results'][p].get('bwd'))}" for p in providers))
                    res["rows"].append(row)
    res["skipped"] = skipped
    res["wall_s"] = time.time() - t0
    if kiln:
        kiln.shutdown()
    md = markdown(res)
    common.write_results(args.out, "attention_bwd_bench", res, md, CSV_FIELDS, csv_records(res))
    print(md)
    failed = [c for c in res.get("checks", []) if not c.get("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
