#!/usr/bin/env python3
"""test_plot_svg.py — tools/bench/plot_svg.py turns the benchmark CSVs into SVG charts.

On small made-up CSVs in the three benchmarks' formats (forward, backward, decode):
- every preset writes well-formed SVG (xml.etree parses it) with one panel per distinct
  value of the panel columns, titled by them, and a legend entry per series;
- lines: one polyline per series and panel, one vertex per row with a value (an empty
  cell, a provider that failed, is left out), x increasing with N on the log2 axis (equal
  steps for 1k, 2k, 4k), y decreasing as the value grows, in proportion (a value twice
  another is twice as far above the axis), both inside the plot area;
- --where selects rows (pass=bwd and pass=fwd_bwd differ);
- bars: one rect per (series, x) with a value, heights proportional to the values;
- text is escaped (a series named "a<b&c" keeps the document well-formed);
- a missing column or no matching row: exit status 2 and a message naming it;
- bench_attention_bwd.py --dry-run --quick (fake timings) writes a CSV of every shape,
  provider and pass that the backward preset draws (4 panels); a candidate schedule with a
  head-dim prefix (--schedules d256:...) has rows at those head dims only.

Usage: test_plot_svg.py SOURCE_DIR
"""
import csv
import io
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from contextlib import redirect_stderr, redirect_stdout

src = sys.argv[1]
script = os.path.join(src, "tools", "bench", "plot_svg.py")
sys.path.insert(0, os.path.dirname(script))
sys.dont_write_bytecode = True
import plot_svg  # noqa: E402

