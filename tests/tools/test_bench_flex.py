#!/usr/bin/env python3
"""test_bench_flex.py — the parts of tools/bench/bench_flex.py (Kiln's variants against
FlexAttention) that need no GPU and no torch.

1. Visible entries: visible_count (closed forms per row or per document) equals the mask
   predicate summed over every (b, i, j) on small shapes, for every shipped case and for
   every mask kind with Kiln's causal flag on and off, with edge parameters (a window wider
   than N, unlimited sides, prefix 0 and > N, more documents than tokens); the predicate
   itself is checked on hand-picked pairs; the packed documents are ndocs runs of distinct
   ids summing to N; the FLOPs are 4 d per visible pair (the causal count at N 8192 by the
   formula B H N (N + 1) / 2).
2. Arguments: the defaults (N 8192, --quick N 4096), --variants picks and orders, an unknown
   variant or a non-positive size is refused with exit status 2.
3. Reports: --dry-run --quick (fake timings) writes a CSV of every variant, provider and pass
   (the plain kernels: Kiln only) that plot_svg.py --preset flex draws as three panels (fwd,
   bwd, fwd_bwd, in that order) of one bar per variant and provider; a failed check or a
   provider's error is listed under FAILED in the markdown and makes failures() non-empty.

Usage: test_bench_flex.py SOURCE_DIR
"""
import contextlib
import csv
import io
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

src = sys.argv[1]
sys.path.insert(0, os.path.join(src, "tools", "bench"))
sys.dont_write_bytecode = True
import bench_flex  # noqa: E402
import plot_svg  # noqa: E402

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def brute(case, p, batch, heads, n):
    f = bench_flex.visible_pred(case, p, batch, n)
    return heads * sum(1 for b in range(batch) for i in range(n) for j in range(n) if f(b, i, j))


# ---- 1. visible entries
PARAMS = {
    None: [{}],
    "causal": [{}],
    "window": [{"window_left": 3, "window_right": 0}, {"window_left": 0, "window_right": 2},
               {"window_left": 100, "window_right": 5}, {"window_left": -1, "window_right": 4},
               {"window_left": 5, "window_right": -1}, {"window_left": -1, "window_right": -1}],
    "prefix": [{"prefix_len": 0}, {"prefix_len": 5}, {"prefix_len": 200}],
    "document": [{"ndocs": 1}, {"ndocs": 3}, {"ndocs": 8}, {"ndocs": 500}],
}
n_cases = 0
for mask, plist in PARAMS.items():
    for causal in (False, True):
        case = bench_flex.Case("t", "t", causal, mask=mask)
        for p in plist:
            for batch, heads, n in ((1, 1, 1), (2, 3, 7), (2, 1, 37), (3, 2, 64)):
                got, want = bench_flex.visible_count(case, p, batch, heads, n), brute(case, p, batch, heads, n)
                expect(got == want, f"visible_count mask={mask} causal={causal} {p} B{batch} H{heads} N{n}: "
                                    f"{got}, brute force {want}")
                n_cases += 1
for case in bench_flex.CASES:
    for params in (case.params, case.check_params):
        p = params(50)
        got, want = bench_flex.visible_count(case, p, 2, 2, 50), brute(case, p, 2, 2, 50)
        expect(got == want, f"{case.name} {p}: visible_count {got}, brute force {want}")
        n_cases += 1
expect(n_cases > 120, f"only {n_cases} counts compared")

pred = bench_flex.visible_pred
win = bench_flex.Case("w", "w", True, mask="window")
f = pred(win, {"window_left": 2, "window_right": 0}, 1, 10)
expect([f(0, 5, j) for j in range(10)] == [j in (3, 4, 5) for j in range(10)], "window 2 causal, row 5")
f = pred(bench_flex.Case("p", "p", False, mask="prefix"), {"prefix_len": 4}, 1, 10)
expect([f(0, 1, j) for j in range(10)] == [j < 4 for j in range(10)], "prefix 4, row 1 sees the prefix")
expect([f(0, 7, j) for j in range(10)] == [j <= 7 for j in range(10)], "prefix 4, row 7 is causal")
expect(pred(bench_flex.CASE_BY_NAME["causal"], {}, 1, 5)(0, 2, 3) is False, "causal.tile: key after the query")

for n, nd in ((1000, 8), (8192, 8), (5, 8), (2, 2)):
    for b in range(3):
        lens = bench_flex.doc_lengths(n, nd, b)
        ids = bench_flex.doc_ids(n, nd, b)
        runs = [i for i in range(n) if i == 0 or ids[i] != ids[i - 1]]
        expect(sum(lens) == n and min(lens) >= 1 and len(lens) == min(nd, n) and len(ids) == n and
               len(runs) == len(lens) == len(set(ids)), f"documents N {n} ndocs {nd} b {b}: {lens}")
expect(bench_flex.doc_lengths(1000, 8, 0) != bench_flex.doc_lengths(1000, 8, 1), "every sequence has its own cuts")
expect(set(bench_flex.doc_ids(100, 4, 0)).isdisjoint(bench_flex.doc_ids(100, 4, 1)), "ids differ across sequences")

