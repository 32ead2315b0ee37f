"""common.py — helpers shared by the benchmark scripts under tools/bench/.

  find_kiln_bench()      the kiln-bench binary: --kiln-bin, $KILN_BENCH, newest build*/kiln-bench
  find_binary(name)      the newest build*/<name> (kiln-bench-attn, kiln-bench-matmul, ...)
  json_lines(text)       the lines of a C driver's stdout that are JSON objects
  run_json(cmd)          run a C driver; its JSON lines, exit status and stderr (never raises)
  run_kiln_bench(...)    one kiln-bench measurement as a dict ({"error": ...} on failure)
  torch_median_ms(fn)    median time of a torch callable over ~target_ms of back-to-back
                         launches, each between CUDA events (attention and matmul benches)
  cuda_median_ms(fns)    median time of a torch callable, per launch between CUDA events,
                         rotating over several callables (input sets) to defeat the L2,
                         launches queued behind GPU work so host overhead stays out
  sets_for(bytes)        how many input sets to rotate over (the C driver's rule)
  gbps(bytes, ms)        decimal GB/s
  gpu_name()             the GPU's name (torch, else nvidia-smi, else "unknown")
  markdown_table(...)    a GitHub markdown table as a string
  tflops_cell(r)         a result's TFLOP/s for a table ("oom", "timeout", "budget", "fail", "—")
  tflops_ratio(a, b)     a's TFLOP/s over b's for a table ("—" when either has none)
  out_dir(...)           where results go: --out, else $OUT, else ./bench-out
  write_outputs(...)     <stem>.json and <stem>.md in that folder
  write_csv(...)         a CSV of flat records (what tools/bench/plot_svg.py draws)
  write_results(...)     all three: <stem>.json, .md and .csv

Only the standard library at import time: torch is imported inside the functions that
need it, so a --dry-run works on a machine without torch (or a GPU).
"""
import csv
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
L2_MIB = 50.0          # H100 and H200: 50 MiB of L2
MAX_SETS = 256         # the C driver's cap


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the C driver

def find_binary(name, explicit=None, env_var=None, root=ROOT):
    """Path of a C driver CMake builds (kiln-bench, kiln-bench-attn, kiln-bench-matmul),
    or None: the explicit path, $<env_var>, else the newest <root>/build*/<name> or
    <root>/tools/bench/<name>."""
    for p in (explicit, os.environ.get(env_var) if env_var else None):
        if p:
            return os.path.abspath(p) if os.path.isfile(p) and os.access(p, os.X_OK) else None
    found = [p for p in glob.glob(os.path.join(root, "build*", name))
             + [os.path.join(root, "tools", "bench", name)]
             if os.path.isfile(p) and os.access(p, os.X_OK)]
    return max(found, key=os.path.getmtime) if found else None


def find_kiln_bench(explicit=None, root=ROOT):
    """Path of kiln-bench, or None: explicit path, $KILN_BENCH, else the newest
    <root>/build*/kiln-bench or <root>/tools/bench/kiln-bench."""
    return find_binary("kiln-bench", explicit, "KILN_BENCH", root)


def json_lines(text):
    """The lines of `text` that parse as JSON objects, in order."""
    recs = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                recs.append(rec)
    return recs


