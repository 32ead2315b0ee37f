#!/usr/bin/env python3
"""ptx_study.py — what the compiler makes of a schedule, without a GPU.

For every schedule of the attention forward (lang/lib/attention_fwd.tile) and of the
tensor-core matmul (tools/bench/matmul_tc.tile), compiles the kernel the way the runtime's
launch-time specialisation compiles it for the benchmark shapes (every pointer 16-byte
aligned, every integer stride / length a multiple of 16: `--assume NAME=16`), then runs
`ptxas -v` on the PTX and records:

  regs, spill_st / spill_ld / stack   ptxas -v (bytes), for the --arch (default sm_90a)
  smem                                kiln --stats (dynamic SRAM, bytes)
  occupancy                           CTAs per SM on an H100/H200 (65536 registers,
                                      228 KB SRAM, 1 KB reserved per CTA, 64 warps)
  mma / ldmatrix / cp.async / bar /   static counts in the whole PTX
  shfl / ex2 / lines
  loop1.* / loop2.*                   the same counts inside the first and second loop of
                                      the kernel (a backward branch to an earlier label;
                                      for attention: phase 1 = whole key blocks, phase 2 =
                                      the masked ones), i.e. per iteration, per thread
  kiln_ms, ptxas_ms                   wall time of `kiln compile --emit ptx` (process) and
                                      ptxas's own "Compile time"

  python3 tools/bench/ptx_study.py --kiln build-perf/kiln                 # everything, ~5 min
  python3 tools/bench/ptx_study.py --kiln build-perf/kiln --what matmul
  python3 tools/bench/ptx_study.py --kiln build-perf/kiln --quick         # a dozen configs

Writes ptx_study.json and ptx_study.md under --out (default ./bench_out); the markdown
is printed last. Only the standard library; no GPU.
"""
import argparse
import ast
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ATTN_SRC = os.path.join(ROOT, "lang", "lib", "attention_fwd.tile")
MATMUL_SRC = os.path.join(ROOT, "tools", "bench", "matmul_tc.tile")

# The runtime's launch key for the attention benchmark shapes ([b, h, s, d], N = 4096,
# hidden 2048): every pointer is a fresh allocation (16-byte aligned) and every integer
# argument is a multiple of 16 (strides d, N*d, H*N*d; heads 16 or 32; seqlens); none is 1.
ATTN_HINTS = (["Q", "K", "V", "O", "LSE"]
              + [f"stride_{t}{x}" for t in "qkvo" for x in ("b", "h", "m" if t in "qo" else "n")]
              + ["heads", "heads_kv", "seqlen_q", "seqlen_k"])
MATMUL_HINTS = ["A", "B", "C", "M"]          # N and K are constants of matmul_tc.tile

