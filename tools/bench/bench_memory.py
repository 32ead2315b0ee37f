#!/usr/bin/env python3
"""bench_memory.py — Kiln's memory-bound kernels against torch and the copy roofline, on one GPU.

What is measured (each time the median over --reps launches, each between its own pair of
CUDA events, after --warmup launches; inputs rotate over several sets when one set is
smaller than 2x the L2, so no launch reads what the previous one left in L2):
  copy      torch dst.copy_(src) device to device on --copy-mib MiB; bytes = read + write
  vec_add   Kiln examples/vec_add.tile (through tools/bench/kiln-bench) and torch.add(x, y, out=z),
            f32, n = 64Mi (256 MiB per operand), 16Mi and 1Mi; bytes = 3 * n * 4
  softmax   Kiln examples/softmax.tile and torch.softmax(x, dim=-1) over rows,
            f32, shapes 4096x4096, 16384x1024, 8192x8192, 32768x512; bytes = 2 * rows * cols * 4
GB/s is decimal (1e9 bytes/s). Kiln runs at several schedules (vec add BLOCK 1024/2048/4096 x
num_warps 4/8; softmax BLOCK = next power of two >= cols x num_warps 4/8/16); the table shows
the best, the JSON has them all. Every Kiln run also checks its output against a host
reference (vec add exact, softmax relative error < 1e-5); a wrong result shows "WRONG".

Output: <out>/memory_bench.json and <out>/memory_bench.md, <out> = --out, else $OUT, else
./bench-out; the markdown tables are printed last on stdout (progress goes to stderr).

  python3 tools/bench/bench_memory.py --kiln-bin build/kiln-bench            # ~2 min on an H100
  python3 tools/bench/bench_memory.py --kiln-bin build/kiln-bench --quick    # ~30 s
  python3 tools/bench/bench_memory.py --dry-run   # no GPU, no torch: fake numbers, real tables;
                                                  # with a kiln-bench, every Kiln command is
                                                  # compiled (--compile-only) to check it
"""
import argparse
import os
import random
import sys
import tempfile

sys.dont_write_bytecode = True  # the tree is shared and copied to the GPU machine
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MI = 1 << 20
VEC_SIZES = [64 * MI, 16 * MI, 1 * MI]
VEC_SCHEDULES = [(b, w) for b in (1024, 2048, 4096) for w in (4, 8)]
SOFTMAX_SHAPES = [(4096, 4096), (16384, 1024), (8192, 8192), (32768, 512)]
SOFTMAX_WARPS = (4, 8, 16)
ESIZE = {"f32": 4, "f16": 2}


def next_pow2(v):
    p = 1
    while p < v:
        p *= 2
    return p


# ---------------------------------------------------------------- what to run

def configs(args):
    """One dict per (kernel, shape, dtype), with the Kiln schedules to try."""
    out = []
    sizes = args.vec_sizes or ([VEC_SIZES[0], VEC_SIZES[-1]] if args.quick else VEC_SIZES)
    scheds = [(1024, 4), (4096, 8)] if args.quick else VEC_SCHEDULES
    for n in sizes:
        out.append({"kernel": "vec_add", "dtype": "f32", "shape": str(n), "n": n,
                    "label": f"{n // MI}Mi ({n * 4 // MI} MiB/operand)" if n % MI == 0 else str(n),
                    "bytes": 3 * n * 4,
                    "schedules": [{"block": b, "warps": w} for b, w in scheds]})
    shapes = args.softmax_shapes or (SOFTMAX_SHAPES[:2] if args.quick else SOFTMAX_SHAPES)
    for dtype in args.softmax_dtypes:
        for rows, cols in shapes:
            block = next_pow2(cols)
            warps = [8 if block >= 2048 else 4] if args.quick else SOFTMAX_WARPS
            out.append({"kernel": "softmax", "dtype": dtype, "shape": f"{rows}x{cols}", "rows": rows,
                        "cols": cols, "label": f"{rows}x{cols}" + ("" if dtype == "f32" else f" {dtype}"),
                        "bytes": 2 * rows * cols * ESIZE[dtype],
                        "schedules": [{"block": block, "warps": w} for w in warps]})
    return out


def kiln_args(cfg, sched, args):
    if cfg["kernel"] == "vec_add":
        a = ["vec_add", "--n", cfg["n"]]
    else:
        a = ["softmax", "--rows", cfg["rows"], "--cols", cfg["cols"], "--dtype", cfg["dtype"]]
    a += ["--block", sched["block"], "--warps", sched["warps"], "--reps", args.reps,
          "--warmup", args.warmup, "--l2-mib", args.l2_mib]
    return a + (["--no-queue-ahead"] if args.no_queue_ahead else [])


