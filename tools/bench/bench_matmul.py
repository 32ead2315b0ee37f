#!/usr/bin/env python3
"""bench_matmul.py — Kiln's tensor-core matmul against torch.matmul (cuBLAS), on one GPU.

Kiln runs tools/bench/matmul_tc.tile (row-major f16/bf16 A and B, f32 C; mma.sync,
ldmatrix, cp.async pipelining) through the C driver kiln-bench-matmul (CMake builds it
from tools/bench/kiln_bench_matmul.c), one
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

  cmake --build build-tc --target kiln-bench-matmul      # on the build machine
  python3 tools/bench/bench_matmul.py --kiln-bin build-tc/kiln-bench-matmul
(on a GPU machine: tools/device_pack.sh here, then tools/device_run.sh there.)
"""
import argparse
import json
import os
import sys

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ROOT, log  # noqa: E402

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
    ms = common.torch_median_ms(fn, target_ms, max_launches=500)
    del a, b
    torch.cuda.empty_cache()
    return ms, what


def kiln_run(binary, src, dtype, size, sched, target_ms, timeout):
    bm, bn, bk, w, st = sched
    cmd = [binary, "--src", src, "--dtype", dtype, "--size", str(size), "--block-m", str(bm),
           "--block-n", str(bn), "--block-k", str(bk), "--warps", str(w), "--stages", str(st),
           "--min-ms", str(target_ms)]
    recs, rc, err = common.run_json(cmd, timeout=timeout)
    if not recs:
        return {"error": err if rc is None else f"exit {rc}: {err.strip()[-300:]}"}
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
    ap.add_argument("--kiln-bin", default=common.find_binary("kiln-bench-matmul")
                    or os.path.join(ROOT, "build", "kiln-bench-matmul"),
                    help="the kiln-bench-matmul binary (default: the newest build*/kiln-bench-matmul)")
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
