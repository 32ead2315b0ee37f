#!/usr/bin/env bash
# device_tune.sh — tune the attention forward and backward on the GPU machine, check the tuner
# against an exhaustive sweep and against the hand table, and write the report.
#
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along:
#   bash tools/device_tune.sh [BUDGET_S]          (default 400: the whole script, all steps)
#   bash tools/device_tune.sh compile             (the d 128 forward's space compiled and pruned
#                                                   on JOBS threads, nothing run: the compile target)
# Here, to test it (no GPU: the CPU interpreter, tiny shapes, the first configs only, nothing timed):
#   CPU=1 KILN=build/kiln OUT=/tmp/tune-cpu bash tools/device_tune.sh 120
#
# For each shape class (CLASSES, "D:CAUSAL" words; default d 128/64/256, non-causal and causal;
# f16, batch 4, 16 heads, N 4096: 16k tokens as in docs/performance.md's tables):
#  (a) `kiln tune` over the spaces the programs declare (lang/lib/attention_fwd.tile: attn_fwd;
#      attention_bwd.tile: attn_bwd_dq, attn_bwd_dkdv with COMPUTE_DQ=false, the sm_90 rows'
#      separate dQ pass): the space compiled on all cores, pruned at compile time (shared memory,
#      spills over SPILL bytes (default 256: a few spilled words can still win, the d 128 row
#      of 128 x 64 on 4 warps spills 160 bytes), occupancy 0), the rest timed (warm-up, L2 flushed, the median of
#      REPEATS) and checked against config 0's output; winners stored in $TUNE_CACHE (default
#      /tmp/kiln-tune-cache, apart from the cache the other scripts use: kiln_attention_fwd/_bwd
#      take them before jit/attention_tune.c's table only with KILN_CACHE_DIR=$TUNE_CACHE).
#      The class's seconds (compile + timing, the three kernels) are its tuning cost: target
#      <= 60 s.
#  (b) then, while the budget lasts, an exhaustive sweep of each tuned class (every config of the
#      same space, spilling ones included: --max-spill -1, 2 x REPEATS): the tuner's pick,
#      re-timed there, must be within 2% of the sweep's best ("pick/best").
#  (c) the hand table's row for the class (the sm_90 rows of jit/attention_tune.c at N 4096,
#      copied below: hand_row) against the winner, both from the same run (the sweep's when
#      there is one, else the tuner's; "-" when the tuner pruned the hand row, its reason in
#      the CSV): "hand/win" > 1 means the tuner beat the table.
#  (d) writes $OUT/tune_<kernel>_d<D>_<causal>.{csv,svg,txt} (and sweep_*.csv), summary.csv
#      (one row per class and kernel) and prints the summary table last.
# No step starts without the time it needs; each `kiln tune` is killed at the budget's end.
# env: CLASSES, JOBS (default: the CPUs), SPILL (256), REPEATS (20), N (4096), BATCH (4), HEADS (16),
#      SWEEP (1: do (b)), TUNE_CACHE, CPU (1: the interpreter), MAXC (CPU: configs per space, 3),
#      KILN (the kiln binary; default the bundle's).
set -uo pipefail
only_compile=0
if [ "${1:-}" = compile ]; then only_compile=1; shift; fi
budget=${1:-${BUDGET_S:-400}}
start=$(date +%s)
cpu=${CPU:-0}
if [ "$cpu" = 1 ]; then
  out=${OUT:-/tmp/kiln-tune-out}
  mkdir -p "$out"
  kilnbin=${KILN:-build/kiln}
  n=${N:-40}; b=${BATCH:-1}; h=${HEADS:-2}
  classes=${CLASSES:-64:false 64:true}
  run_opts=(--cpu --max-configs "${MAXC:-3}")
  SPILL=${SPILL:--1}   # unspecialised (no --assume here): spills the GPU run will not see
else
  . "$(dirname "$0")/device_env.sh"
  kilnbin=${KILN:-$kiln/bin/kiln}
  n=${N:-4096}; b=${BATCH:-4}; h=${HEADS:-16}
  classes=${CLASSES:-128:false 128:true 64:false 64:true 256:false 256:true}
  run_opts=(--store)
