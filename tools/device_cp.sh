#!/usr/bin/env bash
# On a GPU machine with 2 or 4 H200s, from the repository root, with .carry/bundle.tar.xz
# (tools/device_pack.sh) carried along: kiln.distributed (context-parallel attention) over NCCL,
# one process per GPU (torchrun), python/examples/bench_cp.py:
#   (a) correctness against one GPU's kiln.attention and float64 (ring causal / full / sliding
#       window, all-gather, a document block mask of the whole sequence with the ring steps it
#       skipped, packed batches with and without a window), 4096 tokens per GPU;
#   (b) causal forward+backward at fixed tokens per GPU (TOKENS, default 64k, 128k, 256k) on 1, 2
#       and 4 GPUs, and the parallel efficiency t_1(N) / (W t_W(N)) (t_1 on one GPU of the same
#       machine; a point whose estimated time would pass the phase's half of BUDGET_S is skipped
#       with a line saying so; points past 5 s are timed once, the kernels warm);
#   (c) the longest causal sequence that trains (forward+backward) on all the GPUs: doubling from
#       256k tokens per GPU until memory runs out or the next size (about 4.5x the last one's time)
#       would pass BUDGET_S; the line that stopped it is in the table.
# NVLink multicast stays off (/work/.library/device/KINDS.md: a program using it can take the
# host's shared GPUs out of service): NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
# NVSHMEM_DISABLE_NVLS=1, exported here so torchrun's children inherit them.
# Time: BUDGET_S (default 480) bounds the whole bench from its start, CP_S (default 560) bounds
# torchrun: under the device call's 600 s with the bundle's unpacking. Logs: $OUT/cp.log (every
# rank's output; rank 0 prints the progress), $OUT/cp_table.txt (the table, printed last; written
# after each phase and each longest-sequence step, so a run cut short keeps what it measured).
#   NGPU=4 bash tools/device_cp.sh                  # the 4-GPU run (nvidia-h200-x4)
#   NGPU=2 TOKENS=65536 BUDGET_S=110 CP_S=210 bash tools/device_cp.sh
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
export KILN_LIBRARY=$kiln/lib/libkiln_all.so PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=4
have=$(python3 -c 'import torch; print(torch.cuda.device_count())')
ngpu=${NGPU:-$have}
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(), "x", torch.cuda.device_count())'
if [ "$ngpu" -gt "$have" ]; then echo "device_cp: NGPU=$ngpu but $have GPUs here"; exit 2; fi
echo "device_cp: $ngpu GPUs, NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE, budget ${BUDGET_S:-480} s, torchrun limit ${CP_S:-560} s"
timeout "${CP_S:-560}" python3 -m torch.distributed.run --standalone --nproc-per-node "$ngpu" \
  python/examples/bench_cp.py --tokens "${TOKENS:-65536,131072,262144}" --budget "${BUDGET_S:-480}" \
  --table "$out/cp_table.txt" >"$out/cp.log" 2>&1
rc=$?
echo "bench_cp rc=$rc (124: the time limit)"
grep -E "FAIL|Error|error" "$out/cp.log" | grep -v "^\[W" | head -n 5
if [ -s "$out/cp_table.txt" ]; then cat "$out/cp_table.txt"; else tail -n 40 "$out/cp.log"; fi
