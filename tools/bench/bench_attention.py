#!/usr/bin/env python3
"""bench_attention.py — Kiln's FlashAttention forward against its peers, on one GPU.

Providers
  kiln            lang/lib/attention_fwd.tile through kiln-bench-attn (tools/bench/kiln_bench_attn.c,
                  C, runtime API; CMake builds it)
  sdpa_flash      torch SDPA, FLASH_ATTENTION backend (FlashAttention-2)
  sdpa_cudnn      torch SDPA, CUDNN_ATTENTION backend
  sdpa_efficient  torch SDPA, EFFICIENT_ATTENTION backend (xformers/CUTLASS)
  naive           torch matmul -> softmax -> matmul (materialises N x N)

Shapes: 16k tokens per batch (batch = 16384 / N), hidden 2048 (heads = 2048 / d),
N in 512..16384, d in 64, 128, causal and not, fp16 and bf16; layout [b, h, s, d].
TFLOP/s = 4 * B * H * N^2 * D / time (halved when causal), FlashAttention's convention.
Each time is the median over ~50 ms of back-to-back launches, each between CUDA events.

Also: a correctness check of Kiln's O and LSE on ragged shapes against a float64
reference (FlashAttention's rule: error <= 2 x plain-attention-in-dtype error + 1e-5);
peak extra memory at N = 32768 (torch.cuda.max_memory_allocated for torch; for Kiln the
runtime's allocations beyond Q, K, V); Kiln compile time, source -> PTX (no cache) and
the on-disk cache hit path (median of 5).

Output (under --out, default $OUT or ./bench_out): attention_bench.json, attention_bench.md,
attention_bench.csv (one line per shape and provider: tools/bench/plot_svg.py draws it),
attention_bench.png (with matplotlib); the markdown table is printed last. A provider that fails on a shape
shows "fail" (or "oom") and the run goes on.

  cmake --build build --target kiln-bench-attn
  python3 tools/bench/bench_attention.py --kiln-bin build/kiln-bench-attn            # ~5 min
  python3 tools/bench/bench_attention.py --kiln-bin build/kiln-bench-attn --quick    # ~1 min
  KILN_LIBRARY=$PWD/build/libkiln.so python3 tools/bench/bench_attention.py --fp8 --quick   # FP8 (fp8_main)
(on a GPU machine: tools/device_pack.sh here, then tools/device_run.sh there.)
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ROOT, log  # noqa: E402
TOKENS, HIDDEN = 16384, 2048
PROVIDERS = ["kiln", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "naive"]
DTYPES = ("f16", "bf16")


def torch_dtype(name):
    """torch is imported only where a GPU run needs it, so --dry-run works without it."""
    import torch
    return {"f16": torch.float16, "bf16": torch.bfloat16}[name]


# ---------------------------------------------------------------- timing

bench_ms = common.torch_median_ms  # median over ~target_ms of launches, each between CUDA events


def flops(b, h, n, d, causal):
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


# ---------------------------------------------------------------- torch providers

def naive_attention(q, k, v, causal, scale):
    import torch
    s = torch.matmul(q, k.transpose(-2, -1)) * scale
    if causal:
        n, m = s.shape[-2], s.shape[-1]
        # bottom-right aligned, like the Kiln program (the same as top-left for n == m)
        mask = torch.ones(n, m, dtype=torch.bool, device=q.device).tril(m - n)
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def torch_fn(provider, q, k, v, causal, scale):
    if provider == "naive":
        return lambda: naive_attention(q, k, v, causal, scale)
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
               "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION}[provider]

    def run():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return run


def make_qkv(b, h, n, d, dtype, seed=0):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=g) for _ in range(3)]


def classify(exc):
    import torch
    text = str(exc)
    return "oom" if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in text else "fail"


def run_torch(provider, dtype, n, d, causal, target_ms):
    b, h = max(TOKENS // n, 1), HIDDEN // d
    try:
        q, k, v = make_qkv(b, h, n, d, torch_dtype(dtype))
        ms = bench_ms(torch_fn(provider, q, k, v, causal, 1 / math.sqrt(d)), target_ms)
        return {"ms": ms, "tflops": flops(b, h, n, d, causal) / (ms * 1e-3) / 1e12}
    except Exception as exc:  # a provider that cannot run a shape must not stop the run
        log(f"  {provider} {dtype} d={d} causal={causal} N={n}: {type(exc).__name__}: {str(exc)[:200]}")
        return {"error": classify(exc)}
    finally:
        import torch
        torch.cuda.empty_cache()


def torch_peak_extra(provider, dtype, n, d):
    """Bytes allocated beyond Q, K, V during one forward (includes the output)."""
    import torch
    try:
        q, k, v = make_qkv(1, HIDDEN // d, n, d, torch_dtype(dtype))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = torch_fn(provider, q, k, v, False, 1 / math.sqrt(d))()
        torch.cuda.synchronize()
        del out
        return {"extra_bytes": torch.cuda.max_memory_allocated() - base}
    except Exception as exc:
        return {"error": classify(exc), "detail": str(exc)[:200]}
    finally:
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- kiln provider

def kiln_cmd(args, dtype, d, causal, extra, sched=None, n=4096):
    """The C driver's command line; `sched` (BLOCK_M, BLOCK_N, warps, stages) overrides
    --block-m/--block-n/--warps/--stages (warps or stages 0: the program's own rule)."""
    mode = sched
    if sched is None:  # the runtime's defaults for this shape (k_tune in jit/attention_tune.c), or the flags
        mode = api_sched(d, causal, n)
        bm, bn, warps, stages = mode[:4]
        bm, bn = args.block_m or bm, args.block_n or bn
        warps, stages = args.warps or warps, args.stages or stages
    else:
        bm, bn, warps, stages = sched[:4]
    cmd = [args.kiln_bin, "--src", args.src, "--dtype", dtype, "--head-dim", str(d),
           "--heads", str(HIDDEN // d), "--layout", "bhsd", "--block-m", str(bm), "--block-n", str(bn)]
    if warps:
        cmd += ["--warps", str(warps)]
    if stages:
        cmd += ["--stages", str(stages)]
    if causal:
        cmd.append("--causal")
    return cmd + mode_flags(mode) + extra


def mode_flags(sched):
    """The kiln_bench_attn / kiln compile flags of a schedule's mode suffixes."""
    flags = []
    for mode in (sched[4:] if sched is not None else ()):
        if mode == "sync":
            flags.append("--no-wgmma")          # mma.sync even where sm_90a's wgmma applies
        if mode in ("pp", "ppmb"):
            flags.append("--pingpong")          # warpgroup ping-pong (8 warps, sm_90a)
        if mode in ("mb", "ppmb"):
            flags.append("--mbarrier")          # mbarrier stage hand-off (no bar.sync per key block)
        if mode == "ov":
            flags.append("--overlap")           # the next block's Q K^T in flight during the softmax (sm_90a)
        if mode == "tma":
            flags.append("--tma")               # TMA copies of K/V (implies the mbarrier hand-off; sm_90a)
        if mode == "ws":
            flags.append("--warp-specialize")   # a producer warpgroup issues the K/V copies (sm_90a)
        if mode == "lp":
            flags.append("--lean-producer")     # a TMA-only producer at 24 registers, consumers 240 (implies ws, tma)
        if mode == "ps":
            flags.append("--persistent")        # resident programs loop over the tiles (static scheduler)
        if mode == "lf":
            flags.append("--longest-first")     # persistent, heavy (last) query blocks first (implies ps)
    return flags


def run_kiln_process(cmd, timeout, env=None):
    """Run the C binary; returns its JSON lines (errors included) or one error record."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        stdout, stderr, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as exc:
        # keep the shapes that finished before the limit
        out = exc.stdout or ""
        stdout = out.decode(errors="replace") if isinstance(out, bytes) else out
        stdout += '\n{"error": "timeout"}'
        stderr, rc = "", -1
    except OSError as exc:
        return [{"error": f"cannot run {cmd[0]}: {exc}"}]
    recs = common.json_lines(stdout)
    if rc != 0 or any("error" in r for r in recs):
        log("  kiln: " + " ".join(cmd))
        for r in recs:
            if "error" in r:
                log("    " + r["error"][:400])
        if stderr.strip():
            log("    stderr: " + stderr.strip()[-1500:])
    if not recs:
        recs = [{"error": f"exit {rc}"}]
    return recs


def run_kiln(args, dtype, d, causal, ns, target_ms):
    """One process per schedule the runtime would pick (k_tune depends on N for some shapes)."""
    groups = {}
    for n in ns:
        groups.setdefault(kiln_cmd_key(args, d, causal, n), []).append(n)
    out = {}
    for group in groups.values():
        recs = run_kiln_process(kiln_cmd(args, dtype, d, causal, [
            "--tokens", str(TOKENS), "--seqlens", ",".join(map(str, group)), "--min-ms", str(target_ms)],
            n=group[0]), timeout=args.kiln_timeout)
        by_n = {r["seqlen"]: r for r in recs if "seqlen" in r and "error" not in r}
        err = next((r["error"] for r in recs if "error" in r), "fail")
        out.update({n: by_n.get(n, {"error": "fail" if "timeout" not in err else "timeout"}) for n in group})
    return out


def kiln_cmd_key(args, d, causal, n):
    """What of kiln_cmd depends on N: the runtime's schedule, unless the flags fix it."""
    return tuple(kiln_cmd(args, "f16", d, causal, [], n=n))


def kiln_check(args, dtype, d, causal, n_q, n_k, b=2, h=4, sched=None):
    """Kiln's O/LSE on a ragged shape against float64 torch, with FlashAttention's rule."""
    import torch
    tdt = torch_dtype(dtype)
    q, k, v = make_qkv(b, h, max(n_q, n_k), d, tdt, seed=7)
    q, k, v = q[:, :, :n_q].contiguous(), k[:, :, :n_k].contiguous(), v[:, :, :n_k].contiguous()
    scale = 1 / math.sqrt(d)
    with tempfile.TemporaryDirectory() as tmp:
        for name, t in (("q", q), ("k", k), ("v", v)):
            t.view(torch.int16).cpu().numpy().tofile(os.path.join(tmp, name + ".bin"))
        recs = run_kiln_process(kiln_cmd(args, dtype, d, causal, [
            "--batch", str(b), "--heads", str(h), "--seqlens", str(n_q), "--seqlen-k", str(n_k),
            "--in", tmp, "--out", tmp, "--min-ms", "1"], sched, n=n_q), timeout=120)
        if not recs or "error" in recs[-1]:
            return {"ok": False, "error": recs[-1].get("error", "fail") if recs else "fail"}
        import numpy as np
        o = torch.from_numpy(np.fromfile(os.path.join(tmp, "o.bin"), dtype=np.int16)).view(tdt)
        lse = torch.from_numpy(np.fromfile(os.path.join(tmp, "lse.bin"), dtype=np.float32))
    o = o.view(b, h, n_q, d).cuda().double()
    lse = lse.view(b, h, n_q).cuda().double()
    s = torch.matmul(q.double(), k.double().transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool, device="cuda").tril(n_k - n_q),
                          float("-inf"))
    ref_lse = torch.logsumexp(s, dim=-1)
    visible = torch.isfinite(ref_lse)
    ref = torch.nan_to_num(torch.softmax(s, dim=-1)) @ v.double()
    plain = naive_attention(q, k, v, causal, scale).double()
    vis = visible[..., None].expand_as(ref)
    err = (o - ref).abs()[vis].max().item() if vis.any() else 0.0
    perr = (plain - ref).abs()[vis].max().item() if vis.any() else 0.0
    lse_err = ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1))[visible].max().item()
    empty_ok = bool((o[~visible] == 0).all()) and bool(torch.isneginf(lse[~visible]).all())
    ok = (math.isfinite(err) and err <= 2 * perr + 1e-5 and lse_err <= 1e-4 and empty_ok)
    return {"ok": ok, "max_err": err, "plain_err": perr, "lse_rel_err": lse_err, "empty_rows_ok": empty_ok,
            "shape": [b, h, n_q, n_k, d], "causal": causal, "dtype": dtype}