# ---------------------------------------------------------------- measurements

def torch_copy(args):
    import torch
    n = args.copy_mib * MI // 4

    def measure():  # the tensors die with this frame, before empty_cache
        src = torch.empty(n, device="cuda", dtype=torch.float32).uniform_(-1, 1)
        dst = torch.empty_like(src)
        return common.cuda_median_ms(lambda: dst.copy_(src), args.reps, args.warmup,
                                     queue_ahead=not args.no_queue_ahead)
    ms, mn = measure()
    torch.cuda.empty_cache()
    nbytes = 2 * n * 4
    return {"what": "torch copy_", "bytes": nbytes, "ms": ms, "min_ms": mn, "gbps": common.gbps(nbytes, ms)}


def torch_kernel(cfg, args):
    """torch's time for cfg, with as many input sets as the Kiln driver uses."""
    import torch
    dt = {"f32": torch.float32, "f16": torch.float16}[cfg["dtype"]]
    nsets = common.sets_for(cfg["bytes"], args.l2_mib)
    free, _ = torch.cuda.mem_get_info()
    while nsets > 1 and nsets * cfg["bytes"] > 0.5 * free:
        nsets -= 1
    g = torch.Generator(device="cuda").manual_seed(1)

    def rand(*shape):
        return torch.empty(*shape, device="cuda", dtype=dt).uniform_(-4, 4, generator=g)
    try:
        if cfg["kernel"] == "vec_add":
            bufs = [(rand(cfg["n"]), rand(cfg["n"]), torch.empty(cfg["n"], device="cuda", dtype=dt))
                    for _ in range(nsets)]
            fns = [lambda b=b: torch.add(b[0], b[1], out=b[2]) for b in bufs]
        else:
            bufs = [rand(cfg["rows"], cfg["cols"]) for _ in range(nsets)]
            fns = [lambda x=x: torch.softmax(x, dim=-1) for x in bufs]
        ms, mn = common.cuda_median_ms(fns, args.reps, args.warmup, queue_ahead=not args.no_queue_ahead)
        return {"ms": ms, "min_ms": mn, "gbps": common.gbps(cfg["bytes"], ms), "sets": nsets}
    except Exception as exc:  # one shape that cannot run must not stop the others
        common.log(f"  torch {cfg['kernel']} {cfg['shape']}: {type(exc).__name__}: {str(exc)[:200]}")
        return {"error": "oom" if "out of memory" in str(exc) else type(exc).__name__}
    finally:
        bufs = fns = None
        torch.cuda.empty_cache()


def kiln_kernel(cfg, args):
    runs = []
    for s in cfg["schedules"]:
        if args.kiln_dead:  # kiln-bench found no GPU once: it will not find one now
            runs.append({"block": s["block"], "num_warps": s["warps"], "error": args.kiln_dead})
            continue
        r = common.run_kiln_bench(args.kiln_bin, kiln_args(cfg, s, args), root=args.root, timeout=args.timeout)
        if r.get("error", "").startswith("no GPU"):
            args.kiln_dead = r["error"]
        r.setdefault("block", s["block"])
        r.setdefault("num_warps", s["warps"])
        common.log(f"  kiln {cfg['kernel']} {cfg['shape']} BLOCK={s['block']} warps={s['warps']}: "
                   + (f"{r['gbps']:.0f} GB/s" if "gbps" in r else "") + (f" {r['error']}" if "error" in r else ""))
        runs.append(r)
    return runs


# ---------------------------------------------------------------- dry run

def dry_kiln(cfg, args, rng):
    """Fake Kiln numbers; with a kiln-bench at hand each command is really compiled
    (--compile-only, no GPU), so a schedule the compiler rejects shows as a failure."""
    runs = []
    for s in cfg["schedules"]:
        a = kiln_args(cfg, s, args)
        r = {"block": s["block"], "num_warps": s["warps"], "cmd": " ".join(map(str, a))}
        if args.kiln_bin and not args.no_compile_check:
            c = common.run_kiln_bench(args.kiln_bin, a + ["--compile-only"], root=args.root, timeout=args.timeout)
            r["cmd"] = c["cmd"]
            if "error" in c:
                r["error"] = "compile: " + c["error"]
                runs.append(r)
                continue
            r["ptx_bytes"] = c.get("ptx_bytes")
        ms = cfg["bytes"] / (rng.uniform(1800, 3000) * 1e9) * 1e3
        r.update(ms=ms, gbps=common.gbps(cfg["bytes"], ms), max_err=0.0, ok=True, device="DRY RUN",
                 sets=common.sets_for(cfg["bytes"], args.l2_mib))
        runs.append(r)
    return runs


