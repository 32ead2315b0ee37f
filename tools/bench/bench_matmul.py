#!/usr/bin/env python3
"""bench_matmul.py — Kiln's tensor-core matmul against torch.matmul (cuBLAS), on one GPU.

Kiln runs tools/bench/matmul_tc.tile (row-major f16/bf16 A and B; wgmma on sm_90a with
BLOCK_K 64, else mma.sync; cp.async pipelining) through the C driver kiln-bench-matmul
(CMake builds it from tools/bench/kiln_bench_matmul.c), one process per (dtype, size,
schedule). Like for like: torch.matmul(a, b) writes C in the input dtype, and so does Kiln's
default (`half` output, kernel matmul_tc_<dtype>_<dtype>); a schedule ending in /f32 runs the
f32-output kernel, and is compared with torch.mm(a, b, out_dtype=torch.float32) where this
torch has it (the table's provider column says which output each row writes).

Sizes: 4096^3 and 8192^3 (M = N = K); dtypes f16 and bf16; schedules from SCHEDULES below
(--quick: the first two). A schedule is BMxBNxBK/WARPS/STAGES with optional suffixes:
/f32 (f32 output), /gG (GROUP_M = G; default 8, /g0: launch order), /pP (persistent: P CTAs
per SM loop over the tiles). TFLOP/s = 2 M N K / median time; each time is the median over
~100 ms of launches. Kiln's result is checked on sampled elements against float64 by the C
driver.

Output: the JSON records and a markdown table (printed last) under --out (default $OUT
or ./bench_out): matmul_bench.json, matmul_bench.md (--sweep: matmul_sweep.*).

  cmake --build build-tc --target kiln-bench-matmul      # on the build machine
  python3 tools/bench/bench_matmul.py --kiln-bin build-tc/kiln-bench-matmul
(on a GPU machine: tools/device_pack.sh here, then tools/device_run.sh there.)
"""
import argparse
import collections
import json
import os
import sys

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ROOT, log  # noqa: E402

SIZES = [4096, 8192]
DTYPES = ["f16", "bf16"]

Sched = collections.namedtuple("Sched", "bm bn bk warps stages out group_m persistent")


def parse_sched(text):
    """'128x256x64/8/4[/f32][/g8][/p1]' -> Sched (half output, GROUP_M 8, not persistent)."""
    parts = text.strip().split("/")
    bm, bn, bk = (int(x) for x in parts[0].split("x"))
    out, group_m, persistent = "half", 8, 0
    for p in parts[3:]:
        if p == "f32":
            out = "f32"
        elif p[:1] == "g":
            group_m = int(p[1:])
        elif p[:1] == "p":
            persistent = int(p[1:] or 1)
        else:
            raise ValueError(f"schedule {text!r}: unknown suffix /{p} (f32, gG, pP)")
    return Sched(bm, bn, bk, int(parts[1]), int(parts[2]), out, group_m, persistent)


def sched_str(sc):
    s = "%dx%dx%d/%d/%d" % sc[:5]
    return s + ("/f32" if sc.out == "f32" else "") + ("/g%d" % sc.group_m if sc.group_m != 8 else "") + \
        ("/p%d" % sc.persistent if sc.persistent else "")


SCHEDULES = [parse_sched(x) for x in (  # --quick: the first two
    "128x256x64/8/4/p1",   # best of the H200 sweep of 2026-11-24 (evening): 92-108% of cuBLAS
    "128x256x64/8/4",      # the same, one program per tile
    "128x256x64/8/4/f32/g0",  # the kernel of the earlier tables (f32 C, launch order)
    "256x128x64/8/4",
    "128x128x64/4/3",      # two CTAs per SM (96 KB of stages)
)]

# --sweep: SCHEDULES plus the order, persistence and stage variants (docs/performance.md,
# "Matmul": all of these were measured; the wgmma 128x256x64/8/4 family won).
SWEEP_EXTRA = [parse_sched(x) for x in (
    "128x256x64/8/4/g0",
    "128x256x64/8/4/g16",
    "128x256x64/8/3",
    "128x128x64/4/2",
    "128x128x64/4/3/p2",
    "128x128x32/4/4",      # mma.sync
)]


