#!/usr/bin/env bash
# On a GPU machine with 2 or 4 H200s, from the repository root, with .carry/bundle.tar.xz
# (tools/device_pack.sh) carried along: kiln.distributed (context-parallel attention) over NCCL,
# one process per GPU (torchrun), python/examples/bench_cp.py:
#   (a) correctness against one GPU's kiln.attention and float64 (ring causal / full / sliding
#       window, all-gather), 4096 tokens per GPU;
#   (b) causal forward+backward at 64k and 128k tokens per GPU on 1, 2, 4 GPUs, and the parallel
#       efficiency t_1(N) / (W t_W(N));
#   (c) the longest causal sequence that trains (forward+backward) on all the GPUs.
# NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE=0 (the device docs). The whole run is kept
# under 8 minutes (CP_S, default 450 s, bounds torchrun; BUDGET_S the seconds of (b) and (c)).
# Logs: $OUT/cp.log (every rank's output; rank 0 prints the progress), $OUT/cp_table.txt (the
# table, which prints last).
#   bash tools/device_cp.sh                 # every GPU present
#   NGPU=2 TOKENS=65536 bash tools/device_cp.sh
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
export KILN_LIBRARY=$kiln/lib/libkiln_all.so PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=4
ngpu=${NGPU:-$(python3 -c 'import torch; print(torch.cuda.device_count())')}
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(), "x", torch.cuda.device_count())'
echo "device_cp: $ngpu GPUs, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
timeout "${CP_S:-450}" python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
  python/examples/bench_cp.py --tokens "${TOKENS:-65536,131072}" --budget "${BUDGET_S:-280}" \
  --table "$out/cp_table.txt" >"$out/cp.log" 2>&1
rc=$?
echo "bench_cp rc=$rc (124: the time limit)"
if [ -s "$out/cp_table.txt" ]; then cat "$out/cp_table.txt"; else tail -n 40 "$out/cp.log"; fi
