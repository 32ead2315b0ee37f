#!/usr/bin/env python3
"""plot_svg.py — the benchmark CSVs as SVG charts, in pure Python (no matplotlib: the GPU host
may lack it and the docs must not need it).

A chart is a grid of panels, one per distinct value of the --panels columns; in each panel
one line (or one bar per x value) per distinct value of the --series column, --y against --x.
Rows with an empty --y cell (a provider that failed on that shape) are left out. Each panel
has its own y axis from 0. Colours follow the order in which series first appear in the
CSV, so a provider keeps its colour across panels; --highlight series are drawn thicker.

  plot_svg.py CSV -o OUT.svg --x n --y tflops --series provider --panels dtype,d,causal \\
              [--where pass=bwd] [--kind line|bar] [--logx] [--title T] [--xlabel X] [--ylabel Y]
  plot_svg.py --preset forward  attention_bench.csv     [-o docs/img]   attention_fwd.svg
  plot_svg.py --preset backward attention_bwd_bench.csv [-o docs/img]   attention_bwd.svg,
                                                                        attention_fwd_bwd.svg
  plot_svg.py --preset decode   decode_bench.csv        [-o docs/img]   decode.svg
  plot_svg.py --preset flex     flex_bench.csv          [-o docs/img]   attention_flex.svg

The CSVs are what bench_attention.py, bench_attention_bwd.py, bench_decode.py and bench_flex.py
write. A preset may set x_order="csv" (categories and panels in the CSV's order, not sorted),
panel_w (the panels' width), columns (panels per row; --columns overrides it) and colors
({series: colour}).
Exit status 0; 2 with a message when the CSV lacks a column or no row matches.
"""
import argparse
import csv
import math
import os
import sys
from xml.sax.saxutils import escape, quoteattr

PALETTE = ["#d62728", "#ff9896", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f",
           "#e377c2", "#17becf"]
PANEL_W, PANEL_H = 330, 230
MARGIN = {"left": 58, "right": 14, "top": 26, "bottom": 42}

PRESETS = {
    "forward": [dict(out="attention_fwd.svg", x="n", y="tflops", series="provider", panels="dtype,d,causal",
                     kind="line", logx=True, title="Attention forward", xlabel="N (sequence length)",
                     ylabel="TFLOP/s")],
    "backward": [dict(out="attention_bwd.svg", x="n", y="tflops", series="provider", panels="dtype,d,causal",
                      where="pass=bwd", kind="line", logx=True, title="Attention backward",
                      xlabel="N (sequence length)", ylabel="TFLOP/s (2.5 x forward FLOPs)"),
                 dict(out="attention_fwd_bwd.svg", x="n", y="tflops", series="provider", panels="dtype,d,causal",
                      where="pass=fwd_bwd", kind="line", logx=True, title="Attention forward + backward",
                      xlabel="N (sequence length)", ylabel="TFLOP/s (3.5 x forward FLOPs)")],
    "decode": [dict(out="decode.svg", x="n", y="gbs", series="provider", panels="batch", kind="bar",
                    title="Decode: GB/s of K and V read", xlabel="N (cache length)", ylabel="GB/s")],
    # bench_flex.py: Kiln against FlexAttention per variant, a panel per pass (and N), variants in
    # the CSV's order on wide panels (their names are the x labels)
    "flex": [dict(out="attention_flex.svg", x="variant", y="tflops", series="provider", panels="pass,n",
                  kind="bar", x_order="csv", panel_w=720, columns=1,
                  colors={"kiln": PALETTE[0], "flex": PALETTE[2]},
                  title="Attention variants: Kiln vs FlexAttention", xlabel="variant",
                  ylabel="TFLOP/s (visible entries)")],
}


class PlotError(Exception):
    pass


# ---------------------------------------------------------------- data

def number(text):
    """A CSV cell as a float, or None when empty or not a number."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def read_rows(path, spec):
    """The rows of CSV `path` that match spec["where"] ("col=value,..."), as dicts; raises
    PlotError when a column the spec names is missing or nothing matches."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        cols = reader.fieldnames or []
    where = [w.split("=", 1) for w in (spec.get("where") or "").split(",") if w]
    need = [spec["x"], spec["y"], spec["series"]] + panel_keys(spec) + [k for k, _ in where]
    missing = [c for c in need if c not in cols]
    if missing:
        raise PlotError(f"{path}: no column {', '.join(missing)} (it has {', '.join(cols)})")
    rows = [r for r in rows if all(r[k] == v for k, v in where)]
    if not rows:
        raise PlotError(f"{path}: no row matches {spec.get('where')}")
    return rows


def panel_keys(spec):
    return [k for k in (spec.get("panels") or "").split(",") if k]


