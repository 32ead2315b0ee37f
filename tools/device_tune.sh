#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: tune the attention forward (d 128, f16, non-causal, N 4096: batch 2, 16 heads)
# over the space lang/lib/attention_fwd.tile declares (`tune attn_fwd { ... }`, >= 100 configs),
# with `kiln tune`: the space compiled on all cores (the compile wall time is reported), configs
# pruned at compile time (shared memory, spills over SPILL bytes, occupancy 0), the rest timed on
# the GPU (warm-up, L2 flushed before each timed launch, the median of REPEATS) and checked
# against config 0's output, the winner stored in the tune cache (kiln_attention_fwd then takes
# it before jit/attention_tune.c's table: stored in $TUNE_CACHE, default /tmp/kiln-tune-cache, apart
# from the cache the other scripts use, so later runs on the machine keep the table unless
# TUNE_CACHE=/tmp/kiln-cache). Writes to $OUT: tune_fwd_d128.csv, tune_fwd_d128.svg,
# tune_fwd_d128.txt (the table), summary.txt (compile wall time, winner, hand-table row, ratio).
# Under 6 minutes: the compile takes ~10-30 s on 16 cores, the timing ~0.1 s per config.
#   bash tools/device_tune.sh            (env: JOBS=16 SPILL=0 REPEATS=20 N=4096 D=128 CAUSAL=false)
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
jobs=${JOBS:-$(nproc)}
n=${N:-4096}; d=${D:-128}; causal=${CAUSAL:-false}; b=2; h=16
# [b, h, s, d] layout, strides in elements
sb=$((h * n * d)); sh=$((n * d)); sm=$d
elems=$((b * h * n * d))
flops=$((4 * b * h * n * n * d))
[ "$causal" = true ] && flops=$((flops / 2))
args=(Q=rand:$elems K=rand:$elems V=rand:$elems O=out:$elems LSE=out:$((b * h * n)))
for t in q k v o; do args+=(stride_${t}b=$sb stride_${t}h=$sh stride_${t}m=$sm); done
args=("${args[@]/stride_km/stride_kn}"); args=("${args[@]/stride_vm/stride_vn}")
args+=(heads=$h heads_kv=$h seqlen_q=$n seqlen_k=$n sm_scale=0.08838834764831845)
# what kiln_attention_fwd's launches satisfy (launch-time specialisation: 16-aligned pointers,
# integers that are multiples of 16), so the timed code is the code the calls run
assume=()
for p in Q K V O LSE heads heads_kv seqlen_q seqlen_k; do assume+=(--assume "$p=16"); done
for t in q k v o; do for s in b h; do assume+=(--assume "stride_$t$s=16"); done; done
assume+=(--assume stride_qm=16 --assume stride_kn=16 --assume stride_vn=16 --assume stride_om=16)
start=$(date +%s)
KILN_CACHE_DIR=${TUNE_CACHE:-/tmp/kiln-tune-cache} timeout 330 "$kiln/bin/kiln" tune lang/lib/attention_fwd.tile -k attn_fwd_f16 \
  -D HEAD_DIM=$d -D CAUSAL=$causal -D PLAIN_SCORES=true "${assume[@]}" \
  --jobs "$jobs" --max-spill "${SPILL:-0}" --repeats "${REPEATS:-20}" --flops $flops --store \
  --grid "$n/BLOCK_M,$((b * h))" "${args[@]}" \
  --csv "$out/tune_fwd_d128.csv" --svg "$out/tune_fwd_d128.svg" >"$out/tune_fwd_d128.txt" 2>"$out/tune_fwd_d128.err"
rc=$?
{
  echo "kiln tune rc=$rc, $(( $(date +%s) - start )) s in all"
  head -1 "$out/tune_fwd_d128.txt"
  grep '^winner' "$out/tune_fwd_d128.txt"
  # the hand table's row (jit/attention_tune.c, sm_90, d 128, any causal, N > 1024): 128 x 64,
  # 4 warps, 2 stages, no options; its time against the winner's
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["BLOCK_M"] == 128 && $col["BLOCK_N"] == 64 && $col["num_warps"] == 4 && $col["num_stages"] == 2 &&
    $col["pingpong"] == "false" && $col["warp_specialize"] == "false" { hand = $col["time_ms"]; hs = $col["status"] }
    $col["status"] ~ /winner/ { best = $col["time_ms"]; bt = $col["tflops"] }
    { if ($col["status"] ~ /^"(ok|winner)"$/) timed++; else if ($col["status"] !~ /^"(ok|winner)"$/) pruned++ }
    END {
      printf "configs timed %d, pruned or failed %d\n", timed, pruned
      printf "hand table row 128x64/4/2: %s ms (%s)\n", hand, hs
      if (hand > 0 && best > 0) printf "winner %s ms (%s TFLOP/s): %.3fx the hand row\n", best, bt, hand / best
    }' "$out/tune_fwd_d128.csv"
  echo "== stderr"; tail -5 "$out/tune_fwd_d128.err"
} >"$out/summary.txt"
echo "=========== table (first 40 rows)"; head -42 "$out/tune_fwd_d128.txt"
echo "=========== summary"; cat "$out/summary.txt"