def run_json(cmd, timeout=300, env=None):
    """Run cmd; returns (records, returncode, stderr). records: the stdout lines
    that parse as JSON objects. A timeout or a binary that cannot start gives
    returncode None and the reason in stderr."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return [], None, f"timeout after {timeout} s"
    except OSError as exc:
        return [], None, f"cannot run {cmd[0]}: {exc}"
    return json_lines(p.stdout), p.returncode, p.stderr


def last_line(text):
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def run_kiln_bench(binary, args, root=ROOT, timeout=300, env=None):
    """One kiln-bench run: `args` after the binary (kernel name first). Returns its
    JSON record with "cmd" added; on failure {"error": <one line>, "cmd": ...},
    and a wrong result keeps its numbers with "ok": false and "error": "wrong result"."""
    cmd = [binary] + [str(a) for a in args] + ["--root", root]
    recs, rc, err = run_json(cmd, timeout=timeout, env=env)
    text = " ".join(cmd)
    if recs and rc == 0:
        return dict(recs[-1], cmd=text)
    if recs and recs[-1].get("ok") is False:
        return dict(recs[-1], cmd=text, error="wrong result", detail=last_line(err))
    why = last_line(err) or f"exit status {rc}"
    return {"error": why, "cmd": text, "rc": rc}


# ---------------------------------------------------------------- torch timing

def sets_for(set_bytes, l2_mib=L2_MIB):
    """Input sets to rotate over so their total is >= 2x the L2 (1 when one set is)."""
    want = 2.0 * l2_mib * 1048576.0
    if set_bytes >= want:
        return 1
    return int(min(max(2, math.ceil(want / max(set_bytes, 1))), MAX_SETS))


def torch_median_ms(fn, target_ms=50.0, max_launches=1000):
    """Median time of fn() in ms: one warm-up call, a short estimate, then enough
    launches to fill ~target_ms (5 to max_launches), each between its own pair of
    CUDA events."""
    import torch
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    torch.cuda.synchronize()
    est = max(s.elapsed_time(e) / 3, 1e-3)
    n = int(min(max(target_ms / est, 5), max_launches))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(starts, ends))


def cuda_median_ms(fns, reps=100, warmup=10, queue_ahead=True):
    """Median over `reps` launches of the callables in `fns` (one, or a list
    taken in turn: one per input set), each launch between its own pair of CUDA
    events, all queued before one synchronisation, after `warmup` launches.
    queue_ahead: as kiln-bench does, the GPU first gets memsets of a 256 MiB
    scratch buffer lasting 1.5x the host time needed to queue the timed launches
    (measured on the warm-up), so no launch's time includes the host's launch
    overhead. Returns (median_ms, min_ms)."""
    import time
    import torch
    if callable(fns):
        fns = [fns]
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    t0 = time.perf_counter()
    for i in range(warmup):
        starts[0].record()
        fns[i % len(fns)]()
        ends[0].record()
    host_ms = (time.perf_counter() - t0) * 1e3 / warmup if warmup else 0.02
    torch.cuda.synchronize()
    scratch = None
    if queue_ahead:
        scratch = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        starts[0].record()
        scratch.fill_(0x5A)
        ends[0].record()
        torch.cuda.synchronize()
        one = starts[0].elapsed_time(ends[0])
        k = min(max(math.ceil(1.5 * host_ms * reps / one), 1), 2000) if one > 0 else 1
        for i in range(k):
            scratch.fill_(i & 0xFF)
    for i in range(reps):
        starts[i].record()
        fns[i % len(fns)]()
        ends[i].record()
    torch.cuda.synchronize()
    del scratch
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9 if ms and ms > 0 else float("nan")


def gpu_name():
    try:
        import torch
        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:
        pass
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30).stdout.strip().splitlines()
            if out:
                return out[0].strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "unknown"


# ---------------------------------------------------------------- tables and files

def fmt(x, digits=0, suffix=""):
    """A number for a table; None / NaN as '-'; strings as they are."""
    if isinstance(x, str):
        return x
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:,.{digits}f}{suffix}"


def tflops_cell(r):
    """A result record ({"tflops": x} or {"error": why}; None or {}: not run) as a table cell."""
    if not r:
        return "—"
    if "error" in r:
        return r["error"] if r["error"] in ("oom", "timeout", "budget") else "fail"
    return f"{r['tflops']:.0f}" if r["tflops"] >= 10 else f"{r['tflops']:.2g}"


def tflops_ratio(a, b):
    """a's TFLOP/s over b's, for a table."""
    if not a or not b or "tflops" not in a or "tflops" not in b or b["tflops"] <= 0:
        return "—"
    x = a["tflops"] / b["tflops"]
    return f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"


def markdown_table(headers, rows, align=None):
    """headers: column names; rows: lists of cells (str() applied); align: a string
    of 'l'/'r' per column (default: first two left, the rest right)."""
    n = len(headers)
    align = align or ("ll" + "r" * max(n - 2, 0))[:n]
    cells = [[str(c) for c in r] + [""] * (n - len(r)) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(vals):
        out = []
        for v, w, a in zip(vals, widths, align):
            out.append(v.rjust(w) if a == "r" else v.ljust(w))
        return "| " + " | ".join(out) + " |"
    sep = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                         for w, a in zip(widths, align)) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])


def out_dir(explicit=None, default="bench-out"):
    path = explicit or os.environ.get("OUT") or default
    os.makedirs(path, exist_ok=True)
    return os.path.abspath(path)


def write_outputs(folder, stem, data, markdown):
    """<folder>/<stem>.json (data, NaN written as null) and <folder>/<stem>.md."""
    def clean(v):
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            return None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v
    jpath, mpath = os.path.join(folder, stem + ".json"), os.path.join(folder, stem + ".md")
    with open(jpath, "w") as f:
        json.dump(clean(data), f, indent=1)
        f.write("\n")
    with open(mpath, "w") as f:
        f.write(markdown.rstrip("\n") + "\n")
    return jpath, mpath


def write_results(out, stem, data, markdown, fields, records):
    """A benchmark's results under out_dir(out): <stem>.json, <stem>.md and <stem>.csv (the
    records with the columns `fields`); logs where, and returns the folder."""
    folder = out_dir(out)
    write_outputs(folder, stem, data, markdown)
    write_csv(os.path.join(folder, stem + ".csv"), fields, records)
    log(f"wrote {folder}/{stem}.{{csv,json,md}}")
    return folder


def write_csv(path, fields, records):
    """records (dicts) as a CSV with the columns `fields`; floats with 5 significant digits
    after the point at most, NaN/None as empty cells, keys not in `fields` left out."""
    def text(v):
        if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
            return ""
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, float):
            return f"{v:.5g}" if abs(v) < 1e5 else f"{v:.0f}"
        return v
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in records:
            w.writerow({k: text(r.get(k)) for k in fields})
    return path