def torch_ms(dtype, size, target_ms, out="half"):
    """cuBLAS through torch: torch.matmul (C in the input dtype) or, for out='f32',
    torch.mm(..., out_dtype=torch.float32); None when this torch cannot."""
    import torch
    t = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(size, size, device="cuda", dtype=t, generator=g) * 2 - 1
    b = torch.rand(size, size, device="cuda", dtype=t, generator=g) * 2 - 1
    if out == "f32":
        try:
            torch.mm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError):
            return None, "torch.mm (f32 out): not in this torch"
        fn, what = (lambda: torch.mm(a, b, out_dtype=torch.float32)), "torch.mm (f32 out)"
    else:
        fn, what = (lambda: torch.matmul(a, b)), "torch.matmul (%s out)" % dtype
    ms = common.torch_median_ms(fn, target_ms, max_launches=500)
    fn = a = b = None          # free the operands (the lambdas hold them) before empty_cache
    torch.cuda.empty_cache()
    return ms, what


def kiln_run(binary, src, dtype, size, sc, target_ms, timeout):
    cmd = [binary, "--src", src, "--dtype", dtype, "--size", str(size), "--block-m", str(sc.bm),
           "--block-n", str(sc.bn), "--block-k", str(sc.bk), "--warps", str(sc.warps), "--stages", str(sc.stages),
           "--out", sc.out, "--group-m", str(sc.group_m), "--persistent", str(sc.persistent),
           "--min-ms", str(target_ms)]
    recs, rc, err = common.run_json(cmd, timeout=timeout)
    if not recs:
        return {"error": err if rc is None else f"exit {rc}: {err.strip()[-300:]}"}
    if "error" in recs[-1]:
        log("  kiln: " + " ".join(cmd))
        log("    " + recs[-1]["error"][:400])
    return recs[-1]


def cublas_rows(args, dtype, size, outs, rng):
    """One cuBLAS row per output kind in outs; returns (rows, {out: TFLOP/s})."""
    rows, ref = [], {}
    for out in outs:
        label = dtype if out == "half" else "f32"
        if args.dry_run:
            tf = 700.0 * rng.uniform(0.95, 1.05)
            rows.append({"dtype": dtype, "size": size, "provider": f"cuBLAS ({label} out, fake)",
                         "ms": 2.0 * size ** 3 / tf / 1e9, "tflops": tf, "ref_tflops": tf})
            ref[out] = tf
            continue
        try:
            ms, what = torch_ms(dtype, size, args.target_ms, out)
            if ms is None:
                rows.append({"dtype": dtype, "size": size, "provider": what, "error": "not measured"})
                continue
            tf = 2.0 * size ** 3 / (ms * 1e-3) / 1e12
            rows.append({"dtype": dtype, "size": size, "provider": what, "ms": ms, "tflops": tf, "ref_tflops": tf})
            ref[out] = tf
        except Exception as exc:  # keep going: Kiln's numbers are still worth having
            rows.append({"dtype": dtype, "size": size, "provider": "torch.matmul", "error": str(exc)})
    return rows, ref


def table(rows):
    out = ["| dtype | M=N=K | provider | schedule (BMxBNxBK/warps/stages[/f32][/gG][/pP]) | stages KB | ms | TFLOP/s "
           "| vs cuBLAS |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['dtype']} | {r['size']} | {r['provider']} | {r.get('schedule', '')} | | | "
                       f"{r['error'][:40]} | |")
            continue
        rel = f"{100 * r['tflops'] / r['ref_tflops']:.0f}%" if r.get("ref_tflops") else ""
        smem = f"{r['stage_bytes'] / 1024:.0f}" if "stage_bytes" in r else ""
        out.append(f"| {r['dtype']} | {r['size']} | {r['provider']} | {r.get('schedule', '')} | {smem} | "
                   f"{r['ms']:.3f} | {r['tflops']:.1f} | {rel} |")
    return "\n".join(out)


