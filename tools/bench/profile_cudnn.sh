#!/usr/bin/env bash
# profile_cudnn.sh — Nsight Compute on cuDNN's SDPA forward kernel and on Kiln's for the same
# shape (f16, [b, h, s, d], 16k tokens, hidden 2048, not causal), a short summary of each
# (time, grid, registers, SRAM, instructions, throughput). Runs on the GPU machine after
# `. tools/device_env.sh` (never changes clocks: --clock-control none). Usage, from the root:
#   HEAD_DIMS="256 128" N=4096 SCHEDS=128x64/8/2 bash tools/bench/profile_cudnn.sh
# Writes $OUT/prof/ (details and raw pages) and prints the summaries.
set -uo pipefail
. tools/device_env.sh
o=$out/prof; mkdir -p "$o"
n=${N:-4096}
for d in ${HEAD_DIMS:-256 128}; do
  D=$d N=$n FA2=0 SCHEDS=${SCHEDS:-128x64/8/2} OUT=$out timeout 200 \
    bash tools/bench/profile_attention.sh "$kiln/bin/kiln-bench-attn" >"$o/kiln_d$d.summary" 2>&1
  h=$((2048 / d)); b=$((16384 / n))
  cat >/tmp/cudnn_once.py <<PY
import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn($b, $h, $n, $d, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    for _ in range(3):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
  ncu --clock-control none --target-processes all --launch-skip 2 --launch-count 1 -k regex:cudnn \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy \
    --section LaunchStats --section InstructionStats --section SchedulerStats -f -o "$o/cudnn_d$d" \
    python3 /tmp/cudnn_once.py >"$o/cudnn_d$d.log" 2>&1
  ncu --import "$o/cudnn_d$d.ncu-rep" --page details >"$o/cudnn_d$d.details.txt" 2>&1
  ncu --import "$o/cudnn_d$d.ncu-rep" --page raw >"$o/cudnn_d$d.raw.txt" 2>&1
  rm -f "$o/cudnn_d$d.ncu-rep"
done
keys='Duration|Registers Per Thread|Achieved Occupancy|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued Instruction|Dynamic Shared Memory Per Block|Block Size|Grid Size|Executed Instructions  '
for f in "$o"/*.details.txt; do
  echo "--- $(basename "$f" .details.txt)"
  sed -n 2p "$f" | cut -c1-160
  grep -E "$keys" "$f" | sed 's/  */ /g' | head -14
done
