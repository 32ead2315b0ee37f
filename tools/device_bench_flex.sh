#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: Kiln's shipped attention variants against PyTorch's FlexAttention
# (tools/bench/bench_flex.py: kiln_attention_fwd/bwd with each variant through the bundle's
# libkiln_all.so against torch.compile(flex_attention) + create_block_mask; the float64
# correctness check of each variant, forward/backward/forward+backward TFLOP/s over the visible
# entries, cold compile times), then its SVG chart (tools/bench/plot_svg.py --preset flex).
# Fits one `run` call of 10 minutes: the benchmark starts no variant after KILN_FLEX_BUDGET_S
# (default 420 s) and is killed at 540 s. Arguments go to the benchmark, e.g. --quick (N 4096)
# or --variants causal,document. Results in $OUT: flex_bench.{csv,json,md},
# img/attention_flex.svg (copy it to docs/img/), bench_flex.log; the tables are printed last.
# Exit status: the benchmark's (1 when a check or a provider failed: see the FAILED lines).
#   device run, carry [".carry"]:  bash tools/device_bench_flex.sh [--quick]
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
timeout 540 python3 tools/bench/bench_flex.py --lib "$kiln/lib/libkiln_all.so" --out "$out" \
  --budget-s "${KILN_FLEX_BUDGET_S:-420}" "$@" >"$out/bench_flex.log" 2>&1
rc=$?
echo "bench_flex exit $rc"
if [ -f "$out/flex_bench.csv" ]; then
  python3 tools/bench/plot_svg.py --preset flex "$out/flex_bench.csv" -o "$out/img"
  grep '^FAILED' "$out/bench_flex.log"
  cat "$out/flex_bench.md"
else
  tail -60 "$out/bench_flex.log"
fi
exit $rc
