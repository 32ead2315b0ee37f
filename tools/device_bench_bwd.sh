#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: the attention backward benchmark (tools/bench/bench_attention_bwd.py: Kiln's
# kiln_attention_bwd through the bundle's libkiln_all.so, atomic and deterministic, against
# SDPA's FlashAttention-2, cuDNN and efficient backwards; backward alone and forward+backward;
# the gradient check first), then its SVG charts (tools/bench/plot_svg.py). Fits one `run`
# call of 8 minutes: the benchmark stops starting shapes after KILN_BWD_BUDGET_S (default 360 s)
# and is killed at 420 s. Arguments go to the benchmark, e.g. --quick (f16, N 1k/4k/16k, ~2 min)
# or --dtypes bf16. Results in $OUT: attention_bwd_bench.{csv,json,md}, img/attention_bwd.svg,
# img/attention_fwd_bwd.svg (copy them to docs/img/), bench_bwd.log; the table is printed last.
#   device run, carry [".carry"]:  bash tools/device_bench_bwd.sh [--quick]
# Candidate schedules (checked against float64 first, then timed beside the table's rows and the
# peers, FA4 among them when flash_attn.cute imports), e.g. FlashAttention-3's dK/dV structure:
#   bash tools/device_bench_bwd.sh --quick --head-dims 64,128 --schedules 64x128/8/2/ws/tma,64x64/4/2
# A "dA.B:" prefix keeps a candidate to those head dims. FA3's structure where the loop body has
# SRAM buffers (sram-alloc keeps the mbarrier ring under warp specialisation): the atomic dQ at
# d 64 / 128 (provider kiln@d64.128:..., against kiln_det@ the same, which is the current FA3
# rows' schedule), and d 256 on both kernels (kiln@ / kiln_det@d256:..., against the table's row):
#   bash tools/device_bench_bwd.sh --quick --head-dims 64,128,256 \
#     --schedules d64.128:64x128/8/2/ws/tma/lp+128x64/8/2,d256:64x64/8/2/ws/tma/lp
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
timeout 420 python3 tools/bench/bench_attention_bwd.py --lib "$kiln/lib/libkiln_all.so" --out "$out" \
  --budget-s "${KILN_BWD_BUDGET_S:-360}" "$@" >"$out/bench_bwd.log" 2>&1
echo "bench_attention_bwd exit $?"
if [ -f "$out/attention_bwd_bench.csv" ]; then
  python3 tools/bench/plot_svg.py --preset backward "$out/attention_bwd_bench.csv" -o "$out/img"
  cat "$out/attention_bwd_bench.md"
else
  tail -40 "$out/bench_bwd.log"
fi