fi
export KILN_CACHE_DIR=${TUNE_CACHE:-/tmp/kiln-tune-cache}
jobs=${JOBS:-$(nproc)}
# --assume hints as the attention calls' launch-time specialisation gives them (16-byte
# pointers, integers multiples of 16): on the GPU; HINTS=1 adds them on the interpreter too
hints=${HINTS:-$((1 - cpu))}
repeats=${REPEATS:-20}
left() { echo $((budget - ($(date +%s) - start))); }

# The hand table's sm_90 rows at N 4096 (jit/attention_tune.c; keep in step with it).
hand_row() {   # KERNEL D
  case "$1:$2" in
    fwd:64) echo "BLOCK_M=64 BLOCK_N=128 num_warps=4 num_stages=2 warp_specialize=false tma=false pingpong=false overlap=false" ;;
    fwd:128) echo "BLOCK_M=128 BLOCK_N=128 num_warps=8 num_stages=2 warp_specialize=true tma=true pingpong=false overlap=false" ;;
    fwd:256) echo "BLOCK_M=128 BLOCK_N=64 num_warps=8 num_stages=2 warp_specialize=true tma=false pingpong=false overlap=false" ;;
    dkdv:256 | dq:256) echo "BLOCK_M=64 BLOCK_N=64 num_warps=8 num_stages=2" ;;
    dkdv:* | dq:*) echo "BLOCK_M=64 BLOCK_N=64 num_warps=4 num_stages=2" ;;
  esac
}