NS = "{http://www.w3.org/2000/svg}"
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def write_csv(path, fields, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def panels(svg_path):
    root = ET.parse(svg_path).getroot()
    return root, [g for g in root.iter(NS + "g") if g.get("class") == "panel"]


def polylines(panel):
    out = {}
    for pl in panel.iter(NS + "polyline"):
        pts = [tuple(float(c) for c in p.split(",")) for p in pl.get("points").split()]
        out[pl.get("data-series")] = pts
    return out


def plot_area(panel):
    r = next(r for r in panel.iter(NS + "rect") if r.get("fill") == "none")
    x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
    return x, y, w, h


def run(args):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = plot_svg.main(args)
    return rc, out.getvalue(), err.getvalue()


with tempfile.TemporaryDirectory() as tmp:
    # ---- backward: 2 panels (f16 d64 causal / not), 3 providers, 2 passes, one failure
    rows = []
    tf = {"kiln": [100, 200, 400], "sdpa_flash": [150, 150, 150], "a<b&c": [50, None, 75]}
    for causal in (0, 1):
        for prov, vals in tf.items():
            for n, v in zip((1024, 2048, 4096), vals):
                for ps, k in (("bwd", 1.0), ("fwd_bwd", 1.5)):
                    rows.append({"dtype": "f16", "d": 64, "causal": causal, "n": n, "batch": 16384 // n,
                                 "heads": 32, "provider": prov, "pass": ps, "ms": 1.0,
                                 "tflops": "" if v is None else v * k, "error": "fail" if v is None else ""})
    bwd_csv = os.path.join(tmp, "attention_bwd_bench.csv")
    write_csv(bwd_csv, list(rows[0]), rows)
    rc, out, err = run(["--preset", "backward", bwd_csv, "-o", os.path.join(tmp, "img")])
    expect(rc == 0, f"backward preset: exit {rc}: {err}")
    for name, k in (("attention_bwd.svg", 1.0), ("attention_fwd_bwd.svg", 1.5)):
        path = os.path.join(tmp, "img", name)
        root, ps = panels(path)
        expect(len(ps) == 2, f"{name}: {len(ps)} panels, want 2")
        titles = sorted(p.get("data-title") for p in ps)
        expect(titles == ["f16, d = 64, causal", "f16, d = 64, not causal"], f"{name}: titles {titles}")
        legend = [g.get("data-series") for g in root.iter(NS + "g") if g.get("class") == "legend"]
        expect(legend == ["kiln", "sdpa_flash", "a<b&c"], f"{name}: legend {legend}")
        for p in ps:
            lines = polylines(p)
            expect(sorted(lines) == sorted(tf), f"{name}: series {sorted(lines)}")
            expect(len(lines["a<b&c"]) == 2, f"{name}: the failed point was drawn: {lines['a<b&c']}")
            kx = [x for x, _ in lines["kiln"]]
            expect(kx[0] < kx[1] < kx[2] and abs((kx[1] - kx[0]) - (kx[2] - kx[1])) < 0.2,
                   f"{name}: log2 x positions {kx}")
            x0, y0, w, h = plot_area(p)
            base = y0 + h
            hk = [base - y for _, y in lines["kiln"]]
            expect(all(x0 - 0.1 <= x <= x0 + w + 0.1 and y0 - 0.1 <= y <= base + 0.1 for x, y in lines["kiln"]),
                   f"{name}: kiln's points leave the plot area")
            expect(abs(hk[1] / hk[0] - 2) < 0.02 and abs(hk[2] / hk[1] - 2) < 0.02,
                   f"{name}: heights {hk} not proportional to 100:200:400")
            fl = [base - y for _, y in lines["sdpa_flash"]]
            expect(abs(fl[0] / hk[0] - 1.5) < 0.02, f"{name}: flash/kiln height ratio {fl[0] / hk[0]}")
    # the two passes were told apart: the fwd_bwd chart's axis reaches higher
    ticks = {}
    for name in ("attention_bwd.svg", "attention_fwd_bwd.svg"):
        text = open(os.path.join(tmp, "img", name)).read()
        ticks[name] = max(int(t) for t in re.findall(r'text-anchor="end">(\d+)<', text))
    expect(ticks["attention_fwd_bwd.svg"] > ticks["attention_bwd.svg"], f"--where pass: same axes {ticks}")

    # ---- forward preset, generic CLI through a subprocess
    fwd_rows = [{"dtype": dt, "d": 128, "causal": 0, "n": n, "batch": 1, "heads": 16, "provider": p,
                 "ms": 1, "tflops": t, "error": ""}
                for dt in ("f16", "bf16") for n in (512, 16384) for p, t in (("kiln", 300), ("sdpa_cudnn", 500))]
    fwd_csv = os.path.join(tmp, "attention_bench.csv")
    write_csv(fwd_csv, list(fwd_rows[0]), fwd_rows)
    p = subprocess.run([sys.executable, script, "--preset", "forward", fwd_csv, "-o", os.path.join(tmp, "img")],
                       capture_output=True, text=True)
    expect(p.returncode == 0, f"forward preset as a program: {p.returncode} {p.stderr}")
    root, ps = panels(os.path.join(tmp, "img", "attention_fwd.svg"))
    expect(len(ps) == 2, f"forward: {len(ps)} panels, want 2 (one per dtype)")

    # ---- decode: bars, one panel per batch
    dec_rows = [{"dtype": "f16", "batch": b, "n": n, "heads": 32, "heads_kv": 8, "d": 128, "provider": p,
                 "gbs": g * b, "us": 10, "error": ""}
                for b in (1, 8) for n in (4096, 65536) for p, g in (("kiln", 100), ("sdpa_cudnn", 300))]
    dec_rows[0]["gbs"], dec_rows[0]["error"] = "", "fail"
    dec_csv = os.path.join(tmp, "decode_bench.csv")
    write_csv(dec_csv, list(dec_rows[0]), dec_rows)
    rc, out, err = run(["--preset", "decode", dec_csv, "-o", os.path.join(tmp, "img")])
    expect(rc == 0, f"decode preset: exit {rc}: {err}")
    root, ps = panels(os.path.join(tmp, "img", "decode.svg"))
    expect(len(ps) == 2, f"decode: {len(ps)} panels, want 2")
    for p in ps:
        bars = [r for r in p.iter(NS + "rect") if r.get("class") == "bar"]
        b1 = p.get("data-title") == "B = 1"
        expect(len(bars) == (3 if b1 else 4), f"decode {p.get('data-title')}: {len(bars)} bars")
        hs = {(r.get("data-series"), r.get("data-x")): float(r.get("height")) for r in bars}
        expect(abs(hs[("sdpa_cudnn", "65536")] / hs[("kiln", "65536")] - 3) < 0.02, f"decode: bar heights {hs}")

    # ---- errors: a missing column, no matching row
    rc, out, err = run([bwd_csv, "-o", os.path.join(tmp, "x.svg"), "--y", "gbs"])
    expect(rc == 2 and "gbs" in err, f"missing column: exit {rc}, '{err.strip()}'")
    rc, out, err = run([bwd_csv, "-o", os.path.join(tmp, "x.svg"), "--where", "pass=nope"])
    expect(rc == 2 and "pass=nope" in err, f"no row: exit {rc}, '{err.strip()}'")

    # ---- the backward benchmark's own CSV (--dry-run: its tables and CSV on fake numbers) feeds the charts
    bench = os.path.join(src, "tools", "bench", "bench_attention_bwd.py")
    p = subprocess.run([sys.executable, bench, "--dry-run", "--quick", "--out", os.path.join(tmp, "bwd")],
                       capture_output=True, text=True)
    expect(p.returncode == 0 and "kiln/FA2" in p.stdout and "kiln/FA4" in p.stdout,
           f"bench_attention_bwd.py --dry-run: exit {p.returncode}: {p.stderr[-500:]}")
    with open(os.path.join(tmp, "bwd", "attention_bwd_bench.csv"), newline="") as f:
        recs = list(csv.DictReader(f))
    expect(len(recs) == 12 * 6 * 2, f"bench CSV: {len(recs)} records, want 12 shapes x 6 providers x 2 passes")
    rc, out, err = run(["--preset", "backward", os.path.join(tmp, "bwd", "attention_bwd_bench.csv"), "-o",
                        os.path.join(tmp, "bwd")])
    root, ps = panels(os.path.join(tmp, "bwd", "attention_bwd.svg")) if rc == 0 else (None, [])
    expect(rc == 0 and len(ps) == 4, f"bench CSV -> charts: exit {rc} {err}, {len(ps)} panels (want 4)")

    # ---- a candidate schedule kept to its head dims ("d256:..."): rows at d 256 only, none at d 64
    p = subprocess.run([sys.executable, bench, "--dry-run", "--quick", "--head-dims", "64,256", "--schedules",
                        "d256:64x64/8/2/ws/tma/lp", "--out", os.path.join(tmp, "bwd256")], capture_output=True, text=True)
    recs = []
    if p.returncode == 0:
        with open(os.path.join(tmp, "bwd256", "attention_bwd_bench.csv"), newline="") as f:
            recs = list(csv.DictReader(f))
    cand = {r["d"] for r in recs if r["provider"].endswith("@d256:64x64/8/2/ws/tma/lp")}
    expect(p.returncode == 0 and cand == {"256"} and {r["d"] for r in recs} == {"64", "256"},
           f"bench_attention_bwd.py --schedules d256:...: exit {p.returncode}, candidate rows at d {cand}: "
           f"{p.stderr[-300:]}")

print("plot_svg: " + ("FAIL" if failures else "ok"))
sys.exit(1 if failures else 0)