def panel_title(keys, values):
    parts = []
    for k, v in zip(keys, values):
        if k == "causal":
            parts.append("causal" if v in ("1", "True", "true", "yes") else "not causal")
        elif k == "dtype":
            parts.append(v)
        elif k == "batch":
            parts.append(f"B = {v}")
        else:
            parts.append(f"{k} = {v}")
    return ", ".join(parts)


def ordered_unique(values):
    return list(dict.fromkeys(values))


def x_sort_key(v):
    n = number(v)
    return (0, n, "") if n is not None else (1, 0, v)


# ---------------------------------------------------------------- axes

def nice_ticks(vmax, count=5):
    """Ticks 0, step, 2 step, ... covering vmax, with step 1, 2 or 5 x 10^k."""
    if vmax <= 0:
        return [0.0, 1.0]
    raw = vmax / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    n = math.ceil(vmax / step - 1e-9)
    return [i * step for i in range(n + 1)]


def fmt_tick(v):
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-2:
        return f"{v:.0e}".replace("e+0", "e").replace("e+", "e")
    return f"{v:g}"


def fmt_x(v):
    n = number(v)
    if n is None:
        return v
    if n >= 1024 and n % 1024 == 0:
        return f"{int(n // 1024)}k"
    return f"{n:g}"


# ---------------------------------------------------------------- drawing