def dry_kiln(args, dtype, size, sc, rng):
    """--dry-run: a fake record; with --kiln-cli the schedule is compiled (hints as the
    runtime's launch key: A, B, C 16-byte aligned, M a multiple of 16) so a schedule the
    compiler rejects shows its error."""
    import subprocess
    if args.kiln_cli:
        kernel = f"matmul_tc_{dtype}" + ("" if sc.out == "f32" else f"_{dtype}")
        cmd = [args.kiln_cli, "compile", args.src, "-k", kernel, "-D", f"N={size}", "-D", f"K={size}",
               "-D", f"BLOCK_M={sc.bm}", "-D", f"BLOCK_N={sc.bn}", "-D", f"BLOCK_K={sc.bk}",
               "-D", f"GROUP_M={sc.group_m}", "-D", f"PERSISTENT={'true' if sc.persistent else 'false'}",
               "--num-warps", str(sc.warps), "--num-stages", str(sc.stages), "--emit", "ptx", "-o", os.devnull,
               "--stats"]
        for h in ("A", "B", "C", "M"):
            cmd += ["--assume", f"{h}=16"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, KILN_CACHE_DISABLE="1"))
        if p.returncode != 0:
            return {"error": next((ln.strip() for ln in p.stderr.splitlines() if "error" in ln), "compile failed")}
    ms = 0.40 * rng.uniform(0.8, 1.3) * (size / 4096) ** 3
    return {"ms": ms, "tflops": 2.0 * size ** 3 / (ms * 1e-3) / 1e12,
            "stage_bytes": sc.stages * (sc.bm + sc.bn) * sc.bk * 2, "fake": True}


def measure(args, dtype, size, scheds, rng, t0=None, durations=None):
    """cuBLAS for every output kind the schedules write, then each schedule (within
    --budget-s of t0 when t0 is given). Returns (rows, kiln records, skipped)."""
    import time
    rows, ref = cublas_rows(args, dtype, size, list(dict.fromkeys(sc.out for sc in scheds)), rng)
    mine, skipped = [], 0
    for i, sc in enumerate(scheds):
        if t0 is not None:
            elapsed = time.time() - t0
            est = sorted(durations)[len(durations) // 2] if durations else 5.0
            if i > 0 and elapsed + est > args.budget_s:
                skipped += 1
                continue
        t1 = time.time()
        timeout = args.timeout if t0 is None else max(30.0, min(args.timeout, args.budget_s - (t1 - t0)))
        rec = (dry_kiln(args, dtype, size, sc, rng) if args.dry_run else
               kiln_run(args.kiln_bin, args.src, dtype, size, sc, args.target_ms, timeout))
        if durations is not None:
            durations.append(time.time() - t1)
        rec.update({"dtype": dtype, "size": size, "provider": "kiln (%s out)" % (dtype if sc.out == "half" else "f32"),
                    "schedule": sched_str(sc), "ref_tflops": ref.get(sc.out)})
        rows.append(rec)
        mine.append(rec)
        log(f"  kiln {dtype} {size} {rec['schedule']}: {rec.get('tflops', rec.get('error'))}")
    return rows, mine, skipped


def sweep(args):
    """Every schedule of SCHEDULES + SWEEP_EXTRA (or --schedules) within --budget-s, the
    best per (dtype, size) next to cuBLAS (like for like: the best half-output schedule)."""
    import random
    import time
    rng = random.Random(args.seed)
    scheds = ([parse_sched(it) for it in args.schedules.split(",")] if args.schedules
              else list(dict.fromkeys(SCHEDULES + SWEEP_EXTRA)))
    t0, rows, best, skipped, durations = time.time(), [], [], 0, []
    for dtype in args.dtypes.split(","):
        for size in [int(x) for x in args.sizes.split(",")]:
            r, mine, sk = measure(args, dtype, size, scheds, rng, t0, durations)
            rows += r
            skipped += sk
            for out in ("half", "f32"):
                ok = [m for m in mine if "tflops" in m and m["schedule"].endswith("/f32") == (out == "f32")]
                if ok:
                    best.append(max(ok, key=lambda m: m["tflops"]))
    md = [f"Kiln matmul schedule sweep ({'dry run, fake numbers' if args.dry_run else common.gpu_name()}; "
          f"{time.time() - t0:.0f} s of a {args.budget_s:.0f} s budget"
          + (f", {skipped} runs skipped for the budget" if skipped else "") + ")", "", table(rows), "",
          "Best per (dtype, size, output):", "", table(best)]
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
    ap.add_argument("--schedules", default=None,
                    help="--sweep: BMxBNxBK/WARPS/STAGES[/f32][/gG][/pP],... instead of the lists")
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
            rows += measure(args, dtype, size, scheds, None)[0]
    os.makedirs(args.out, exist_ok=True)
    md = table(rows)
    with open(os.path.join(args.out, "matmul_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    with open(os.path.join(args.out, "matmul_bench.md"), "w") as f:
        f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