def kiln_compile_times(args):
    """Source -> PTX (kiln_compile, no cache) and the runtime's cache-hit path."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache)
        env.pop("KILN_CACHE_DISABLE", None)
        recs = run_kiln_process(kiln_cmd(args, "f16", 128, False, [
            "--tokens", str(TOKENS), "--seqlens", "1024", "--min-ms", "1", "--compile-bench", "5"]),
            timeout=300, env=env)
    out = next((r for r in recs if r.get("compile")), {"error": "fail"})
    if args.kiln_cli and os.path.exists(args.kiln_cli):
        env = dict(os.environ, KILN_CACHE_DISABLE="1")
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            p = subprocess.run([args.kiln_cli, "compile", args.src, "-k", "attn_fwd_f16", "-D", "HEAD_DIM=128",
                                "--emit", "ptx"], capture_output=True, env=env)
            times.append((time.perf_counter() - t0) * 1e3)
            if p.returncode != 0:
                times = None
                break
        out["cli_compile_ptx_ms"] = statistics.median(times) if times else "fail"
    return out


# ---------------------------------------------------------------- report

cell = common.tflops_cell      # a result as a table cell
ratio = common.tflops_ratio    # kiln / peer


def gib(x):
    return f"{x / 2**30:.2f} GiB" if x >= 2**30 else f"{x / 2**20:.1f} MiB"


def markdown(res, providers):
    peers = [p for p in providers if p != "kiln"]
    lines = [f"Attention forward, TFLOP/s ({res['device']}; {TOKENS} tokens per batch, hidden {HIDDEN}, "
             "layout [b, h, s, d]; kiln/peer = ratio)", ""]
    head = ["dtype", "causal", "d", "N"] + providers + (["kiln/" + p for p in peers] if "kiln" in providers else [])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for row in res["rows"]:
        cells = [row["dtype"], "yes" if row["causal"] else "no", str(row["d"]), str(row["n"])]
        cells += [cell(row["results"].get(p)) for p in providers]
        if "kiln" in providers:
            cells += [ratio(row["results"].get("kiln"), row["results"].get(p)) for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    if res.get("memory"):
        lines += ["", f"Peak extra memory, one forward at N = {res['memory_n']} (batch 1, hidden {HIDDEN}, "
                  "fp16, not causal; beyond Q, K, V):", "", "| d | provider | extra |", "|---|---|---|"]
        for m in res["memory"]:
            v = m["result"]
            lines.append(f"| {m['d']} | {m['provider']} | "
                         f"{gib(v['extra_bytes']) if 'extra_bytes' in v else v.get('error', 'fail')} |")
    c = res.get("compile")
    if c:
        lines += ["", "Kiln compile time of the forward program (f16, d = 128), median of 5:", ""]
        if "error" in c:
            lines.append(f"- fail ({c['error']})")
        else:
            lines.append(f"- source -> PTX (kiln_compile, no cache): {c['compile_ptx_ms']:.1f} ms")
            lines.append(f"- cache hit (kiln_module_compile, incl. module load): {c['cache_hit_ms']:.2f} ms")
            if "cli_compile_ptx_ms" in c:
                v = c["cli_compile_ptx_ms"]
                lines.append(f"- `kiln compile --emit ptx` process, KILN_CACHE_DISABLE=1: "
                             f"{v if isinstance(v, str) else f'{v:.1f} ms'}")
    if res.get("checks"):
        lines += ["", "Kiln correctness (ragged shapes vs float64; rule: err <= 2 x plain-dtype err + 1e-5):", ""]
        for ch in res["checks"]:
            if "max_err" in ch:
                lines.append(f"- {ch['dtype']} shape {ch['shape']} causal={ch['causal']}: "
                             f"{'PASS' if ch['ok'] else 'FAIL'} (err {ch['max_err']:.2e}, plain {ch['plain_err']:.2e}, "
                             f"LSE rel {ch['lse_rel_err']:.1e}, empty rows ok: {ch['empty_rows_ok']})")
            else:
                lines.append(f"- {ch.get('dtype')} {ch.get('shape')}: FAIL ({ch.get('error')})")
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["dtype", "d", "causal", "n", "batch", "heads", "provider", "ms", "tflops", "error"]


def csv_records(res):
    """One record per shape and provider (CSV_FIELDS): what tools/bench/plot_svg.py draws."""
    for row in res["rows"]:
        for p, r in row["results"].items():
            yield {"dtype": row["dtype"], "d": row["d"], "causal": row["causal"], "n": row["n"],
                   "batch": max(TOKENS // row["n"], 1), "heads": HIDDEN // row["d"], "provider": p,
                   "ms": r.get("ms"), "tflops": r.get("tflops"), "error": r.get("error")}


def plot(res, providers, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:
        log(f"no plot: {exc}")
        return
    dtypes = sorted({r["dtype"] for r in res["rows"]})
    panels = sorted({(r["d"], r["causal"]) for r in res["rows"]})
    fig, axes = plt.subplots(len(dtypes), len(panels), figsize=(4.2 * len(panels), 3.4 * len(dtypes)),
                             squeeze=False)
    for i, dt in enumerate(dtypes):
        for j, (d, causal) in enumerate(panels):
            ax = axes[i][j]
            rows = sorted((r for r in res["rows"] if r["dtype"] == dt and r["d"] == d and r["causal"] == causal),
                          key=lambda r: r["n"])
            for p in providers:
                pts = [(r["n"], r["results"][p]["tflops"]) for r in rows
                       if p in r["results"] and "tflops" in r["results"][p]]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=p, linewidth=2.5 if p == "kiln" else 1.2)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dt}, d={d}, {'causal' if causal else 'not causal'}")
            ax.set_xlabel("N")
            ax.set_ylabel("TFLOP/s")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"Attention forward — {res['device']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------- --sweep: tune Kiln's schedule

# (BLOCK_M, BLOCK_N, num_warps, num_stages), most promising first: a run cut short by
# --budget-s drops the tail. The first is the runtime's default (jit/attention_tune.c,
# k_tune), so every table has the baseline. Chosen from the offline study
# (tools/bench/ptx_study.py; docs/perf_notes.md): registers, spills, SRAM and CTAs per SM.
# BLOCK_M 128 on 4 warps is left out: its causal variant does not compile today (perf_notes.md).
DEFAULT_SCHED = (128, 64, 8, 2)
# What kiln_attention_fwd picks on sm_90 (jit/attention_tune.c, k_tune): the main benchmark
# measures these unless --block-m/--block-n/--warps/--stages say otherwise.
# (head dim, causal) -> the runtime's sm_90 defaults (k_tune in jit/attention_tune.c), and the
# rows that apply up to a query length: (head dim, causal, max N) -> schedule
API_SCHED = {(64, False): (64, 128, 4, 2), (64, True): (64, 128, 4, 2),
             (128, False): (128, 64, 4, 2), (128, True): (128, 64, 4, 2),
             (256, False): (128, 64, 8, 2, "ws"), (256, True): (128, 64, 8, 2, "ws")}
API_SCHED_SHORT = {(64, True, 2048): (64, 64, 4, 2), (128, True, 1024): (64, 64, 4, 2)}


def api_sched(d, causal, n):
    """The schedule kiln_attention_fwd picks on sm_90 for this head dim, masking and query length."""
    for (dd, cc, max_n), sc in API_SCHED_SHORT.items():
        if dd == d and cc == bool(causal) and n <= max_n:
            return sc
    return API_SCHED.get((d, bool(causal)), (128, 64 if d <= 128 else 32, 0, 0))
SWEEP_SCHEDULES = {
    64: [DEFAULT_SCHED, (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 32, 8, 3),
         (64, 64, 4, 3), (64, 64, 4, 2), (64, 128, 4, 2), (128, 64, 8, 1), (64, 32, 4, 3),
         (64, 64, 8, 3)],
    128: [DEFAULT_SCHED, (128, 64, 8, 3), (128, 32, 8, 3), (128, 32, 8, 2), (64, 64, 4, 3),
          (64, 64, 4, 2), (128, 128, 8, 2), (64, 32, 4, 3), (128, 64, 8, 1), (64, 64, 8, 3),
          (64, 128, 8, 3)],
}
SWEEP_SEQLENS = [4096]


def sched_str(sc):
    return "%dx%d/%d/%d" % tuple(sc[:4]) + "".join("/" + m for m in sc[4:])


def parse_scheds(text):
    """"128x64/8/3,64x64/4/2/sync" -> [(128, 64, 8, 3), (64, 64, 4, 2, "sync")]; "/sync": mma.sync
    even where sm_90a's wgmma applies (kiln_bench_attn --no-wgmma); "/pp": warpgroup ping-pong
    (kiln_bench_attn --pingpong; 8 warps on sm_90a, e.g. 128x128/8/2/pp); "/mb": the mbarrier
    stage hand-off (--mbarrier); "/ppmb": both; "/ov": the next key block's Q K^T in flight
    during the softmax (kiln_bench_attn --overlap, sm_90a); "/tma": TMA copies of K/V
    (kiln_bench_attn --tma, sm_90a); "/ws": warp specialisation, a producer warpgroup on
    top of the warps (--warp-specialize, sm_90a, implies /mb); "/lp": its producer at 24
    registers when it issues TMA copies alone (--lean-producer, implies /ws /tma); "/ps": persistent
    programs (--persistent; not with /ws); "/lf": persistent, longest-first (--longest-first); modes
    combine in any order (128x64/8/2/pp/ov, 128x128/8/2/ws, FA3's 128x128/8/2/ws/tma/ov/pp)"""
    out = []
    for item in text.split(","):
        try:
            parts = item.strip().split("/")
            modes = []
            while parts and parts[-1] in ("sync", "pp", "mb", "ppmb", "ov", "tma", "ws", "lp", "ps", "lf"):
                modes.insert(0, parts.pop())
            bmbn, w, st = parts
            bm, bn = bmbn.split("x")
            out.append((int(bm), int(bn), int(w), int(st)) + tuple(modes))
        except ValueError:
            raise SystemExit(f"bad schedule '{item}': expected BMxBN/WARPS/STAGES[/sync|/pp|/mb|/ppmb|/ov...], e.g. 128x64/8/3")
    return out


class Faker:
    """--dry-run: plausible fake numbers (deterministic), so the tables and the JSON
    can be checked without torch or a GPU. A schedule the kiln command rejects
    (--kiln-cli) shows its compile error, as the C driver would on the GPU."""

    def __init__(self, seed):
        import random
        self.rng = random.Random(seed)

    def fa2(self, d, causal):
        return {"ms": 1.0, "tflops": (300.0 if d == 64 else 350.0) * (0.92 if causal else 1.0)
                * self.rng.uniform(0.97, 1.03), "fake": True}

    def kiln(self, sched, d, causal):
        bm, bn, w, st = sched[:4]
        base = 190.0 if d == 64 else 270.0
        f = (1.0 + 0.15 * (st - 2)) * (1.0 if w * 16 == bm else 0.8) * self.rng.uniform(0.85, 1.15)
        return {"ms": 1.0, "tflops": base * f * (0.9 if causal else 1.0), "fake": True,
                "block_m": bm, "block_n": bn, "num_warps": w, "num_stages": st}


def dry_compile(args, dtype, d, causal, sched):
    """With --dry-run and --kiln-cli: compile the schedule as the runtime would for the
    sweep's shapes (the launch key's hints; tools/bench/ptx_study.py), to PTX."""
    import ptx_study
    bm, bn, w, st = sched[:4]
    cmd = [args.kiln_cli, "compile", args.src, "-k", f"attn_fwd_{dtype}", "-D", f"HEAD_DIM={d}",
           "-D", f"BLOCK_M={bm}", "-D", f"BLOCK_N={bn}", "-D", f"CAUSAL={'true' if causal else 'false'}",
           "--num-warps", str(w), "--num-stages", str(st), "--emit", "ptx", "-o", os.devnull]
    cmd += mode_flags(sched)
    for h in ptx_study.ATTN_HINTS:
        cmd += ["--assume", f"{h}=16"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, KILN_CACHE_DISABLE="1"))
    if p.returncode == 0:
        return None
    return next((ln.strip() for ln in p.stderr.splitlines() if "error" in ln), f"exit {p.returncode}")[:300]


