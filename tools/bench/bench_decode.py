#!/usr/bin/env python3
"""bench_decode.py — flash-decoding, Kiln against PyTorch SDPA, in one run.

GB/s of K and V read (2 * B * N * heads_kv * d * 2 bytes per call: Q, O and
split scratch not counted) for one query token per sequence, GQA heads_q /
heads_kv, d 128, f16, the whole cache visible (cache_seqlens = N):

  kiln        kiln-bench-decode (kiln_attention_decode through the public API,
              split count chosen by the runtime, the runtime's combine: two kernels),
              contiguous and paged (--pages)
  kiln_fused  the same, contiguous, with the combine fused into the split kernel (--combine both)
  sdpa_flash  torch SDPA, FlashAttention-2 backend, enable_gqa
  sdpa_cudnn  torch SDPA, cuDNN backend, enable_gqa

  python3 tools/bench/bench_decode.py --kiln-bin build/kiln-bench-decode [--quick]

Prints a markdown table; with --out DIR also writes decode_bench.{json,md,csv} (the CSV: one
line per (B, N, provider), what tools/bench/plot_svg.py draws).

  --sweep-splits 1,2,4,...   Kiln only (contiguous): for each (B, N) also time every fixed split
                             count listed and print "chosen vs best fixed" (split_sweep.md/json):
                             the runtime's choice, its GB/s, the best fixed count and its GB/s.
  --batches / --seqlens      restrict the shapes (e.g. --batches 1 --seqlens 16384,65536,131072)
  --no-sdpa                  skip the PyTorch rows (Kiln only, no torch needed)
  --mask window:W|document:D Kiln only, instead of the table above: what a block mask buys decode
                             (KilnAttentionDecodeParams.block_mask). Per (B, N), contiguous, the
                             runtime's split count: plain causal decode, the variant alone (sliding
                             window W: its kv_start skips the keys left of the window; D documents:
                             mask_mod on every key), and the variant with its block mask (--mask-block,
                             default 128; made once per N, its create time reported). Prints
                             microseconds per call and mask_decode.{md,json} with --out.
"""
import argparse
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CSV_FIELDS = ["dtype", "batch", "n", "heads", "heads_kv", "d", "provider", "gbs", "us", "error"]


def csv_records(args, rows):
    """One record per (B, N, provider): GB/s of K+V and microseconds per call."""
    for r in rows:
        for p, x in r["results"].items():
            gbs = x.get("gbs", x.get("gbps"))
            us = x.get("us", x["ms"] * 1e3 if "ms" in x else None)
            yield {"dtype": "f16", "batch": r["batch"], "n": r["n"], "heads": args.heads, "heads_kv": args.heads_kv,
                   "d": args.head_dim, "provider": p, "gbs": gbs, "us": us,
                   "error": None if gbs is not None else (x.get("error") or "fail")[:80].replace("\n", " ")}