PATTERNS = {  # static instruction counts (a PTX line each)
    "mma": r"\bmma\.sync\b",
    "ldmatrix": r"\bldmatrix\.",
    "cp_async": r"\bcp\.async\.c[ag]\.",
    "bar": r"\bbar\.sync\b|\bbarrier\.sync\b",
    "shfl": r"\bshfl\.sync\b",
    "ex2": r"\bex2\.approx",
    "fma": r"\bfma\.rn\.f32\b",
    "ld_global": r"\bld\.global\b",
    "st_shared": r"\bst\.shared\b",
    "ld_shared": r"\bld\.shared\b",
}
COMPILED = {k: re.compile(v) for k, v in PATTERNS.items()}
LOOP_KEYS = ["instrs", "mma", "ldmatrix", "cp_async", "bar", "shfl", "ex2", "fma", "st_shared", "ld_shared"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- PTX analysis

def is_instr(line):
    """The last line of an instruction (mma.sync and ldmatrix span several lines)."""
    s = line.strip()
    return bool(s) and not s.startswith(("//", ".")) and s.endswith(";")


def loops(lines):
    """[(first, last)] line ranges of the loops: a label and a later branch back to it.
    Outermost ranges only, in program order (LLVM lays each loop out contiguously)."""
    labels = {}
    ranges = []
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(\$L__\w+):", line)
        if m:
            labels[m.group(1)] = i
            continue
        m = re.search(r"\bbra(?:\.uni)?\s+(\$L__\w+);", line)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            ranges.append((labels[m.group(1)], i))
    ranges.sort()
    out = []
    for r in ranges:
        if out and r[0] <= out[-1][1]:            # nested or overlapping: keep the outer one
            out[-1] = (out[-1][0], max(out[-1][1], r[1]))
        else:
            out.append(r)
    return out


def count(lines):
    c = {k: 0 for k in PATTERNS}
    c["instrs"] = 0
    for line in lines:
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        c["instrs"] += is_instr(s)
        for k, rx in COMPILED.items():    # each opcode is on the first line of its instruction
            if rx.search(s):
                c[k] += 1
    return c


def analyse_ptx(text):
    lines = text.splitlines()
    res = count(lines)
    res["lines"] = len(lines)
    for n, (a, b) in enumerate(loops(lines)[:2], 1):
        lc = count(lines[a:b + 1])
        for k in LOOP_KEYS:
            res[f"loop{n}.{k}"] = lc[k]
    return res


def parse_ptxas(text):
    r = {}
    m = re.search(r"Used (\d+) registers", text)
    if m:
        r["regs"] = int(m.group(1))
    m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", text)
    if m:
        r["stack"], r["spill_st"], r["spill_ld"] = (int(x) for x in m.groups())
    m = re.search(r"Compile time = ([\d.]+) ms", text)
    if m:
        r["ptxas_ms"] = float(m.group(1))
    return r


def occupancy(regs, smem, warps):
    """CTAs per SM on sm_90 (H100/H200): registers are allocated per warp in units of 256,
    65536 per SM; 228 KB of SRAM per SM with 1 KB reserved per CTA; 64 warps; 32 CTAs."""
    per_warp = -(-regs * 32 // 256) * 256
    by_regs = 65536 // (per_warp * warps) if per_warp else 32
    by_smem = (228 * 1024) // (smem + 1024)
    return max(0, min(by_regs, by_smem, 64 // warps, 32))


# ---------------------------------------------------------------- one configuration

def compile_one(args, cfg, tmp):
    """cfg: dict with src, kernel, defines {}, warps, stages, hints []. Returns the record."""
    ptx = os.path.join(tmp, "k.ptx")
    cmd = [args.kiln, "compile", cfg["src"], "-k", cfg["kernel"], "--emit", "ptx", "--arch", args.arch,
           "--stats", "-o", ptx, "--num-warps", str(cfg["warps"]), "--num-stages", str(cfg["stages"])]
    for k, v in cfg["defines"].items():
        cmd += ["-D", f"{k}={v}"]
    for h in cfg["hints"]:
        cmd += ["--assume", f"{h}=16"]
    rec = dict(cfg)
    rec.pop("src")
    rec.pop("hints")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, KILN_CACHE_DISABLE="1"))
    rec["kiln_ms"] = (time.perf_counter() - t0) * 1e3
    if p.returncode != 0:
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[:200])
        rec["error"] = first.strip()[:200]
        return rec
    m = re.search(r"smem: (\d+) bytes", p.stderr)
    rec["smem"] = int(m.group(1)) if m else 0
    with open(ptx) as f:
        rec.update(analyse_ptx(f.read()))
    q = subprocess.run([args.ptxas, "-v", f"-arch={args.arch}", ptx, "-o", os.path.join(tmp, "k.cubin")],
                       capture_output=True, text=True)
    if q.returncode != 0:
        rec["error"] = "ptxas: " + q.stderr.strip()[:200]
        return rec
    rec.update(parse_ptxas(q.stdout + q.stderr))
    if "regs" in rec:
        rec["occupancy"] = occupancy(rec["regs"], rec["smem"], cfg["warps"])
    return rec


# ---------------------------------------------------------------- the grids

def attention_configs(quick):
    out = []
    dts = ["f16", "bf16"]
    grid = itertools.product(dts, [64, 128], [False, True], [64, 128], [32, 64, 128], [4, 8], [1, 2, 3])
    for dt, d, causal, bm, bn, w, st in grid:
        if quick and not (dt == "f16" and causal is False and bn == 64 and st in (2, 3)):
            continue
        out.append(attn_cfg(dt, d, causal, bm, bn, w, st))
    # head dim 256 once: the runtime's defaults for it (64x32 and 64x64, 4 warps, 2 stages)
    if not quick:
        for bn in (32, 64):
            for st in (1, 2):
                out.append(attn_cfg("f16", 256, False, 64, bn, 4, st))
    return out


def attn_cfg(dt, d, causal, bm, bn, w, st):
    return {"what": "attention", "src": ATTN_SRC, "kernel": f"attn_fwd_{dt}", "dtype": dt, "d": d,
            "causal": causal, "block_m": bm, "block_n": bn, "warps": w, "stages": st,
            "defines": {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": "true" if causal else "false"},
            "hints": ATTN_HINTS}


def matmul_schedules():
    """SCHEDULES of bench_matmul.py, read without importing it."""
    with open(os.path.join(ROOT, "tools", "bench", "bench_matmul.py")) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SCHEDULES" for t in node.targets):
            return [tuple(s) for s in ast.literal_eval(node.value)]
    raise SystemExit("bench_matmul.py has no SCHEDULES")


def matmul_configs(quick, size=4096):
    out = []
    for dt in ("f16", "bf16"):
        for bm, bn, bk, w, st in matmul_schedules()[: 2 if quick else None]:
            out.append({"what": "matmul", "src": MATMUL_SRC, "kernel": f"matmul_tc_{dt}", "dtype": dt,
                        "size": size, "block_m": bm, "block_n": bn, "block_k": bk, "warps": w, "stages": st,
                        "defines": {"N": size, "K": size, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
                        "hints": MATMUL_HINTS})
    return out


# ---------------------------------------------------------------- report

def v(r, k, fmt="{}"):
    return fmt.format(r[k]) if k in r else ""


def attention_table(recs):
    head = ["dtype", "d", "causal", "BMxBN", "warps", "stages", "regs", "spill st/ld", "SRAM KB", "CTA/SM",
            "mma", "ldsm", "cp.async", "bar", "shfl", "ex2", "L1 instrs", "L1 mma", "L1 ldsm", "L1 bar",
            "L1 ex2", "L1 st.shared", "PTX lines", "kiln ms", "ptxas ms"]
    rows = []
    for r in recs:
        base = [r["dtype"], str(r["d"]), "yes" if r["causal"] else "no", f"{r['block_m']}x{r['block_n']}",
                str(r["warps"]), str(r["stages"])]
        if "error" in r:
            rows.append(base + [f"error: {r['error'][:90]}"] + [""] * (len(head) - len(base) - 1))
            continue
        rows.append(base + [
            v(r, "regs"), f"{r.get('spill_st', '?')}/{r.get('spill_ld', '?')}", f"{r['smem'] / 1024:.0f}",
            v(r, "occupancy"), v(r, "mma"), v(r, "ldmatrix"), v(r, "cp_async"), v(r, "bar"), v(r, "shfl"),
            v(r, "ex2"), v(r, "loop1.instrs"), v(r, "loop1.mma"), v(r, "loop1.ldmatrix"), v(r, "loop1.bar"),
            v(r, "loop1.ex2"), v(r, "loop1.st_shared"), v(r, "lines"), f"{r['kiln_ms']:.0f}", v(r, "ptxas_ms", "{:.0f}")])
    return md_table(head, rows)


def matmul_table(recs):
    head = ["dtype", "BMxBNxBK", "warps", "stages", "regs", "spill st/ld", "SRAM KB", "CTA/SM", "mma",
            "ldsm", "cp.async", "bar", "L1 instrs", "L1 mma", "L1 ldsm", "L1 cp.async", "PTX lines",
            "kiln ms", "ptxas ms"]
    rows = []
    for r in recs:
        base = [r["dtype"], f"{r['block_m']}x{r['block_n']}x{r['block_k']}", str(r["warps"]), str(r["stages"])]
        if "error" in r:
            rows.append(base + [f"error: {r['error'][:90]}"] + [""] * (len(head) - len(base) - 1))
            continue
        rows.append(base + [
            v(r, "regs"), f"{r.get('spill_st', '?')}/{r.get('spill_ld', '?')}", f"{r['smem'] / 1024:.0f}",
            v(r, "occupancy"), v(r, "mma"), v(r, "ldmatrix"), v(r, "cp_async"), v(r, "bar"),
            v(r, "loop1.instrs"), v(r, "loop1.mma"), v(r, "loop1.ldmatrix"), v(r, "loop1.cp_async"),
            v(r, "lines"), f"{r['kiln_ms']:.0f}", v(r, "ptxas_ms", "{:.0f}")])
    return md_table(head, rows)


def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="the kiln command (build target kiln_cli)")
    ap.add_argument("--ptxas", default=os.environ.get("KILN_PTXAS") or "/usr/local/cuda/bin/ptxas")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--what", default="all", choices=["all", "attention", "matmul"])
    ap.add_argument("--quick", action="store_true", help="a dozen configurations")
    ap.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = ap.parse_args()

    cfgs = []
    if args.what in ("all", "attention"):
        cfgs += attention_configs(args.quick)
    if args.what in ("all", "matmul"):
        cfgs += matmul_configs(args.quick)
    recs = []
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        for i, cfg in enumerate(cfgs):
            rec = compile_one(args, cfg, tmp)
            recs.append(rec)
            log(f"[{i + 1}/{len(cfgs)}] {rec['kernel']} {rec['defines']} w{rec['warps']} s{rec['stages']}: "
                + (rec["error"] if "error" in rec else
                   f"regs {rec.get('regs')} spill {rec.get('spill_st')} smem {rec['smem']}"))
    cmd_hints = " ".join(f"--assume {h}=16" for h in ATTN_HINTS)
    md = [f"ptx_study.py, {args.arch}, {len(recs)} configurations in {time.time() - t0:.0f} s", "",
          "Attention: `kiln compile lang/lib/attention_fwd.tile -k attn_fwd_DT -D HEAD_DIM=D -D BLOCK_M=BM "
          f"-D BLOCK_N=BN -D CAUSAL=C --num-warps W --num-stages S --arch {args.arch} --emit ptx --stats "
          f"{cmd_hints}`, then `ptxas -v -arch={args.arch}`.", ""]
    att = [r for r in recs if r["what"] == "attention"]
    mm = [r for r in recs if r["what"] == "matmul"]
    if att:
        md += [attention_table(att), ""]
    if mm:
        md += ["Matmul: `kiln compile tools/bench/matmul_tc.tile -k matmul_tc_DT -D N=4096 -D K=4096 "
               "-D BLOCK_M=.. -D BLOCK_N=.. -D BLOCK_K=.. --num-warps W --num-stages S "
               + " ".join(f"--assume {h}=16" for h in MATMUL_HINTS) + "`", "", matmul_table(mm), ""]
    text = "\n".join(md)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ptx_study.json"), "w") as f:
        json.dump(recs, f, indent=1)
    with open(os.path.join(args.out, "ptx_study.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