def sweep_kiln(args, fake, dtype, d, causal, sched, ns, timeout):
    """{n: record} for one schedule: one C-driver process (one compile) for every N."""
    if fake:
        err = dry_compile(args, dtype, d, causal, sched) if args.kiln_cli else None
        return {n: ({"error": "compile: " + err} if err else fake.kiln(sched, d, causal)) for n in ns}
    recs = run_kiln_process(kiln_cmd(args, dtype, d, causal, [
        "--tokens", str(TOKENS), "--seqlens", ",".join(map(str, ns)), "--min-ms", str(args.sweep_target_ms)],
        sched), timeout=timeout)
    by_n = {r["seqlen"]: r for r in recs if "seqlen" in r and "error" not in r}
    err = next((r["error"] for r in recs if "error" in r), "fail")
    return {n: by_n.get(n, {"error": err[:300]}) for n in ns}


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def sweep_rank(kiln, ns):
    """Schedules of one (dtype, d, causal), best first: geometric mean of TFLOP/s over N
    (a schedule that failed at some N ranks by the N it ran; one that ran none is out)."""
    scored = []
    for sc, by_n in kiln.items():
        t = [by_n[n]["tflops"] for n in ns if "tflops" in by_n.get(n, {})]
        if t:
            scored.append((geomean(t), sc))
    return [sc for _, sc in sorted(scored, key=lambda x: -x[0])]