def dry_torch(cfg, rng):
    ms = cfg["bytes"] / (rng.uniform(2400, 3000) * 1e9) * 1e3
    return {"ms": ms, "gbps": common.gbps(cfg["bytes"], ms), "sets": common.sets_for(cfg["bytes"])}


# ---------------------------------------------------------------- tables

def best_run(runs):
    good = [r for r in runs if "error" not in r and r.get("gbps")]
    return max(good, key=lambda r: r["gbps"]) if good else None


def kiln_failure(runs):
    """The Kiln cell of a shape with no good run."""
    if not runs:
        return "-"
    return "WRONG" if any(r.get("ok") is False for r in runs) else "fail"


def status_text(runs):
    bad = [r for r in runs if "error" in r]
    wrong = [r for r in bad if r.get("ok") is False]
    if wrong:
        return f"WRONG ({len(wrong)}/{len(runs)})"
    if bad:
        return f"fail ({len(bad)}/{len(runs)}): {bad[0]['error'][:60]}"
    errs = [r.get("max_err") for r in runs if r.get("max_err") is not None]
    return f"ok (max err {max(errs):.1e})" if errs else "ok"


def main_table(results, copy_gbps):
    rows = []
    for res in results:
        cfg, k, t = res["config"], best_run(res["kiln"]), res["torch"]
        kg, tg = (k or {}).get("gbps"), t.get("gbps")
        rows.append([cfg["kernel"], cfg["label"],
                     common.fmt(kg) if k else kiln_failure(res["kiln"]),
                     common.fmt(tg) if tg else t.get("error", "-"),
                     common.fmt(copy_gbps),
                     common.fmt(100 * kg / copy_gbps, 1, "%") if kg and copy_gbps else "-",
                     common.fmt(kg / tg, 2) if kg and tg else "-",
                     f"{k['block']}/{k['num_warps']}" if k else "-",
                     status_text(res["kiln"]) if res["kiln"] else "-"])
    return common.markdown_table(["kernel", "shape", "Kiln GB/s", "torch GB/s", "copy GB/s", "Kiln % of copy",
                                  "Kiln/torch", "Kiln BLOCK/warps", "check"], rows, align="llrrrrrrl")


def schedule_table(results, copy_gbps):
    rows = []
    for res in results:
        cfg = res["config"]
        for r in res["kiln"]:
            g = r.get("gbps") if "error" not in r or r.get("ok") is False else None
            rows.append([cfg["kernel"], cfg["label"], r["block"], r["num_warps"],
                         common.fmt(r.get("ms"), 4) if g else "-", common.fmt(g) if g else "-",
                         common.fmt(100 * g / copy_gbps, 1, "%") if g and copy_gbps else "-",
                         r.get("sets", "-"),
                         "WRONG" if r.get("ok") is False else r["error"][:70] if "error" in r else "ok"])
    return common.markdown_table(["kernel", "shape", "BLOCK", "warps", "ms", "GB/s", "% of copy", "sets",
                                  "check"], rows, align="llrrrrrrl")


# ---------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln-bin", help="the kiln-bench binary (default: $KILN_BENCH, else the newest build*/kiln-bench)")
    ap.add_argument("--root", default=common.ROOT, help="Kiln source tree (examples/*.tile); default: this checkout")
    ap.add_argument("--out", help="output folder (default: $OUT, else ./bench-out)")
    ap.add_argument("--reps", type=int, default=100, help="timed launches per measurement (default 100)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed launches first (default 10)")
    ap.add_argument("--l2-mib", type=float, default=common.L2_MIB, help="L2 size for input rotation (default 50)")
    ap.add_argument("--copy-mib", type=int, default=1024, help="size of the copy reference (default 1024 MiB)")
    ap.add_argument("--vec-sizes", type=lambda s: [int(x) for x in s.split(",")],
                    help="comma-separated element counts for vec_add (default 64Mi,16Mi,1Mi)")
    ap.add_argument("--softmax-shapes", type=lambda s: [tuple(int(v) for v in x.split("x")) for x in s.split(",")],
                    help="comma-separated RxC shapes for softmax (default 4096x4096,16384x1024,8192x8192,32768x512)")
    ap.add_argument("--softmax-dtypes", type=lambda s: s.split(","), default=["f32"],
                    help="f32, f16 or f32,f16 (default f32)")
    ap.add_argument("--no-queue-ahead", action="store_true",
                    help="launch straight from the host on both sides (times then include launch overhead)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and schedules")
    ap.add_argument("--no-kiln", action="store_true", help="torch and copy only")
    ap.add_argument("--no-torch", action="store_true", help="Kiln only (no copy reference either)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per kiln-bench run (default 300)")
    ap.add_argument("--dry-run", action="store_true", help="no GPU, no torch: fake numbers (see above)")
    ap.add_argument("--no-compile-check", action="store_true", help="with --dry-run: do not run kiln-bench at all")
    ap.add_argument("--seed", type=int, default=0, help="fake numbers' seed for --dry-run")
    args = ap.parse_args(argv)
    args.kiln_dead = None
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    if args.copy_mib < 1:
        ap.error("--copy-mib must be >= 1")
    for d in args.softmax_dtypes:
        if d not in ESIZE:
            ap.error(f"--softmax-dtypes: unknown dtype '{d}' (f32 or f16)")
    for r, c in args.softmax_shapes or []:
        if r < 1 or c < 1:
            ap.error("--softmax-shapes: rows and cols must be >= 1")
    if any(n < 1 for n in args.vec_sizes or []):
        ap.error("--vec-sizes: sizes must be >= 1")
    return args


