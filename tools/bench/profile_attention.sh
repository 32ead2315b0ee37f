#!/usr/bin/env bash
# profile_attention.sh — Nsight Compute on one Kiln attention forward kernel and on SDPA's
# FlashAttention-2 kernel for the same shape (f16, [b, h, s, d], 16k tokens, hidden 2048),
# so their stall reasons, pipe utilisation, SRAM bank conflicts and occupancy can be compared.
# Runs on the GPU machine (Firecracker: ncu reads counters there; never changes clocks:
# --clock-control none). Usage, from the repository root:
#   D=128 N=4096 SCHEDS="128x64/8/2 128x64/4/2" bash tools/bench/profile_attention.sh /tmp/kiln/bin/kiln-bench-attn
# A schedule may end in modes as in bench_attention.py (/pp, /mb, /ppmb, /ov, /sync: 128x64/8/2/ov);
# FA2=0 (or SKIP_FA2=1) skips the FlashAttention-2 kernel.
# Writes $OUT/prof/{kiln_*,fa2}_d$D.{details,raw}.txt and prints a short comparison.
set -uo pipefail
bin=${1:-/tmp/kiln/bin/kiln-bench-attn}
out=${OUT:-/tmp/kiln-out}/prof
mkdir -p "$out"
d=${D:-128}; n=${N:-4096}; h=$((2048 / d)); b=$((16384 / n))
scheds=${SCHEDS:-128x64/8/2}
sections=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy
          --section LaunchStats --section MemoryWorkloadAnalysis --section InstructionStats --section SchedulerStats
          --section SourceCounters)
metrics=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
report() {  # name: turn the .ncu-rep into text
  ncu --import "$out/$1.ncu-rep" --page details >"$out/$1.details.txt" 2>&1
  ncu --import "$out/$1.ncu-rep" --page raw >"$out/$1.raw.txt" 2>&1
  # per-SASS-instruction stall samples (SourceCounters): which instructions the warps wait at
  ncu --import "$out/$1.ncu-rep" --page source --csv --print-source sass >"$out/$1.sass.csv" 2>&1
  rm -f "$out/$1.ncu-rep"
}
for s in $scheds; do
  IFS=x/ read -r bm bn w st m1 m2 <<<"$s"   # modes: bench_attention.py's suffixes (pp, mb, ppmb, ov, ws, sync)
  flags=()
  for m in $m1 $m2; do
    case $m in ov) flags+=(--overlap) ;; sync) flags+=(--no-wgmma) ;; ws) flags+=(--warp-specialize) ;; esac
    case $m in *pp*) flags+=(--pingpong) ;; esac
    case $m in *mb) flags+=(--mbarrier) ;; esac
  done
  name=kiln_${bm}x${bn}_${w}_${st}${m1:+_$m1}${m2:+_$m2}_d$d
  ncu --clock-control none --launch-count 1 -k regex:attn_fwd "${sections[@]}" --metrics "$metrics" -f -o "$out/$name" \
    "$bin" --src lang/lib/attention_fwd.tile --dtype f16 --head-dim "$d" --heads "$h" --batch "$b" --seqlens "$n" \
    --layout bhsd --block-m "$bm" --block-n "$bn" --warps "$w" --stages "$st" --min-ms 0 ${flags[@]+"${flags[@]}"} >"$out/$name.log" 2>&1
  report "$name"
done
if [ "${FA2:-1}" != 0 ] && [ "${SKIP_FA2:-0}" = 0 ]; then
cat >/tmp/fa2_once.py <<PY
import torch, math
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn($b, $h, $n, $d, device="cuda", dtype=torch.float16) for _ in range(3))
with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
    for _ in range(3):
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:flash "${sections[@]}" --metrics "$metrics" -f \
  -o "$out/fa2_d$d" python3 /tmp/fa2_once.py >"$out/fa2_d$d.log" 2>&1
report "fa2_d$d"
fi
keys='Duration|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Issue Slots Busy|Warp Cycles Per Issued Instruction|Executed Ipc Active|Dynamic Shared Memory Per Block|Block Size|No Eligible|L1/TEX Hit|Executed Instructions  '
for f in "$out"/*.details.txt; do
  echo "--- $(basename "$f" .details.txt)"
  grep -E "$keys" "$f" | sed 's/  */ /g' | head -16
  grep -E 'l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_(ld|st).sum |smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active.ratio ' \
    "${f%.details.txt}.raw.txt" | awk '$NF+0 >= 0.05 || /bank/ {print "  " $1, $NF}' | sort -k2 -nr | head -14
done