def sweep(args, fake):
    dtypes = (args.dtypes or "f16").split(",")
    ds = [int(x) for x in args.head_dims.split(",")]
    ns = [int(x) for x in args.seqlens.split(",")] if args.seqlens else SWEEP_SEQLENS
    custom = parse_scheds(args.schedules) if args.schedules else None
    combos = [(dt, d, causal) for dt in dtypes for d in ds for causal in (False, True)]
    plan = {}
    for c in combos:
        lst = custom or SWEEP_SCHEDULES.get(c[1]) or SWEEP_SCHEDULES[128]
        plan[c] = list(dict.fromkeys([DEFAULT_SCHED] + lst))        # baseline first, no repeats
    t0 = time.time()
    res = {"mode": "sweep", "device": "dry run (fake numbers)" if fake else common.gpu_name(),
           "dry_run": bool(fake), "seqlens": ns, "budget_s": args.budget_s, "args": vars(args), "combos": []}
    state = {c: {"fa2": {}, "kiln": {}} for c in combos}

    # FA2 first: a few seconds in all, and the table needs it even when the budget runs out
    for c in combos:
        dt, d, causal = c
        for n in ns:
            state[c]["fa2"][n] = fake.fa2(d, causal) if fake else run_torch("sdpa_flash", dt, n, d, causal, 25.0)

    # Kiln: round-robin over the combos, so a budget cut drops the same tail everywhere;
    # keep ~15 s per combo for the correctness checks of the winners.
    reserve = 0 if args.no_check else 15 * len(combos)
    durations = []
    skipped = 0
    for i in range(max(len(p) for p in plan.values())):
        for c in combos:
            if i >= len(plan[c]):
                continue
            elapsed = time.time() - t0
            est = statistics.median(durations) if durations else 10.0
            if i > 0 and elapsed + est > args.budget_s - reserve:     # the baseline always runs
                skipped += 1
                continue
            sc = plan[c][i]
            t1 = time.time()
            timeout = max(30.0, min(args.kiln_timeout, args.budget_s - reserve - elapsed))
            state[c]["kiln"][sc] = sweep_kiln(args, fake, *c, sc, ns, timeout)
            durations.append(time.time() - t1)
            log(f"sweep {c[0]} d={c[1]} causal={c[2]} {sched_str(sc)}: " +
                ", ".join(f"N={n} {cell(state[c]['kiln'][sc][n])}" for n in ns) + f"  ({durations[-1]:.1f} s)")

    # correctness of each winner on a ragged shape (float64 reference): the fastest
    # schedule that passes is the one reported; at most 3 tried per combo
    for c in combos:
        dt, d, causal = c
        ranked = sweep_rank(state[c]["kiln"], ns)
        best, checks = None, []
        for sc in ranked[:1 if args.no_check else 3]:
            if args.no_check:
                best = sc
                break
            if fake:
                ch = {"ok": True, "fake": True}
            else:
                try:
                    ch = kiln_check(args, dt, d, causal, 777, 1000, sched=sc)
                except Exception as exc:
                    ch = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            checks.append(dict(ch, schedule=sched_str(sc)))
            if ch.get("ok"):
                best = sc
                break
        res["combos"].append({
            "dtype": dt, "d": d, "causal": causal, "fa2": {str(n): v for n, v in state[c]["fa2"].items()},
            "kiln": {sched_str(sc): {str(n): v for n, v in by_n.items()} for sc, by_n in state[c]["kiln"].items()},
            "planned": [sched_str(sc) for sc in plan[c]], "ranked": [sched_str(sc) for sc in ranked],
            "best": sched_str(best) if best else None, "checks": checks})
    res["skipped_for_budget"] = skipped
    res["wall_s"] = time.time() - t0
    return res