def environment(args):
    env = {"kiln_bench": args.kiln_bin, "root": args.root, "reps": args.reps, "warmup": args.warmup,
           "l2_mib": args.l2_mib, "dry_run": args.dry_run}
    if not args.dry_run and not args.no_torch:
        import torch
        env.update(torch=torch.__version__, cuda=torch.version.cuda)
    if not args.dry_run:
        env["gpu"] = common.gpu_name()
    return env


def check_setup(args):
    """None when the run can go ahead, else the one-line reason it cannot."""
    if args.no_kiln and args.no_torch:
        return "nothing to run: --no-kiln and --no-torch"
    if not args.no_kiln:
        given = args.kiln_bin
        args.kiln_bin = common.find_kiln_bench(given, args.root)
        if given and not args.kiln_bin:
            return f"--kiln-bin {given}: no such executable"
        if not args.kiln_bin and not args.dry_run:
            return ("no kiln-bench binary: build it (cmake --build BUILD --target kiln-bench) and pass "
                    "--kiln-bin, or set KILN_BENCH, or use --no-kiln")
    if args.dry_run or args.no_torch:
        return None
    try:
        import torch
    except ImportError:
        return "no GPU: torch is not installed (use --dry-run to check the script without one)"
    if not torch.cuda.is_available():
        return "no GPU: torch.cuda.is_available() is False (use --dry-run to check the script without one)"
    return None


def main(argv=None):
    args = parse_args(argv)
    why = check_setup(args)
    if why:
        print(f"bench_memory: {why}", file=sys.stderr)
        return 1
    folder = common.out_dir(args.out, tempfile.mkdtemp(prefix="bench-memory-dry-") if args.dry_run else "bench-out")
    rng = random.Random(args.seed)
    env = environment(args)
    common.log(f"bench_memory: {env.get('gpu', 'DRY RUN')}; kiln-bench: {args.kiln_bin or '-'}; out: {folder}")

    copy = None
    if not args.no_torch:
        copy = ({"what": "fake", "gbps": rng.uniform(2900, 3300)} if args.dry_run else torch_copy(args))
        common.log(f"  copy: {copy['gbps']:.0f} GB/s")
    copy_gbps = copy["gbps"] if copy else None

    results = []
    for cfg in configs(args):
        common.log(f"{cfg['kernel']} {cfg['label']} {cfg['dtype']}")
        res = {"config": cfg, "torch": {}, "kiln": []}
        if not args.no_torch:
            res["torch"] = dry_torch(cfg, rng) if args.dry_run else torch_kernel(cfg, args)
        if not args.no_kiln:
            res["kiln"] = dry_kiln(cfg, args, rng) if args.dry_run else kiln_kernel(cfg, args)
        results.append(res)

    title = "Memory-bound kernels" + (" -- DRY RUN, FAKE NUMBERS" if args.dry_run else f" on {env['gpu']}")
    md = (f"## {title}\n\n"
          f"copy reference: {common.fmt(copy_gbps)} GB/s ({'fake' if args.dry_run else 'torch copy_'}"
          f" of {args.copy_mib} MiB, read + write); medians of {args.reps} launches after {args.warmup}\n\n"
          "### Kiln schedules\n\n" + schedule_table(results, copy_gbps) + "\n\n"
          "### Summary (best Kiln schedule per shape)\n\n" + main_table(results, copy_gbps) + "\n")
    paths = common.write_outputs(folder, "memory_bench", {"environment": env, "copy": copy, "results": results}, md)
    common.log("wrote " + ", ".join(paths))
    bad = sum(1 for res in results for r in res["kiln"] if "error" in r)
    if bad:
        common.log(f"bench_memory: {bad} Kiln run(s) failed or were wrong: see the check columns")
    print(md)
    if args.kiln_dead:
        common.log(f"bench_memory: kiln-bench: {args.kiln_dead}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