# The row of CSV whose dimensions are CONFIG ("NAME=VALUE ..."): "time_ms status", or "- missing".
csv_row() {   # CSV CONFIG
  awk -F, -v cfg="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; n = split(cfg, kv, " "); next }
    { ok = 1; for (j = 1; j <= n; j++) { split(kv[j], p, "="); if ($col[p[1]] != p[2]) ok = 0 }
      if (ok) { t = $col["time_ms"]; s = $col["status"]; gsub(/"/, "", s); print (t == "" ? "-" : t), s; found = 1; exit } }
    END { if (!found) print "- missing" }' "$1"
}

# The winner's dimensions as "NAME=VALUE ..." and its time, from a CSV ("" when none was timed).
csv_winner() {   # CSV
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { col[$i] = i; name[i] = $i }; nd = col["time_ms"] - 1; next }
    $col["status"] == "\"winner\"" { s = ""; for (i = 1; i <= nd; i++) s = s (i > 1 ? " " : "") name[i] "=" $i
      print s "|" $col["time_ms"] "|" $col["tflops"] }' "$1"
}

# The fastest timed row of a CSV: "time_ms|NAME=VALUE ...".
csv_best() {   # CSV
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { col[$i] = i; name[i] = $i }; nd = col["time_ms"] - 1; next }
    $col["time_ms"] != "" && $col["status"] ~ /^"(ok|winner)"$/ && (best == "" || $col["time_ms"] + 0 < best + 0) {
      best = $col["time_ms"]; s = ""; for (i = 1; i <= nd; i++) s = s (i > 1 ? " " : "") name[i] "=" $i }
    END { if (best != "") print best "|" s }' "$1"
}

# One `kiln tune` of KERNEL (fwd, dq, dkdv) for class D CAUSAL into $out/PREFIX_<kernel>_d<D>_<causal>.*;
# extra options after the class. Prints the seconds it took. Refuses (returns 1) under MIN_S left.
tune_one() {   # PREFIX KERNEL D CAUSAL MIN_S OPTIONS...
  local prefix=$1 kern=$2 d=$3 causal=$4 min_s=$5
  shift 5
  local l; l=$(left)
  if [ "$l" -lt "$min_s" ]; then echo "skip $prefix $kern d$d causal=$causal: $l s left" >>"$out/tune.log"; return 1; fi
  local sb=$((h * n * d)) sh=$((n * d)) sm=$d e=$((b * h * n * d)) f
  local file kname defs=(-D HEAD_DIM="$d" -D CAUSAL="$causal") args=() grid assume=()
  for t in q k v o do dq dk dv; do
    local s3=m; case $t in k | v | dk | dv) s3=n ;; esac
    args+=("stride_${t}b=$sb" "stride_${t}h=$sh" "stride_${t}$s3=$sm")
    [ "$hints" = 1 ] && assume+=(--assume "stride_${t}b=16" --assume "stride_${t}h=16" --assume "stride_${t}$s3=16")
  done
  args+=(heads=$h heads_kv=$h seqlen_q=$n seqlen_k=$n sm_scale=0.08838834764831845)
  case $kern in
    fwd) file=lang/lib/attention_fwd.tile; kname=attn_fwd_f16; defs+=(-D PLAIN_SCORES=true)
         args+=(Q=rand:$e K=rand:$e V=rand:$e O=out:$e LSE=out:$((b * h * n)))
         grid="$n/BLOCK_M,$((b * h))"; f=$((4 * b * h * n * n * d)) ;;
    dq)  file=lang/lib/attention_bwd.tile; kname=attn_bwd_dq_f16
         args+=(Q=rand:$e K=rand:$e V=rand:$e DO=rand:$e LSE=rand:$((b * h * n)) DELTA=rand:$((b * h * n)) DQ=out:$e)
         grid="$n/BLOCK_M,$((b * h))"; f=$((6 * b * h * n * n * d)) ;;
    dkdv) file=lang/lib/attention_bwd.tile; kname=attn_bwd_dkdv_f16; defs+=(-D COMPUTE_DQ=false)
         args+=(Q=rand:$e K=rand:$e V=rand:$e DO=rand:$e LSE=rand:$((b * h * n)) DELTA=rand:$((b * h * n)))
         args+=(DK=out:$e DV=out:$e DQ_ACC=rand:$e)
         grid="$n/BLOCK_N,$((b * h))"; f=$((8 * b * h * n * n * d)) ;;
  esac
  [ "$causal" = true ] && f=$((f / 2))
  if [ "$hints" = 1 ]; then
    for p in Q K V O LSE DO DQ DK DV DELTA DQ_ACC heads heads_kv seqlen_q seqlen_k; do assume+=(--assume "$p=16"); done
  fi
  # hints only for the parameters this kernel has (a hint naming none is an error; extra
  # ARG=SPECs are ignored): its signature, the first line of its Tile IR
  local params; params=$("$kilnbin" compile "$file" -k "$kname" "${defs[@]}" -D BLOCK_M=64 -D BLOCK_N=64 --emit ir \
    2>/dev/null | grep -m1 '^kernel @' | grep -o '%[A-Za-z0-9_]*:' | tr -d '%:')
  local am=() a i
  for ((i = 0; i < ${#assume[@]}; i += 2)); do
    a=${assume[i + 1]}; grep -qx -- "${a%%=*}" <<<"$params" && am+=(--assume "$a")
  done
  local base=$out/${prefix}_${kern}_d${d}_${causal} t0; t0=$(date +%s)
  local lim=$((l - 5)); [ "$lim" -gt 200 ] && lim=200
  timeout "$lim" "$kilnbin" tune "$file" -k "$kname" "${defs[@]}" "${am[@]}" --jobs "$jobs" --flops "$f" \
    --grid "$grid" "$@" "${args[@]}" --csv "$base.csv" --svg "$base.svg" >"$base.txt" 2>"$base.err"
  local rc=$?
  echo "$prefix $kern d$d causal=$causal rc=$rc $(( $(date +%s) - t0 )) s: $(head -1 "$base.txt")" >>"$out/tune.log"
  echo $(( $(date +%s) - t0 ))
}

: >"$out/tune.log"
if [ "$only_compile" = 1 ]; then
  s=$(tune_one compile fwd 128 false 0 --no-run --max-spill "${SPILL:-256}" "${run_opts[@]}")
  cat "$out/tune.log"
  echo "compile_fwd_d128_false: $s s in all; the report in $out/compile_fwd_d128_false.{txt,csv,svg}"
  exit 0
fi
echo "class,kernel,configs,compile_s,tune_s,class_s,winner,winner_ms,tflops,hand_ms,hand_status,hand/win,sweep_best_ms,pick/best,within_2pct" \
  >"$out/summary.csv"
declare -A secs class_s
# (a) tune every class: forward, dQ pass, dK/dV kernel
for c in $classes; do
  d=${c%%:*}; causal=${c##*:}; total=0
  for k in fwd dq dkdv; do
    s=$(tune_one tune "$k" "$d" "$causal" 30 --max-spill "${SPILL:-256}" --repeats "$repeats" "${run_opts[@]}") || continue
    secs[$k:$c]=$s; total=$((total + s))
  done
  class_s[$c]=$total
done
# (b) the exhaustive sweeps, as the budget allows
declare -A swept
if [ "${SWEEP:-1}" = 1 ]; then
  for c in $classes; do
    d=${c%%:*}; causal=${c##*:}
    for k in fwd dq dkdv; do
      [ -f "$out/tune_${k}_d${d}_${causal}.csv" ] || continue
      extra=(--max-spill -1 --repeats $((2 * repeats)))
      [ "$cpu" = 1 ] && extra=(--max-spill -1 "${run_opts[@]}")
      tune_one sweep "$k" "$d" "$causal" 40 "${extra[@]}" >/dev/null && swept[$k:$c]=1
    done
  done
fi
# (c, d) the summary
for c in $classes; do
  d=${c%%:*}; causal=${c##*:}
  for k in fwd dq dkdv; do
    csv=$out/tune_${k}_d${d}_${causal}.csv
    [ -f "$csv" ] || continue
    txt=$out/tune_${k}_d${d}_${causal}.txt
    configs=$(head -1 "$txt" | sed -n 's/.*: \([0-9]*\) configs.*/\1/p')
    comp=$(head -1 "$txt" | sed -n 's/.*compiled in \([0-9]*\) ms.*/\1/p')
    IFS='|' read -r win wms wtf <<<"$(csv_winner "$csv")"
    ref=$csv; sweep=$out/sweep_${k}_d${d}_${causal}.csv; best=- ratio=- within=-
    if [ -n "${swept[$k:$c]:-}" ] && [ -f "$sweep" ]; then
      ref=$sweep
      IFS='|' read -r best _ <<<"$(csv_best "$sweep")"
      if [ -n "$win" ] && [ -n "$best" ]; then
        read -r pick _ <<<"$(csv_row "$sweep" "$win")"
        ratio=$(awk -v p="$pick" -v b="$best" 'BEGIN { if (p == "-" || b <= 0) print "-"; else printf "%.3f", p / b }')
        within=$(awk -v r="$ratio" 'BEGIN { print (r == "-" ? "-" : r <= 1.02 ? "yes" : "NO") }')
      fi
      [ -n "$win" ] && read -r wms _ <<<"$(csv_row "$sweep" "$win")"
    fi
    read -r hms hst <<<"$(csv_row "$ref" "$(hand_row "$k" "$d")")"
    hst=${hst//,/;}
    hw=$(awk -v a="$hms" -v w="$wms" 'BEGIN { if (a == "-" || w == "" || w == "-" || w <= 0) print "-"; else printf "%.3f", a / w }')
    echo "d${d}_${causal},$k,${configs:--},$(awk -v m="${comp:-0}" 'BEGIN { printf "%.1f", m / 1000 }'),${secs[$k:$c]:--},${class_s[$c]:--},\"${win:--}\",${wms:--},${wtf:--},$hms,$hst,$hw,${best:--},$ratio,$within" \
      >>"$out/summary.csv"
  done
done
echo "=========== log"; cat "$out/tune.log"
echo "=========== $(( $(date +%s) - start )) s in all (budget $budget s); cache $KILN_CACHE_DIR"
echo "=========== summary ($out/summary.csv; class_s: the class's tuning seconds, target <= 60; pick/best <= 1.02)"
cut -d, -f1-6,8-15 "$out/summary.csv" | column -s, -t