def svg_panel(rows, spec, colors, title):
    """The <g> of one panel (origin at its top-left corner)."""
    x_col, y_col, s_col = spec["x"], spec["y"], spec["series"]
    pts = {}   # series -> [(x text, y)]
    for r in rows:
        y = number(r[y_col])
        if y is not None:
            pts.setdefault(r[s_col], []).append((r[x_col], y))
    xs = ordered_unique(r[x_col] for r in rows)
    if spec.get("x_order") != "csv":
        xs.sort(key=x_sort_key)
    ymax = max((y for p in pts.values() for _, y in p), default=1.0)
    ticks = nice_ticks(ymax * 1.05)
    top = ticks[-1]
    w = spec.get("panel_w", PANEL_W) - MARGIN["left"] - MARGIN["right"]
    h = PANEL_H - MARGIN["top"] - MARGIN["bottom"]
    x0, y0 = MARGIN["left"], MARGIN["top"]

    def ypos(v):
        return y0 + h - v / top * h

    numeric = all(number(x) is not None for x in xs)
    if spec["kind"] == "line" and numeric and len(xs) > 1:
        nums = [number(x) for x in xs]
        f = (lambda v: math.log2(v)) if spec.get("logx") and min(nums) > 0 else (lambda v: v)
        lo, hi = f(min(nums)), f(max(nums))

        def xpos(x):
            return x0 + (f(number(x)) - lo) / (hi - lo) * w if hi > lo else x0 + w / 2
    else:   # categories, evenly spaced (bars always)
        def xpos(x):
            return x0 + (xs.index(x) + 0.5) * w / len(xs)

    out = [f'<g class="panel" data-title={quoteattr(title)}>',
           f'<text x="{x0 + w / 2:.1f}" y="{y0 - 9}" text-anchor="middle" font-weight="bold">{escape(title)}</text>']
    for t in ticks:   # horizontal grid and y labels
        yy = ypos(t)
        out.append(f'<line x1="{x0}" y1="{yy:.1f}" x2="{x0 + w}" y2="{yy:.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{x0 - 5}" y="{yy + 3.5:.1f}" text-anchor="end">{escape(fmt_tick(t))}</text>')
    for x in xs:
        xx = xpos(x)
        out.append(f'<line x1="{xx:.1f}" y1="{y0 + h}" x2="{xx:.1f}" y2="{y0 + h + 4}" stroke="#555"/>')
        out.append(f'<text x="{xx:.1f}" y="{y0 + h + 15}" text-anchor="middle">{escape(fmt_x(x))}</text>')
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#555"/>')
    if spec.get("xlabel"):
        out.append(f'<text x="{x0 + w / 2:.1f}" y="{y0 + h + 32}" text-anchor="middle">{escape(spec["xlabel"])}</text>')
    if spec.get("ylabel"):
        out.append(f'<text transform="translate(13,{y0 + h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                   f'{escape(spec["ylabel"])}</text>')
    series = [s for s in colors if s in pts]
    if spec["kind"] == "bar":
        group = w / len(xs) * 0.8
        bw = group / max(len(series), 1)
        for i, s in enumerate(series):
            for x, y in pts[s]:
                bx = xpos(x) - group / 2 + i * bw
                out.append(f'<rect class="bar" data-series={quoteattr(s)} data-x={quoteattr(x)} data-y="{y:g}" '
                           f'x="{bx:.1f}" y="{ypos(y):.1f}" width="{bw:.1f}" height="{y0 + h - ypos(y):.1f}" '
                           f'fill="{colors[s]}"><title>{escape(f"{s}, {x}: {y:g}")}</title></rect>')
    else:
        for s in series:
            p = sorted(pts[s], key=lambda t: x_sort_key(t[0]))
            width = 2.6 if s in spec.get("highlight", ()) else 1.4
            coords = " ".join(f"{xpos(x):.1f},{ypos(y):.1f}" for x, y in p)
            out.append(f'<polyline class="series" data-series={quoteattr(s)} points="{coords}" fill="none" '
                       f'stroke="{colors[s]}" stroke-width="{width}"/>')
            for x, y in p:
                out.append(f'<circle cx="{xpos(x):.1f}" cy="{ypos(y):.1f}" r="{width + 0.6:.1f}" '
                           f'fill="{colors[s]}"><title>{escape(f"{s}, {x}: {y:g}")}</title></circle>')
    out.append("</g>")
    return out


def render(rows, spec):
    """The whole SVG document for `rows` (already filtered) under `spec`."""
    keys = panel_keys(spec)
    groups = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(r)
    order = list(groups) if spec.get("x_order") == "csv" else sorted(groups, key=lambda t: [x_sort_key(v) for v in t])
    series = ordered_unique(r[spec["series"]] for r in rows)
    colors = {s: spec.get("colors", {}).get(s, PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)}
    ncol = max(1, min(spec.get("columns") or 4, len(order)))
    pw = spec.get("panel_w", PANEL_W)
    nrow = math.ceil(len(order) / ncol)
    legend_h = 22 * math.ceil(len(series) / 6)
    head = 30 + legend_h
    width, height = ncol * pw + 10, head + nrow * PANEL_H + 6
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.1f}" y="19" text-anchor="middle" font-size="14" font-weight="bold">'
           f'{escape(spec.get("title") or "")}</text>']
    for i, s in enumerate(series):   # legend: six entries a line
        lx, ly = 12 + (i % 6) * (width - 24) / 6, 36 + 22 * (i // 6)
        out.append(f'<g class="legend" data-series={quoteattr(s)}><rect x="{lx:.1f}" y="{ly - 8}" width="14" '
                   f'height="10" fill="{colors[s]}"/><text x="{lx + 19:.1f}" y="{ly + 1}">{escape(s)}</text></g>')
    for i, key in enumerate(order):
        ox, oy = 5 + (i % ncol) * pw, head + (i // ncol) * PANEL_H
        out.append(f'<g transform="translate({ox},{oy})">')
        out += svg_panel(groups[key], spec, colors, panel_title(keys, key) or spec.get("y", ""))
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plot(csv_path, out_path, spec):
    spec = dict(spec)
    spec.setdefault("kind", "line")
    spec.setdefault("highlight", ("kiln",))
    svg = render(read_rows(csv_path, spec), spec)
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    with open(out_path, "w") as f:
        f.write(svg)
    return out_path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("-o", "--out", default=None, help="the SVG (a folder with --preset; default docs/img)")
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--x", default="n")
    ap.add_argument("--y", default="tflops")
    ap.add_argument("--series", default="provider")
    ap.add_argument("--panels", default="", help="comma list of columns: one panel per distinct value")
    ap.add_argument("--where", default="", help="col=value,...: only these rows")
    ap.add_argument("--kind", choices=("line", "bar"), default="line")
    ap.add_argument("--logx", action="store_true", help="log2 x axis (lines with numeric x)")
    ap.add_argument("--columns", type=int, default=None, help="panels per row (default 4, or the preset's)")
    ap.add_argument("--highlight", default="kiln", help="comma list of series drawn thicker")
    ap.add_argument("--title", default="")
    ap.add_argument("--xlabel", default="")
    ap.add_argument("--ylabel", default="")
    a = ap.parse_args(argv)
    try:
        if a.preset:
            folder = a.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "img")
            for spec in PRESETS[a.preset]:
                spec = dict(spec, columns=a.columns or spec.get("columns"), highlight=tuple(a.highlight.split(",")))
                print(plot(a.csv, os.path.join(folder, spec.pop("out")), spec))
        else:
            if not a.out:
                raise PlotError("-o OUT.svg is needed without --preset")
            spec = {k: getattr(a, k) for k in ("x", "y", "series", "panels", "where", "kind", "logx", "columns",
                                               "title", "xlabel", "ylabel")}
            spec["highlight"] = tuple(a.highlight.split(","))
            print(plot(a.csv, a.out, spec))
    except (PlotError, OSError) as exc:
        print(f"plot_svg.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
