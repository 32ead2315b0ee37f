#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh):
# time FlashAttention-3's forward schedule as combinations of Kiln's schedule options against the
# runtime's rows, one head dim per call (each fits the device tool's 10 minutes):
#   bash tools/device_sweep_fa3.sh 128        # or 64, 256; FA3_CHECK=1 first runs the GPU test
# The candidates (tools/bench/bench_attention.py --sweep modes: ws --warp-specialize, tma --tma,
# ov --overlap, pp --pingpong, lp --lean-producer = ws + tma with the producer at 24 registers
# and the consumers at 240) were chosen by ptxas -v at the launch-time hints: none spills
# (registers and spills per candidate: docs/performance.md, "FA3's schedule as options").
# The sweep adds 128x64/8/2 as its baseline; the first candidate is the runtime's row today.
# FA3_SEQLENS (default 1024,2048,4096,16384), FA3_BUDGET_S (default 300) change the run;
# FA3_SCHEDULES replaces the list. Tables to $OUT/sweep-dD/attention_sweep.md, printed at the end.
# FA3_CHECK=1: first the forward GPU test with the four options forced on every case (d 64/128,
# 128 x 128 tiles on 8 warps where a case has none), then with --lean-producer too.
# Persistent programs (the schedule options --persistent / --longest-first; not with warp
# specialisation, which they refuse):
#   bash tools/device_sweep_fa3.sh 128 persistent   # or 64, 256; FA3_CHECK=1 first runs the GPU test
# sweeps the runtime's row against the plain and persistent (/ps) and longest-first (/lf) forms of
# the same tiles, and FA3_CHECK=1 runs the forward GPU test with KILN_TEST_PERSISTENT, then
# KILN_TEST_LONGEST_FIRST (every case persistent; the table's warp specialisation gives way).
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
d=${1:-128}
mode=${2:-fa3}
case $mode/$d in
  fa3/64)  list="64x128/4/2,128x128/8/2/ws/tma,128x128/8/2/ws/tma/ov,128x128/8/2/ws/tma/pp,128x128/8/2/ws/tma/ov/pp,128x128/8/2/lp/ov/pp,128x128/8/3/ws/tma/ov/pp" ;;
  fa3/128) list="128x128/8/2/ws/tma,128x128/8/2/ws/tma/ov,128x128/8/2/ws/tma/pp,128x128/8/2/ws/tma/ov/pp,128x128/8/2/lp,128x128/8/2/lp/ov/pp,128x64/8/2/ws/tma/ov/pp" ;;
  fa3/256) list="128x64/8/2/ws,128x64/8/2/ws/tma,128x64/8/2/ws/pp,128x64/8/2/lp,128x64/8/2/lp/pp" ;;
  persistent/64)  list="64x128/4/2,64x128/4/2/ps,64x128/4/2/lf,64x64/4/2/lf,128x128/8/2/tma/ov,128x128/8/2/tma/ov/ps,128x128/8/2/tma/ov/lf" ;;
  persistent/128) list="128x128/8/2/ws/tma/ov,128x128/8/2/tma/ov,128x128/8/2/tma/ov/ps,128x128/8/2/tma/ov/lf,64x64/4/2,64x64/4/2/ps,64x64/4/2/lf,128x64/4/2/lf" ;;
  persistent/256) list="128x64/8/2/ws,128x64/8/2/pp,128x64/8/2/pp/ps,128x64/8/2/pp/lf,64x32/4/2,64x32/4/2/lf" ;;
  *) echo "head dim $d: 64, 128 or 256; mode $mode: fa3 or persistent"; exit 2 ;;
esac
list=${FA3_SCHEDULES:-$list}
# check NAME ENV...: the forward GPU test with those variables, its verdict lines
check() {
  local name=$1; shift
  ( cd "$kiln/tests" && env "$@" CK_DEFAULT_TIMEOUT=300 timeout 280 ./gpu_test_e2e_gpu_attention ) >"$out/check-$name.log" 2>&1
  echo "gpu_test_e2e_gpu_attention, $name: exit $?"
  grep -E "FAIL|Checks|summary" "$out/check-$name.log" | tail -5
}
if [ "${FA3_CHECK:-0}" = 1 ] && [ "$mode" = fa3 ]; then
  for lean in 0 1; do
    check "ws-tma-overlap-pingpong-lean$lean" ATTN_HEAD_DIMS=64,128 KILN_TEST_WARP_SPEC=128x128/8 KILN_TEST_TMA=1 \
      KILN_TEST_OVERLAP=1 KILN_TEST_PINGPONG=128x128 KILN_TEST_LEAN_PRODUCER=$lean
  done
elif [ "${FA3_CHECK:-0}" = 1 ]; then
  check persistent ATTN_HEAD_DIMS=$d KILN_TEST_PERSISTENT=1
  check longest-first ATTN_HEAD_DIMS=$d KILN_TEST_LONGEST_FIRST=1
fi
tag=sweep-d$d
[ "$mode" = fa3 ] || tag=sweep-$mode-d$d
budget=${FA3_BUDGET_S:-300}
timeout $((budget + 150)) python3 tools/bench/bench_attention.py --sweep --head-dims "$d" \
  --seqlens "${FA3_SEQLENS:-1024,2048,4096,16384}" --budget-s "$budget" --kiln-bin "$kiln/bin/kiln-bench-attn" \
  --schedules "$list" --out "$out/$tag" >"$out/$tag.log" 2>&1
echo "$tag: exit $?"
cat "$out/$tag/attention_sweep.md" 2>/dev/null || tail -30 "$out/$tag.log"