def sweep_markdown(res):
    ns = res["seqlens"]
    lines = [f"Kiln attention schedule sweep ({res['device']}; {TOKENS} tokens per batch, hidden {HIDDEN}, "
             f"[b, h, s, d]; TFLOP/s; schedule = BLOCK_MxBLOCK_N/warps/stages; default "
             f"{sched_str(DEFAULT_SCHED)}; {res['wall_s']:.0f} s of a {res['budget_s']:.0f} s budget"
             + (f", {res['skipped_for_budget']} runs skipped for the budget" if res["skipped_for_budget"] else "")
             + ")", ""]
    head = ["dtype", "d", "causal", "N", "FA2", "kiln default", "kiln best", "best schedule", "best/FA2",
            "default/FA2", "best/default", "check", "tried"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cb in res["combos"]:
        for n in ns:
            key = str(n)
            fa2 = cb["fa2"].get(key)
            dflt = cb["kiln"].get(sched_str(DEFAULT_SCHED), {}).get(key)
            best = cb["kiln"].get(cb["best"], {}).get(key) if cb["best"] else None
            check = next((("PASS" if ch.get("ok") else "FAIL") for ch in cb["checks"]
                          if ch.get("schedule") == cb["best"]), "—")
            if cb["checks"] and not cb["best"]:
                check = "FAIL (%s)" % ", ".join(ch["schedule"] for ch in cb["checks"])
            lines.append("| " + " | ".join([
                cb["dtype"], str(cb["d"]), "yes" if cb["causal"] else "no", key, cell(fa2), cell(dflt), cell(best),
                cb["best"] or "—", ratio(best, fa2), ratio(dflt, fa2), ratio(best, dflt), check,
                f"{len(cb['kiln'])}/{len(cb['planned'])}"]) + " |")
    # every schedule, one column per (dtype, d, causal, N)
    cols = [(cb, str(n)) for cb in res["combos"] for n in ns]
    scheds = list(dict.fromkeys(s for cb in res["combos"] for s in cb["planned"]))
    lines += ["", "Every schedule (TFLOP/s; — not run):", ""]
    head = ["schedule"] + [f"{cb['dtype']} d{cb['d']}{' causal' if cb['causal'] else ''} N{n}" for cb, n in cols]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for sc in scheds:
        lines.append("| " + " | ".join([sc] + [cell(cb["kiln"].get(sc, {}).get(n)) if sc in cb["kiln"] else "—"
                                              for cb, n in cols]) + " |")
    # the runtime keys its defaults on the head dim only: the best over causal and N
    lines += ["", "Suggested `k_tune` rows (jit/attention_tune.c; best geometric mean over causal, N and dtype, "
              "among checked-or-unchecked schedules that ran everywhere):", "", "```c"]
    for d in sorted({cb["d"] for cb in res["combos"]}):
        cbs = [cb for cb in res["combos"] if cb["d"] == d]
        common_s = set.intersection(*(set(cb["kiln"]) for cb in cbs)) if cbs else set()
        score = {}
        for sc in common_s:
            t = [cb["kiln"][sc].get(str(n), {}).get("tflops") for cb in cbs for n in ns]
            if all(t):
                score[sc] = geomean(t)
        if score:
            sc = max(score, key=score.get)
            p = parse_scheds(sc)[0]
            bm, bn, w, st = p[:4]
            # the row's schedule column: KilnSchedule's fields the modes turn on (kiln_compile.h)
            fields = {"pp": ["pingpong"], "ppmb": ["pingpong", "mbarrier"], "mb": ["mbarrier"], "ov": ["overlap"],
                      "tma": ["tma"], "ws": ["warp_specialize"], "lp": ["lean_producer"],
                      "ps": ["persistent"], "lf": ["longest_first"]}
            on = list(dict.fromkeys(f for m in p[4:] for f in fields.get(m, [])))
            sched = "{" + ", ".join(f".{f} = 1" for f in on) + "}" if on else "{0}"
            note = "  (mma.sync: not a table row)" if "sync" in p[4:] else ""
            lines.append(f"    {{RT_TUNE_FWD, 90, {d:3d}, -1, 0, {bm:4d}, {bn:3d}, {w}, {st}, {sched}, 0}},   /* "
                         f"{score[sc]:.0f} TFLOP/s geomean; default {score.get(sched_str(DEFAULT_SCHED), 0):.0f}{note} */")
    lines.append("```")
    failed = [(cb, sc) for cb in res["combos"] for sc, by_n in cb["kiln"].items()
              if any("error" in r for r in by_n.values())]
    if failed:
        lines += ["", "Failures:", ""]
        for cb, sc in failed:
            err = next(r["error"] for r in cb["kiln"][sc].values() if "error" in r)
            lines.append(f"- {cb['dtype']} d={cb['d']} causal={cb['causal']} {sc}: {err[:200]}")
    return "\n".join(lines) + "\n"


def sweep_main(args):
    fake = Faker(args.seed) if args.dry_run else None
    if not fake:
        import torch
        if not torch.cuda.is_available():
            raise SystemExit("no GPU (torch.cuda.is_available() is false); --dry-run checks the script")
    res = sweep(args, fake)
    md = sweep_markdown(res)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "attention_sweep.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "attention_sweep.md"), "w") as f:
        f.write(md)
    log(f"wrote {args.out}/attention_sweep.{{json,md}} in {res['wall_s']:.0f} s")
    print(md)
    print("JSON: " + json.dumps({"best": {f"{cb['dtype']} d{cb['d']} causal={cb['causal']}": cb["best"]
                                          for cb in res["combos"]}}))


# ---------------------------------------------------------------- main

# ---------------------------------------------------------------- --fp8

FP8_PROVIDERS = ["kiln_fp8", "sdpa_fp8", "kiln_f16", "sdpa_cudnn_f16"]


def fp8_quantise(x):
    """float8_e4m3fn codes and the float32 per-tensor descale (amax / 448) of x."""
    import torch
    ds = (x.abs().amax().float() / 448).reshape(1)
    return (x / ds).to(torch.float8_e4m3fn), ds


def fp8_rmse(o, q, k, v, causal, rows=512):
    """FlashAttention-3's accuracy number: RMSE of o against float64 attention on the original
    (unquantised) inputs, over batch 0, head 0 and its first `rows` query rows (N x N in float64
    stays small)."""
    import torch
    q0, k0, v0 = (t[0, 0].double() for t in (q, k, v))
    n = q0.shape[0]
    s = q0[:rows] @ k0.T / math.sqrt(q0.shape[-1])
    if causal:
        s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=s.device).tril()[:rows], float("-inf"))
    ref = torch.softmax(s, dim=-1) @ v0
    return (o[0, 0, :rows].double() - ref).pow(2).mean().sqrt().item()