causal = bench_flex.CASE_BY_NAME["causal"]
vis = bench_flex.visible_count(causal, {}, 2, 16, 8192)
expect(vis == 2 * 16 * 8192 * 8193 // 2, f"causal at B 2 H 16 N 8192: {vis}")
expect(bench_flex.fwd_flops(vis, 128) == 4.0 * 128 * vis, "forward FLOPs: 4 d per visible pair")
swa = bench_flex.CASE_BY_NAME["swa1024"]
vis = bench_flex.visible_count(swa, swa.params(8192), 1, 1, 8192)
expect(vis == sum(min(i, 1024) + 1 for i in range(8192)), f"swa1024 at N 8192: {vis}")


# ---- 2. arguments
def parse_fails(argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            bench_flex.parse_args(argv)
    except SystemExit as exc:
        return exc.code == 2, err.getvalue()
    return False, ""


a = bench_flex.parse_args([])
expect(a.n == 8192 and a.batch == 2 and a.heads == 16 and a.head_dim == 128 and a.dtype == "f16" and
       a.variants == [c.name for c in bench_flex.CASES] and a.target_ms == 40.0, f"defaults: {vars(a)}")
a = bench_flex.parse_args(["--quick", "--variants", "gemma2,causal"])
expect(a.n == 4096 and a.variants == ["gemma2", "causal"] and a.target_ms == 15.0, f"--quick: {vars(a)}")
expect(bench_flex.parse_args(["--quick", "--n", "1024"]).n == 1024, "--n over --quick")
for argv, word in ((["--variants", "causal,nope"], "nope"), (["--batch", "0"], "--batch"),
                   (["--check-n", "8"], "--check-n"), (["--dtype", "f32"], "f32")):
    refused, msg = parse_fails(argv)
    expect(refused and word in msg, f"{argv}: refused {refused}, '{msg.strip()[-200:]}'")

# ---- 3. reports
NS = "{http://www.w3.org/2000/svg}"
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "out")
    p = subprocess.run([sys.executable, os.path.join(src, "tools", "bench", "bench_flex.py"), "--dry-run", "--quick",
                        "--out", out], capture_output=True, text=True)
    expect(p.returncode == 0 and p.stdout.rstrip().splitlines()[-1].startswith("| gemma2"),
           f"--dry-run: exit {p.returncode}, the summary not last: {p.stdout[-300:]} {p.stderr[-500:]}")
    expect("| probe (a text never seen) |" in p.stdout and "A variant never seen (the probe)" in p.stdout,
           "--dry-run: no line for the never-seen variant")
    with open(os.path.join(out, "flex_bench.csv"), newline="") as fh:
        recs = list(csv.DictReader(fh))
    n_var = len(bench_flex.CASES)
    expect(len(recs) == (2 * n_var + 2) * 3, f"CSV: {len(recs)} records, want (2 x {n_var} + 2 plain) x 3 passes")
    expect(all(r["n"] == "4096" and float(r["tflops"]) > 0 for r in recs), "CSV: N and TFLOP/s")
    doc = [r for r in recs if r["variant"] == "document"][0]
    vis = bench_flex.visible_count(bench_flex.CASE_BY_NAME["document"], {"ndocs": 8}, 2, 16, 4096)
    expect(int(doc["visible"]) == vis, f"CSV: document visible {doc['visible']}, want {vis}")
    img = os.path.join(tmp, "img")
    with contextlib.redirect_stdout(io.StringIO()):
        rc = plot_svg.main(["--preset", "flex", os.path.join(out, "flex_bench.csv"), "-o", img])
    expect(rc == 0, f"plot_svg --preset flex: exit {rc}")
    if rc == 0:
        root = ET.parse(os.path.join(img, "attention_flex.svg")).getroot()
        panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
        titles = [g.get("data-title") for g in panels]
        expect(titles == [f"pass = {ps}, n = 4096" for ps in ("fwd", "bwd", "fwd_bwd")], f"flex chart: {titles}")
        for g in panels:
            bars = [(r.get("data-series"), r.get("data-x")) for r in g.iter(NS + "rect") if r.get("class") == "bar"]
            expect(len(bars) == 2 * n_var + 2 and ("flex", "gemma2") in bars and ("kiln", "plain") in bars,
                   f"flex chart {g.get('data-title')}: {len(bars)} bars")

    res = {"args": vars(bench_flex.parse_args(["--quick"])), "rows": [], "device": "x", "skipped": [],
           "checks": [{"variant": "alibi", "ok": False, "failed": ["Kiln dq error 1 > bound 0.1"], "params": {}}]}
    res["rows"].append({"variant": "alibi", "visible": 10, "fraction": 0.5, "flex_error": "RuntimeError: boom",
                        "results": {"kiln": {}, "flex": {ps: {"error": "fail"} for ps in bench_flex.PASSES}}})
    res["failures"] = bench_flex.failures(res)
    md = bench_flex.markdown(res)
    expect(len(res["failures"]) == 2 and "FAILED: alibi: check: Kiln dq error" in md and
           "FAILED: alibi: flex: RuntimeError: boom" in md, f"failures: {res['failures']}")

print(f"bench_flex: {n_cases} visible counts, {'FAIL' if failures else 'ok'}")
sys.exit(1 if failures else 0)
