#!/usr/bin/env python3
"""bench_peers.py — Kiln's attention forward and backward beside FlashAttention-4, cuDNN and FA2,
on the same torch tensors, in the `[b, s, h, d]` layout flash-attn users hold (the issue tables'
setting: B 2, N 8192, H·D = 2048, f16 unless said).

Providers (all through PyTorch, one process, one GPU):
  kiln   kiln.flash_attn_func (python/kiln: the C library through ctypes; its backward is Kiln's)
  fa4    flash_attn.cute.interface.flash_attn_func (flash-attn-4, CuTe DSL; its sm_90 path is
         FlashAttention-3's design). Missing package: the column says "absent".
  cudnn  torch SDPA, CUDNN_ATTENTION backend, on the [b, h, s, d] view of the same tensors
  fa2    torch SDPA, FLASH_ATTENTION backend (FlashAttention-2), likewise
Cases: the rows of issues 24/25 (d 64/128/256, causal and not, bf16, B 8 N 2048, a 1024-token
sliding window, soft-cap 30), each a forward alone and a backward alone (torch.autograd.grad of a
saved forward). TFLOP/s = 4·B·H·N²·D (causal: the visible pairs), the backward 2.5× the forward.
Every time is the median of --repeats measurements, each the median over ~--target-ms of launches
between CUDA events (tools/bench/common.py). Kiln's output is checked against cuDNN's per case
(max abs difference printed in the JSON).

  python3 tools/bench/bench_peers.py                       # all cases, ~2-4 min on an H200
  python3 tools/bench/bench_peers.py --cases d128,d128c --seqlens 1024,8192
Output under --out ($OUT): peers.json, peers.md; the markdown table prints last.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import log  # noqa: E402

# name: head dim, causal, and where they differ from the defaults: dtype, batch b, length n, window, softcap
CASES = {
    "d128": dict(d=128, causal=False),
    "d128c": dict(d=128, causal=True),
    "bf16_d128c": dict(d=128, causal=True, dtype="bf16"),
    "d64": dict(d=64, causal=False),
    "d64c": dict(d=64, causal=True),
    "d256": dict(d=256, causal=False),
    "d256c": dict(d=256, causal=True),
    "b8_n2048_d128c": dict(d=128, causal=True, b=8, n=2048),
    "window1024": dict(d=128, causal=True, window=1024),
    "softcap30": dict(d=128, causal=True, softcap=30.0),
}
PROVIDERS = ["kiln", "fa4", "cudnn", "fa2"]


def visible_pairs(n, causal, window):
    if window:  # causal with `window` keys per query (itself included)
        w = min(window, n)
        return w * (w + 1) // 2 + (n - w) * w
    return n * (n + 1) // 2 if causal else n * n


def fwd_flops(b, h, n, d, causal, window):
    return 4.0 * b * h * d * visible_pairs(n, causal, window)


def provider_fn(p, case, q, k, v):
    """A callable returning out [b, s, h, d] for provider p, or a string saying why not."""
    import torch
    import torch.nn.functional as F
    scale = 1 / math.sqrt(q.shape[-1])
    causal, window, softcap = case["causal"], case.get("window", 0), case.get("softcap", 0.0)
    ws = (window - 1, 0) if window else (-1, -1)
    if p == "kiln":
        import kiln
        return lambda: kiln.flash_attn_func(q, k, v, softmax_scale=scale, causal=causal, window_size=ws,
                                            softcap=softcap)
    if p == "fa4":
        try:
            from flash_attn.cute.interface import flash_attn_func
        except Exception as exc:  # not installed on this machine
            return f"absent ({type(exc).__name__})"
        kw = dict(softmax_scale=scale, causal=causal)
        if window:
            kw["window_size"] = ws
        if softcap:
            kw["softcap"] = softcap

        def fa4():
            r = flash_attn_func(q, k, v, **kw)
            return r[0] if isinstance(r, tuple) else r
        return fa4
    if window or softcap:
        return "—"
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}[p]

    def sdpa():
        with sdpa_kernel([backend]):
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=causal, scale=scale)
        return o.transpose(1, 2)
    return sdpa


def time_case(p, case, b, n, args):
    import torch
    d, h = case["d"], args.hidden // case["d"]
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[case.get("dtype", "f16")]
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = [torch.randn(b, n, h, d, device="cuda", dtype=dtype, generator=g).requires_grad_() for _ in range(3)]
    fn = provider_fn(p, case, q, k, v)
    if isinstance(fn, str):
        return {"error": fn}, None
    f = fwd_flops(b, h, n, d, case["causal"], case.get("window", 0))
    res = {}
    try:
        with torch.no_grad():
            fwd_ms = statistics.median(common.torch_median_ms(fn, args.target_ms) for _ in range(args.repeats))
        res["fwd_ms"], res["fwd_tflops"] = fwd_ms, f / (fwd_ms * 1e-3) / 1e12
        out = fn()
        dout = torch.randn_like(out)
        bwd = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)  # noqa: E731
        bwd_ms = statistics.median(common.torch_median_ms(bwd, args.target_ms) for _ in range(args.repeats))
        res["bwd_ms"], res["bwd_tflops"] = bwd_ms, 2.5 * f / (bwd_ms * 1e-3) / 1e12
        return res, out.detach().float()
    except Exception as exc:  # a provider that cannot run a case must not stop the run
        log(f"  {p} {case} N={n}: {type(exc).__name__}: {str(exc)[:300]}")
        res["error"] = "oom" if "out of memory" in str(exc) else "fail"
        return res, None
    finally:
        torch.cuda.empty_cache()


def cell(r, key):
    if key in r:
        return f"{r[key]:.0f}"
    return r.get("error", "—")


def ratio(a, b, key):
    return f"{a[key] / b[key]:.2f}" if key in a and key in b and b[key] > 0 else "—"


def markdown(rows, providers):
    head = ["case", "N"] + [f"{p} fwd/bwd" for p in providers] + [f"kiln/{p} fwd/bwd" for p in providers[1:]]
    body = []
    for r in rows:
        res = r["results"]
        cells = [r["case"], str(r["n"])]
        cells += [f"{cell(res[p], 'fwd_tflops')} / {cell(res[p], 'bwd_tflops')}" for p in providers]
        cells += [f"{ratio(res['kiln'], res[p], 'fwd_tflops')} / {ratio(res['kiln'], res[p], 'bwd_tflops')}"
                  for p in providers[1:]] if "kiln" in res else []
        body.append(cells)
    return common.markdown_table(head, body) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help="comma list of: " + ", ".join(CASES))
    ap.add_argument("--seqlens", default="8192", help="N per case (cases with their own N keep it)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=2048, help="heads x head dim")
    ap.add_argument("--providers", default=",".join(PROVIDERS))
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--target-ms", type=float, default=40.0)
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = ap.parse_args()
    import torch
    providers = [p for p in args.providers.split(",") if p]
    os.makedirs(args.out, exist_ok=True)
    rows, t0 = [], time.time()
    for name in args.cases.split(","):
        case = CASES[name]
        for n in ([case["n"]] if "n" in case else [int(x) for x in args.seqlens.split(",")]):
            b = case.get("b", args.batch)
            row = {"case": name, "n": n, "b": b, "results": {}}
            outs = {}
            for p in providers:
                row["results"][p], outs[p] = time_case(p, case, b, n, args)
            ref = outs.get("cudnn") if outs.get("cudnn") is not None else outs.get("fa4")
            if outs.get("kiln") is not None and ref is not None:
                row["kiln_max_abs_diff"] = (outs["kiln"] - ref).abs().max().item()
            log(f"{name} N={n}: " + ", ".join(f"{p} {cell(row['results'][p], 'fwd_tflops')}/"
                                            f"{cell(row['results'][p], 'bwd_tflops')}" for p in providers))
            rows.append(row)
    md = markdown(rows, providers)
    with open(os.path.join(args.out, "peers.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                   "rows": rows, "wall_s": time.time() - t0}, f, indent=1)
    with open(os.path.join(args.out, "peers.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
