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
SCHEDULES = [  # (block_m, block_n, block_k, warps, stages); --quick: the first two
    (64, 256, 32, 4, 4),    # best of the H200 sweep of 2026-11-22 (387 TFLOP/s, 55% of cuBLAS)
    (128, 128, 32, 4, 4),   # second (376)
    (128, 128, 32, 4, 3),
    (128, 256, 32, 8, 3),
    (128, 128, 64, 4, 3),
    (256, 128, 32, 8, 3),
    (128, 128, 32, 8, 2),
    (64, 128, 32, 4, 4),
]

# --sweep: SCHEDULES plus deeper pipelines and larger K steps (the offline study,
# docs/perf_notes.md: with the copies issued after the compute, num_stages = S overlaps
# S - 2 iterations, and BLOCK_K = 32 makes an iteration short); most promising first.
SWEEP_EXTRA = [
    (128, 128, 64, 4, 4),
    (128, 128, 32, 4, 5),
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 256, 32, 8, 4),
    (256, 128, 32, 8, 4),
    (128, 128, 64, 8, 3),
    (64, 256, 32, 4, 3),
    (64, 256, 32, 4, 5),
    (64, 256, 64, 4, 3),
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
    fn = a = b = None          # free the operands (the lambdas hold them) before empty_cache
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


def dry_kiln(args, dtype, size, sched, rng):
    """--dry-run: a fake record; with --kiln-cli the schedule is compiled (hints as the
    runtime's launch key: A, B, C 16-byte aligned, M a multiple of 16) so a schedule the
    compiler rejects shows its error."""
    import subprocess
    bm, bn, bk, w, st = sched
    if args.kiln_cli:
        cmd = [args.kiln_cli, "compile", args.src, "-k", f"matmul_tc_{dtype}", "-D", f"N={size}", "-D", f"K={size}",
               "-D", f"BLOCK_M={bm}", "-D", f"BLOCK_N={bn}", "-D", f"BLOCK_K={bk}", "--num-warps", str(w),
               "--num-stages", str(st), "--emit", "ptx", "-o", os.devnull, "--stats"]
        for h in ("A", "B", "C", "M"):
            cmd += ["--assume", f"{h}=16"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, KILN_CACHE_DISABLE="1"))
        if p.returncode != 0:
            return {"error": next((ln.strip() for ln in p.stderr.splitlines() if "error" in ln), "compile failed")}
    ms = 0.40 * rng.uniform(0.8, 1.3) * (size / 4096) ** 3
    return {"ms": ms, "tflops": 2.0 * size ** 3 / (ms * 1e-3) / 1e12, "smem_bytes": 1024 * rng.choice([64, 96, 128]),
            "fake": True}


def sweep(args):
    """Every schedule of SCHEDULES + SWEEP_EXTRA (or --schedules) within --budget-s, the
    best per (dtype, size) next to cuBLAS."""
    import random
    import time
    rng = random.Random(args.seed)
    scheds = ([tuple(int(x) for x in it.replace("x", "/").split("/")) for it in args.schedules.split(",")]
              if args.schedules else list(dict.fromkeys(SCHEDULES + SWEEP_EXTRA)))
    dtypes = args.dtypes.split(",")
    sizes = [int(x) for x in args.sizes.split(",")]
    t0, rows, best, skipped, durations = time.time(), [], [], 0, []
    for dtype in dtypes:
        for size in sizes:
            ref = None
            if args.dry_run:
                ref = 700.0 * rng.uniform(0.95, 1.05)
                rows.append({"dtype": dtype, "size": size, "provider": "cuBLAS (fake)", "ms": 2.0 * size ** 3 / ref / 1e9,
                             "tflops": ref, "ref_tflops": ref})
            else:
                try:
                    ms, what = torch_ms(dtype, size, args.target_ms)
                    ref = 2.0 * size ** 3 / (ms * 1e-3) / 1e12
                    rows.append({"dtype": dtype, "size": size, "provider": what, "ms": ms, "tflops": ref,
                                 "ref_tflops": ref})
                except Exception as exc:
                    rows.append({"dtype": dtype, "size": size, "provider": "torch.matmul", "error": str(exc)})
            mine = []
            for i, sc in enumerate(scheds):
                elapsed = time.time() - t0
                est = sorted(durations)[len(durations) // 2] if durations else 5.0
                if i > 0 and elapsed + est > args.budget_s:
                    skipped += 1
                    continue
                t1 = time.time()
                rec = (dry_kiln(args, dtype, size, sc, rng) if args.dry_run else
                       kiln_run(args.kiln_bin, args.src, dtype, size, sc, args.target_ms,
                                max(30.0, min(args.timeout, args.budget_s - elapsed))))
                durations.append(time.time() - t1)
                rec.update({"dtype": dtype, "size": size, "provider": "kiln", "schedule": "%dx%dx%d, %d, %d" % sc,
                            "ref_tflops": ref})
                rows.append(rec)
                mine.append(rec)
                log(f"  kiln {dtype} {size} {rec['schedule']}: {rec.get('tflops', rec.get('error'))}")
            ok = [r for r in mine if "tflops" in r and r.get("ok", True) is not False]
            if ok:
                b = max(ok, key=lambda r: r["tflops"])
                best.append(b)
    md = [f"Kiln matmul schedule sweep ({'dry run, fake numbers' if args.dry_run else common.gpu_name()}; "
          f"{time.time() - t0:.0f} s of a {args.budget_s:.0f} s budget"
          + (f", {skipped} runs skipped for the budget" if skipped else "") + ")", "", table(rows), "",
          "Best per (dtype, size):", "", table(best)]
    return rows, best, "\n".join(md)


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
    ap.add_argument("--sweep", action="store_true",
                    help="SCHEDULES + SWEEP_EXTRA within --budget-s (f16, 4096 unless --dtypes/--sizes)")
    ap.add_argument("--schedules", default=None, help="--sweep: BMxBNxBK/WARPS/STAGES,... instead of the lists")
    ap.add_argument("--budget-s", type=float, default=240.0, help="--sweep: wall-clock budget in seconds")
    ap.add_argument("--dtypes", default="f16", help="--sweep: f16,bf16")
    ap.add_argument("--sizes", default="4096", help="--sweep: M = N = K values")
    ap.add_argument("--dry-run", action="store_true",
                    help="--sweep without a GPU or torch: fake numbers; with --kiln-cli each schedule is compiled")
    ap.add_argument("--kiln-cli", default=None, help="--dry-run: the kiln command")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.sweep:
        rows, best, md = sweep(args)
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "matmul_sweep.json"), "w") as f:
            json.dump({"rows": rows, "best": best, "args": vars(args)}, f, indent=1)
        with open(os.path.join(args.out, "matmul_sweep.md"), "w") as f:
            f.write(md + "\n")
        print(md)
        return
    if args.dry_run:
        raise SystemExit("--dry-run goes with --sweep")
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