def fp8_main(args):
    """--fp8: Kiln's FP8 forward (kiln.attention_fp8 through the Python package: KILN_LIBRARY or
    the newest build*/libkiln.so) against torch's SDPA on float8_e4m3fn tensors where torch takes
    them (cuDNN's FP8 attention; "fail" otherwise: torch 2.x's SDPA has no FP8 path), and against
    the f16 forwards (Kiln's kiln.attention, SDPA's cuDNN backend) on the same shapes (16k tokens,
    hidden 2048, [b, h, s, d], randn inputs, per-tensor descales). Also FA3's accuracy report:
    RMSE against float64 on the original inputs for Kiln FP8, Kiln f16 and SDPA f16. Writes
    attention_fp8.{json,md} under --out and prints the table."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import kiln
    ns = [int(x) for x in (args.seqlens or ("2048,8192" if args.quick else "1024,2048,4096,8192,16384")).split(",")]
    ds = [int(x) for x in (args.fp8_head_dims or "128,256").split(",")]
    target = 25.0 if args.quick else args.target_ms
    os.makedirs(args.out, exist_ok=True)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for d in ds:
        for causal in (False, True):
            for n in ns:
                b, h = max(TOKENS // n, 1), HIDDEN // d
                q, k, v = make_qkv(b, h, n, d, torch.float32)
                (q8, qd), (k8, kd), (v8, vd) = (fp8_quantise(t) for t in (q, k, v))
                q16, k16, v16 = (t.half() for t in (q, k, v))
                fns = {
                    "kiln_fp8": lambda: kiln.attention_fp8(q8, k8, v8, qd, kd, vd, causal=causal),
                    "sdpa_fp8": lambda: F.scaled_dot_product_attention(q8, k8, v8, is_causal=causal),
                    "kiln_f16": lambda: kiln.attention(q16, k16, v16, causal=causal),
                    "sdpa_cudnn_f16": lambda: F.scaled_dot_product_attention(q16, k16, v16, is_causal=causal),
                }
                row = {"d": d, "causal": causal, "n": n, "results": {}, "rmse": {}}
                for p, fn in fns.items():
                    try:
                        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                            ms = bench_ms(fn, target)
                            out = fn()
                        row["results"][p] = {"ms": ms, "tflops": flops(b, h, n, d, causal) / (ms * 1e-3) / 1e12}
                        if n <= 8192:
                            row["rmse"][p] = fp8_rmse(out, q, k, v, causal)
                    except Exception as exc:  # a provider that cannot run a shape must not stop the run
                        log(f"  {p} d={d} causal={causal} N={n}: {type(exc).__name__}: {str(exc)[:200]}")
                        row["results"][p] = {"error": classify(exc)}
                log(f"fp8 d={d} causal={causal} N={n}: " + ", ".join(
                    f"{p} {cell(row['results'][p])}" for p in FP8_PROVIDERS) + "  rmse " + ", ".join(
                    f"{p} {r:.3g}" for p, r in row["rmse"].items()))
                res["rows"].append(row)
                del q, k, v, q8, k8, v8, q16, k16, v16
                torch.cuda.empty_cache()
    lines = [f"FP8 forward, {res['device']}, torch {res['torch']}: TFLOP/s (RMSE vs float64 on the original "
             "inputs, batch 0 head 0, first 512 rows; N <= 8192)", "",
             "| d | causal | N | " + " | ".join(FP8_PROVIDERS) + " | kiln_fp8 / sdpa_cudnn_f16 |",
             "|---|---|---|" + "---|" * (len(FP8_PROVIDERS) + 1)]
    for r in res["rows"]:
        cells = []
        for p in FP8_PROVIDERS:
            c = cell(r["results"][p])
            if p in r["rmse"]:
                c += f" ({r['rmse'][p]:.2g})"
            cells.append(c)
        a, b_ = r["results"]["kiln_fp8"].get("tflops"), r["results"]["sdpa_cudnn_f16"].get("tflops")
        ratio = f"{a / b_:.2f}" if a and b_ else "-"
        lines.append(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['n']} | " + " | ".join(cells) +
                     f" | {ratio} |")
    md = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "attention_fp8.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "attention_fp8.md"), "w") as f:
        f.write(md)
    print(md)


def find_kiln_bin():
    """$KILN_BENCH_BIN, else the newest build*/kiln-bench-attn (a path that does
    not exist when there is none: the kiln runs then fail with "cannot run")."""
    return (common.find_binary("kiln-bench-attn", env_var="KILN_BENCH_BIN")
            or os.environ.get("KILN_BENCH_BIN") or os.path.join(ROOT, "build", "kiln-bench-attn"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln-bin", default=find_kiln_bin(), help="the kiln-bench-attn binary")
    ap.add_argument("--kiln-cli", default=None, help="the kiln command (times `kiln compile` as a process)")
    ap.add_argument("--src", default=os.path.join(ROOT, "lang/lib/attention_fwd.tile"))
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    ap.add_argument("--quick", action="store_true", help="a ~1 minute subset")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--dtypes", default=None, help="f16,bf16 (default both; --quick: f16)")
    ap.add_argument("--seqlens", default=None, help="comma list (default 512..16384)")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--block-m", type=int, default=0, help="default: the runtime's choice per head dim (API_SCHED)")
    ap.add_argument("--block-n", type=int, default=0)
    ap.add_argument("--warps", type=int, default=0, help="override the program's num_warps")
    ap.add_argument("--stages", type=int, default=0, help="override the program's num_stages")
    ap.add_argument("--target-ms", type=float, default=50.0, help="measurement length per shape")
    ap.add_argument("--kiln-timeout", type=float, default=240,
                    help="seconds for one Kiln process (compile + every N of one (dtype, d, causal))")
    ap.add_argument("--memory-n", type=int, default=32768)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--sweep", action="store_true",
                    help="time Kiln over SWEEP_SCHEDULES (or --schedules) for f16, d 64/128, causal and not, "
                         "N = 4096 (--dtypes/--head-dims/--seqlens change that), next to FA2; best per (d, causal)")
    ap.add_argument("--schedules", default=None, help="--sweep: BMxBN/WARPS/STAGES,... instead of the built-in list")
    ap.add_argument("--budget-s", type=float, default=240.0, help="--sweep: wall-clock budget in seconds")
    ap.add_argument("--sweep-target-ms", type=float, default=25.0, help="--sweep: measurement length per shape")
    ap.add_argument("--dry-run", action="store_true",
                    help="--sweep without a GPU or torch: fake timings, real tables; with --kiln-cli each "
                         "schedule is compiled to PTX with the launch-time hints")
    ap.add_argument("--seed", type=int, default=0, help="--dry-run: seed of the fake numbers")
    ap.add_argument("--fp8", action="store_true", help="the FP8 forward against its peers (fp8_main) instead")
    ap.add_argument("--fp8-head-dims", default=None, help="--fp8: head dims (default 128,256)")
    args = ap.parse_args()
    if args.fp8:
        return fp8_main(args)
    if args.sweep:
        return sweep_main(args)
    if args.dry_run:
        raise SystemExit("--dry-run goes with --sweep")
    import torch

    providers = [p for p in args.providers.split(",") if p]
    dtypes = (args.dtypes or ("f16" if args.quick else "f16,bf16")).split(",")
    ns = [int(x) for x in (args.seqlens or ("1024,4096,16384" if args.quick else
                                            "512,1024,2048,4096,8192,16384")).split(",")]
    ds = [int(x) for x in args.head_dims.split(",")]
    target = 25.0 if args.quick else args.target_ms
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "providers": providers,
           "rows": [], "args": vars(args)}

    if "kiln" in providers and not args.no_check:
        res["checks"] = []
        for dt in dtypes:
            for d, causal, nq, nk in ((64, False, 1000, 1000), (128, True, 777, 1000), (128, True, 1000, 600)):
                log(f"check kiln {dt} d={d} causal={causal} {nq}x{nk}")
                try:
                    res["checks"].append(kiln_check(args, dt, d, causal, nq, nk))
                except Exception as exc:
                    res["checks"].append({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300],
                                          "dtype": dt, "shape": [nq, nk, d]})

    for dt in dtypes:
        for d in ds:
            for causal in (False, True):
                kiln_res = run_kiln(args, dt, d, causal, ns, target) if "kiln" in providers else {}
                for n in ns:
                    row = {"dtype": dt, "d": d, "causal": causal, "n": n, "results": {}}
                    if "kiln" in providers:
                        row["results"]["kiln"] = kiln_res[n]
                    for p in providers:
                        if p != "kiln":
                            row["results"][p] = run_torch(p, dt, n, d, causal, target)
                    log(f"{dt} d={d} causal={causal} N={n}: " +
                        ", ".join(f"{p} {cell(row['results'][p])}" for p in providers))
                    res["rows"].append(row)

    if not args.no_memory:
        res["memory_n"] = args.memory_n
        res["memory"] = []
        for d in ([128] if args.quick else ds):
            if "kiln" in providers:
                recs = run_kiln_process(kiln_cmd(args, "f16", d, False, [
                    "--batch", "1", "--seqlens", str(args.memory_n), "--min-ms", "0"]), timeout=300)
                r = next((x for x in recs if "extra_bytes" in x), None)
                res["memory"].append({"d": d, "provider": "kiln",
                                      "result": {"extra_bytes": r["extra_bytes"]} if r else {"error": "fail"}})
            for p in ("naive", "sdpa_flash"):
                if p in providers:
                    res["memory"].append({"d": d, "provider": p,
                                          "result": torch_peak_extra(p, "f16", args.memory_n, d)})

    if "kiln" in providers and not args.no_compile:
        res["compile"] = kiln_compile_times(args)

    res["wall_s"] = time.time() - t_start
    md = markdown(res, providers)
    with open(os.path.join(args.out, "attention_bench.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "attention_bench.md"), "w") as f:
        f.write(md)
    common.write_csv(os.path.join(args.out, "attention_bench.csv"), CSV_FIELDS, csv_records(res))
    plot(res, providers, os.path.join(args.out, "attention_bench.png"))
    log(f"wrote {args.out}/attention_bench.{{json,md,csv,png}} in {res['wall_s']:.0f} s")
    print(md)


if __name__ == "__main__":
    main()