def kiln_rows(args, batch, ns, page, splits=0, combine=None, mask=None, mask_mode="mask"):
    cmd = [args.kiln_bin, "--dtype", "f16", "--head-dim", str(args.head_dim), "--batch", str(batch),
           "--heads", str(args.heads), "--heads-kv", str(args.heads_kv), "--tokens", "1",
           "--seqlens", ",".join(map(str, ns)), "--min-ms", str(args.min_ms)]
    if page:
        cmd += ["--page", str(page)]
    if splits:
        cmd += ["--splits", str(splits)]
    if combine:
        cmd += ["--combine", combine]
    if mask:
        cmd += ["--mask", mask, "--mask-mode", mask_mode, "--mask-block", str(args.mask_block)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {n: {"error": "timeout"} for n in ns}
    recs = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "seqlen_k" in r:
                recs[int(r["seqlen_k"])] = r
    for n in ns:
        recs.setdefault(n, {"error": (out.stderr or out.stdout)[-300:]})
    return recs


def torch_gbs(backend, batch, n, args):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    be = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[backend]
    d, hq, hk = args.head_dim, args.heads, args.heads_kv
    q = k = v = None   # bound before the try: an allocation that fails must not make `finally` raise
    try:
        q = torch.randn(batch, hq, 1, d, device="cuda", dtype=torch.float16)
        k = torch.randn(batch, hk, n, d, device="cuda", dtype=torch.float16)
        v = torch.randn(batch, hk, n, d, device="cuda", dtype=torch.float16)
        with sdpa_kernel(be):
            f = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            f()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            reps = 1
            while True:
                s.record()
                for _ in range(reps):
                    f()
                e.record()
                torch.cuda.synchronize()
                ms = s.elapsed_time(e)
                if ms >= args.min_ms or reps >= 1 << 14:
                    break
                reps *= 4
        t = ms / reps / 1e3
        return {"gbs": 2 * batch * n * hk * d * 2 / t / 1e9, "us": t * 1e6}
    except Exception as exc:  # a backend that refuses the shape
        return {"error": f"{type(exc).__name__}: {exc}"[:200]}
    finally:
        q = k = v = None
        torch.cuda.empty_cache()


def split_sweep(args, batches, ns):
    """Per (B, N): the runtime's split count and GB/s against every fixed count in
    --sweep-splits (contiguous, the runtime's combine). Returns (records, markdown lines)."""
    counts = [int(x) for x in args.sweep_splits.split(",") if x]
    recs = []
    for b in batches:
        nb = [n for n in ns if b * n * args.heads_kv * args.head_dim * 4 <= 40 << 30]
        chosen = kiln_rows(args, b, nb, 0)
        fixed = {c: kiln_rows(args, b, nb, 0, splits=c) for c in counts}
        for n in nb:
            ch = chosen[n]
            got = {c: fixed[c][n].get("gbps") for c in counts if fixed[c][n].get("gbps")}
            best = max(got, key=got.get) if got else None
            recs.append({"batch": b, "n": n, "chosen_splits": ch.get("splits"), "chosen_gbs": ch.get("gbps"),
                         "best_splits": best, "best_gbs": got.get(best), "fixed": got})
            print(f"sweep B={b} N={n}: chosen {ch.get('splits')} {ch.get('gbps')}, best {best} {got.get(best)}",
                  file=sys.stderr)
    md = ["", f"split count: chosen vs best fixed (contiguous, the runtime's combine; fixed counts {args.sweep_splits})", "",
          "| B | N | chosen | GB/s | best fixed | GB/s | chosen / best | " +
          " | ".join(f"s={c}" for c in counts) + " |", "|---" * (7 + len(counts)) + "|"]
    for r in recs:
        ratio = f"{r['chosen_gbs'] / r['best_gbs']:.2f}" if r["chosen_gbs"] and r["best_gbs"] else "-"
        g = lambda x: f"{x:.0f}" if x else "err"  # noqa: E731
        md.append(f"| {r['batch']} | {r['n']} | {r['chosen_splits']} | {g(r['chosen_gbs'])} | "
                  f"{r['best_splits']} | {g(r['best_gbs'])} | {ratio} | " +
                  " | ".join(f"{r['fixed'][c]:.0f}" if c in r["fixed"] else "err" for c in counts) + " |")
    return recs, md


def mask_table(args, batches, ns):
    """Per (B, N): plain decode, the variant alone, the variant with its block mask: us per call.
    Returns (records, markdown lines)."""
    recs = []
    for b in batches:
        nb = [n for n in ns if b * n * args.heads_kv * args.head_dim * 4 <= 40 << 30]
        plain = kiln_rows(args, b, nb, 0)
        alone = kiln_rows(args, b, nb, 0, mask=args.mask, mask_mode="nomask")
        masked = kiln_rows(args, b, nb, 0, mask=args.mask, mask_mode="mask")
        for n in nb:
            us = lambda r: r[n]["ms"] * 1e3 if "ms" in r[n] else None  # noqa: E731
            rec = {"batch": b, "n": n, "splits": masked[n].get("splits"), "plain_us": us(plain),
                   "variant_us": us(alone), "mask_us": us(masked), "mask_create_ms": masked[n].get("mask_ms"),
                   "visible_bytes": masked[n].get("visible_bytes"),
                   "errors": [r[n]["error"][:200] for r in (plain, alone, masked) if "error" in r[n]]}
            recs.append(rec)
            print(f"mask {args.mask} B={b} N={n}: {rec}", file=sys.stderr)
    f = lambda x, d=1: f"{x:.{d}f}" if x is not None else "err"  # noqa: E731
    md = [f"decode with a block mask ({args.mask}, blocks {args.mask_block}), f16, heads {args.heads}/{args.heads_kv},"
          f" d {args.head_dim}, one token, contiguous: microseconds per call", "",
          "| B | N | splits | plain causal | variant alone | variant + block mask | alone / mask | mask create ms |",
          "|---" * 8 + "|"]
    for r in recs:
        ratio = f"{r['variant_us'] / r['mask_us']:.2f}" if r["variant_us"] and r["mask_us"] else "-"
        md.append(f"| {r['batch']} | {r['n']} | {r['splits'] if r['splits'] is not None else '-'} | "
                  f"{f(r['plain_us'])} | {f(r['variant_us'])} | {f(r['mask_us'])} | {ratio} | "
                  f"{f(r['mask_create_ms'])} |")
    md += [f"- B={r['batch']} N={r['n']}: {e}" for r in recs for e in r["errors"]]
    return recs, md


def cell(r):
    if "gbs" in r:
        return f"{r['gbs']:.0f}"
    if "gbps" in r:
        return f"{r['gbps']:.0f}"
    return "err"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln-bin", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--heads-kv", type=int, default=8)
    ap.add_argument("--pages", default="16,256", help="page sizes for the paged Kiln rows")
    ap.add_argument("--min-ms", type=float, default=100)
    ap.add_argument("--out", default=None)
    ap.add_argument("--combine", default="both", choices=["fused", "kernel", "both"],
                    help="the kiln column's combine; both: kernel, and a kiln_fused column (fused combine)")
    ap.add_argument("--sweep-splits", default="", help="fixed split counts to compare the chosen one with")
    ap.add_argument("--batches", default="", help="comma list (default 1,8 with --quick, else 1,8,64)")
    ap.add_argument("--seqlens", default="4096,16384,65536,131072")
    ap.add_argument("--no-sdpa", action="store_true")
    ap.add_argument("--mask", default="", help="window:W or document:D: the block-mask table instead")
    ap.add_argument("--mask-block", type=int, default=128)
    args = ap.parse_args()
    batches = [int(x) for x in args.batches.split(",") if x] or ([1, 8] if args.quick else [1, 8, 64])
    ns = [int(x) for x in args.seqlens.split(",") if x]
    if args.mask:
        recs, md = mask_table(args, batches, ns)
        print("\n".join(md))
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "mask_decode.json"), "w") as fh:
                json.dump({"args": vars(args), "rows": recs}, fh, indent=1)
            with open(os.path.join(args.out, "mask_decode.md"), "w") as fh:
                fh.write("\n".join(md) + "\n")
        return
    pages = [int(p) for p in args.pages.split(",") if p]
    sdpa = [] if args.no_sdpa else ["sdpa_flash", "sdpa_cudnn"]
    main_combine = "fused" if args.combine == "fused" else "kernel"
    cols = (["kiln"] + (["kiln_fused"] if args.combine == "both" else []) + [f"kiln_page{p}" for p in pages]
            + sdpa)
    rows = []
    for b in batches:
        nb = [n for n in ns if b * n * args.heads_kv * args.head_dim * 4 <= 40 << 30]
        kr = {"kiln": kiln_rows(args, b, nb, 0, combine=main_combine)}
        if args.combine == "both":
            kr["kiln_fused"] = kiln_rows(args, b, nb, 0, combine="fused")
        for p in pages:
            kr[f"kiln_page{p}"] = kiln_rows(args, b, nb, p, combine=main_combine)
        for n in nb:
            row = {"batch": b, "n": n, "results": {c: kr[c][n] for c in kr}}
            for p in sdpa:
                row["results"][p] = torch_gbs(p, b, n, args)
            rows.append(row)
            print(f"B={b} N={n}: " + ", ".join(f"{c} {cell(row['results'][c])}" for c in cols), file=sys.stderr)
    md = [f"decode, f16, heads {args.heads}/{args.heads_kv}, d {args.head_dim}, one query token: GB/s of K+V "
          f"(kiln: {main_combine} combine; splits: the runtime's choice)",
          "", "| B | N | splits | " + " | ".join(cols) + " | kiln / cudnn |", "|---" * (len(cols) + 4) + "|"]
    for r in rows:
        k, c = r["results"]["kiln"], r["results"].get("sdpa_cudnn", {})
        kv = k.get("gbps")
        ratio = f"{kv / c['gbs']:.2f}" if kv and "gbs" in c else "-"
        md.append(f"| {r['batch']} | {r['n']} | {k.get('splits', '-')} | " +
                  " | ".join(cell(r["results"][x]) for x in cols) + f" | {ratio} |")
    sweep = []
    if args.sweep_splits:
        sweep, smd = split_sweep(args, batches, ns)
        md += smd
    text = "\n".join(md)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "decode_bench.json"), "w") as f:
            json.dump({"args": vars(args), "rows": rows, "split_sweep": sweep}, f, indent=1)
        with open(os.path.join(args.out, "decode_bench.md"), "w") as f:
            f.write(text + "\n")
        common.write_csv(os.path.join(args.out, "decode_bench.csv"), CSV_FIELDS, csv_records(args, rows))


if __name__ == "__main__":
    main()
