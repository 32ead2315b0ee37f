#!/usr/bin/env python3
"""bench_matmul.py — Kiln's tensor-core matmul against torch.matmul (cuBLAS), on one GPU.

Kiln runs tools/bench/matmul_tc.tile (row-major f16/bf16 A and B, f32 C; mma.sync,
ldmatrix, cp.async pipelining) through the C driver tools/bench/kiln_bench_matmul, one
process per (dtype, size, schedule); torch.matmul runs the same problem with an f32
output (A @ B in the input dtype then .float() would measure a different kernel, so the
torch side is timed as torch.matmul(a, b, out_dtype=...) when available, else
torch.matmul(a, b) in the input dtype — the table says which).

Sizes: 4096^3 and 8192^3 (M = N = K); dtypes f16 and bf16; schedules (BLOCK_M x
BLOCK_N x BLOCK_K, warps, stages) from SCHEDULES below (--quick: the first two).
TFLOP/s = 2 M N K / median time; each time is the median over ~100 ms of launches.
Kiln's result is checked on sampled elements against float64 by the C driver.

Output: the JSON records and a markdown table (printed last) under --out (default $OUT
or ./bench_out): matmul_bench.json, matmul_bench.md.

  bash tools/bench/build_matmul.sh build-tc          # on the build machine
  python3 tools/bench/bench_matmul.py --kiln-bin tools/bench/kiln_bench_matmul
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SIZES = [4096, 8192]
DTYPES = ["f16", "bf16"]
SCHEDULES = [  # (block_m, block_n, block_k, warps, stages)
    (128, 128, 32, 4, 3),
    (128, 256, 32, 8, 3),
    (128, 128, 64, 4, 3),
    (256, 128, 32, 8, 3),
    (128, 128, 32, 4, 4),
    (128, 128, 32, 8, 2),
    (64, 128, 32, 4, 4),
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def torch_ms(dtype, size, target_ms):
    import torch
    t = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(size, size, device="cuda", dtype=t, generator=g) * 2 - 1
    b = torch.rand(size, size, device="cuda", dtype=t, generator=g) * 2 - 1
    try:
        torch.matmul(a, b, out_dtype=torch.float32)
        fn, what = (lambda: torch.matmul(a, b, out_dtype=torch.float32)), "torch.matmul (f32 out)"
    except (TypeError, RuntimeError):
        fn, what = (lambda: torch.matmul(a, b)), "torch.matmul (%s out)" % dtype
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3, 1e-3)
    n = int(min(max(target_ms / est, 5), 500))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    ms = statistics.median(x.elapsed_time(y) for x, y in zip(starts, ends))
    del a, b
    torch.cuda.empty_cache()
    return ms, what


def kiln_run(binary, src, dtype, size, sched, target_ms, timeout):
    bm, bn, bk, w, st = sched
    cmd = [binary, "--src", src, "--dtype", dtype, "--size", str(size), "--block-m", str(bm),
           "--block-n", str(bn), "--block-k", str(bk), "--warps", str(w), "--stages", str(st),
           "--min-ms", str(target_ms)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    except OSError as exc:
        return {"error": f"cannot run {binary}: {exc}"}
    recs = [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip().startswith("{")]
    if not recs:
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"}
    if "error" in recs[-1]:
        log("  kiln: " + " ".join(cmd))
        log("    " + recs[-1]["error"][:400])
    return recs[-1]


def table(rows):
    out = ["| dtype | M=N=K | provider | schedule (BMxBNxBK, warps, stages) | SRAM KB | ms | TFLOP/s | vs cuBLAS |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['dtype']} | {r['size']} | {r['provider']} | {r.get('schedule', '')} | | | "
                       f"{r['error'][:40]} | |")
            continue
        rel = f"{100 * r['tflops'] / r['ref_tflops']:.0f}%" if r.get("ref_tflops") else ""
        smem = f"{r['smem_bytes'] / 1024:.0f}" if "smem_bytes" in r else ""
        out.append(f"| {r['dtype']} | {r['size']} | {r['provider']} | {r.get('schedule', '')} | {smem} | "
                   f"{r['ms']:.3f} | {r['tflops']:.1f} | {rel} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln-bin", default=os.path.join(ROOT, "tools", "bench", "kiln_bench_matmul"))
    ap.add_argument("--src", default=os.path.join(ROOT, "tools", "bench", "matmul_tc.tile"))
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(os.getcwd(), "bench_out"))
    ap.add_argument("--quick", action="store_true", help="first two schedules, 4096 only")
    ap.add_argument("--target-ms", type=float, default=100.0)
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    sizes = SIZES[:1] if args.quick else SIZES
    scheds = SCHEDULES[:2] if args.quick else SCHEDULES
    rows = []
    for dtype in DTYPES:
        for size in sizes:
            ref = None
            try:
                ms, what = torch_ms(dtype, size, args.target_ms)
                ref = 2.0 * size ** 3 / (ms * 1e-3) / 1e12
                rows.append({"dtype": dtype, "size": size, "provider": what, "ms": ms, "tflops": ref,
                             "ref_tflops": ref})
            except Exception as exc:  # keep going: Kiln's numbers are still worth having
                rows.append({"dtype": dtype, "size": size, "provider": "torch.matmul", "error": str(exc)})
            log(f"{dtype} {size}: cuBLAS {ref and round(ref, 1)} TFLOP/s")
            for sc in scheds:
                rec = kiln_run(args.kiln_bin, args.src, dtype, size, sc, args.target_ms, args.timeout)
                rec.update({"dtype": dtype, "size": size, "provider": "kiln",
                            "schedule": "%dx%dx%d, %d, %d" % sc, "ref_tflops": ref})
                rows.append(rec)
                log(f"  kiln {rec['schedule']}: {rec.get('tflops', rec.get('error'))}")
    os.makedirs(args.out, exist_ok=True)
    md = table(rows)
    with open(os.path.join(args.out, "matmul_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(args.out, "matmul_bench.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
