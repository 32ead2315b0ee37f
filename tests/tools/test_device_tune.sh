#!/usr/bin/env bash
# tools/device_tune.sh without a GPU, two ways:
#  1. with a fake `kiln` whose `tune` writes reports with known times (the tuner's winner, the
#     hand table's row, a sweep whose best is 1.5% or 5% faster than the pick): the summary's
#     winner, hand/win and pick/best columns and the 2% verdict; a budget too small to start
#     anything leaves an empty summary and exits at once.
#  2. with the real kiln on the CPU interpreter (CPU=1, d 64 non-causal, the first 2 configs of
#     each space, no sweep): every kernel's report is written, each config ran (max_err filled:
#     the agreement check with config 0) and the summary has the forward, dQ and dK/dV rows.
#   bash tests/tools/test_device_tune.sh SOURCE_DIR KILN
set -uo pipefail
src=${1:?usage: test_device_tune.sh SOURCE_DIR KILN}
kiln=${2:?usage: test_device_tune.sh SOURCE_DIR KILN}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. the fake kiln ----
cat >"$work/kiln" <<'EOF'
#!/usr/bin/env bash
# compile --emit ir: a signature; tune: a report by kernel and by --max-spill (-1: the sweep)
if [ "$1" = compile ]; then echo 'kernel @k(%Q: ptr<f16>, %seqlen_q: i32) {'; exit 0; fi
csv= svg= k= sweep=0
while [ $# -gt 0 ]; do
  case $1 in --csv) csv=$2; shift ;; --svg) svg=$2; shift ;; -k) k=$2; shift ;; --max-spill) [ "$2" = -1 ] && sweep=1; shift ;; esac
  shift
done
echo '<svg/>' >"$svg"
if [ "$k" = attn_fwd_f16 ]; then
  h='BLOCK_M,BLOCK_N,num_warps,num_stages,warp_specialize,tma,pingpong,overlap'
  hand='64,128,4,2,false,false,false,false' win='128,64,4,2,false,false,false,false' other='64,64,4,2,false,false,false,false'
  best=0.990   # the sweep's best 1% faster than the pick's 1.000 there: within 2%
else
  h='BLOCK_M,BLOCK_N,num_warps,num_stages'
  hand='64,64,4,2' win='32,128,8,3' other='64,32,4,1'
  best=0.950   # 5% faster: not within 2%
fi
echo "tune $k on sm_90a, key X: 3 configs (3 of 4 kept by the constraints), 3 kept, 3 timed; compiled in 2500 ms wall on 2 threads"
{
  echo "$h,time_ms,tflops,gbps,registers,spill_bytes,smem_bytes,warps,occupancy,compile_ms,max_err,status"
  if [ $sweep = 1 ]; then
    echo "$hand,1.200,100,,128,0,1024,4,1,5,0,\"ok\""
    echo "$win,1.000,120,,128,0,1024,4,1,5,0,\"winner\""
    echo "$other,$best,121,,128,64,1024,4,1,5,0,\"ok\""
  else
    echo "$hand,1.100,100,,128,0,1024,4,1,5,0,\"ok\""
    echo "$win,0.980,120,,128,0,1024,4,1,5,0,\"winner\""
    echo "$other,,,,128,64,1024,4,1,5,,\"spills 64 bytes (more than 0)\""
  fi
} >"$csv"
EOF
chmod +x "$work/kiln"
cd "$src" || fail "no $src"
CPU=1 SPILL=0 KILN="$work/kiln" OUT="$work/fake" CLASSES="64:false" TUNE_CACHE="$work/cache" \
  bash tools/device_tune.sh 200 >"$work/fake.log" 2>&1 || fail "device_tune.sh (fake kiln) exit $?: $(tail -5 "$work/fake.log")"
s=$work/fake/summary.csv
[ "$(wc -l <"$s")" -eq 4 ] || fail "summary rows: $(cat "$s")"
row() { grep "^d64_false,$1," "$s"; }
col() { awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) n = i; next } { print $n }' <(head -1 "$s"; row "$2"); }
[ "$(col winner fwd)" = '"BLOCK_M=128 BLOCK_N=64 num_warps=4 num_stages=2 warp_specialize=false tma=false pingpong=false overlap=false"' ] ||
  fail "fwd winner: $(row fwd)"
[ "$(col winner_ms fwd)" = 1.000 ] || fail "the winner's time is the sweep's: $(row fwd)"
[ "$(col hand_ms fwd)" = 1.200 ] || fail "the hand row's time is the sweep's: $(row fwd)"
[ "$(col hand/win fwd)" = 1.200 ] || fail "hand/win: $(row fwd)"
[ "$(col pick/best fwd)" = 1.010 ] && [ "$(col within_2pct fwd)" = yes ] || fail "fwd pick/best: $(row fwd)"
[ "$(col pick/best dq)" = 1.053 ] && [ "$(col within_2pct dq)" = NO ] || fail "dq pick/best: $(row dq)"
[ "$(col configs dkdv)" = 3 ] && [ "$(col compile_s dkdv)" = 2.5 ] || fail "dkdv configs/compile: $(row dkdv)"
tail -1 "$work/fake.log" | grep -q '^d64_false *dkdv' || fail "the summary table is not printed last: $(tail -3 "$work/fake.log")"
# a budget too small to start a tuning run: nothing runs, an empty summary
t0=$(date +%s)
CPU=1 SPILL=0 KILN="$work/kiln" OUT="$work/none" CLASSES="64:false 128:true" bash tools/device_tune.sh 20 >"$work/none.log" 2>&1 ||
  fail "device_tune.sh 20: exit $?"
[ "$(wc -l <"$work/none/summary.csv")" -eq 1 ] || fail "budget 20 ran something: $(cat "$work/none/summary.csv")"
grep -q "skip tune fwd d64" "$work/none.log" || fail "no skip line: $(cat "$work/none.log")"
[ $(($(date +%s) - t0)) -lt 10 ] || fail "budget 20 took $(($(date +%s) - t0)) s"

# ---- 2. the real kiln on the interpreter ----
CPU=1 KILN="$kiln" OUT="$work/cpu" CLASSES="64:false" MAXC=2 SWEEP=0 JOBS=2 TUNE_CACHE="$work/cache" \
  bash tools/device_tune.sh 300 >"$work/cpu.log" 2>&1 || fail "device_tune.sh (CPU) exit $?: $(tail -5 "$work/cpu.log")"
for k in fwd dq dkdv; do
  c=$work/cpu/tune_${k}_d64_false.csv
  [ -s "$work/cpu/tune_${k}_d64_false.svg" ] || fail "$k: no SVG ($(cat "$work/cpu/tune_${k}_d64_false.err"))"
  [ "$(wc -l <"$c")" -eq 3 ] || fail "$k: $(cat "$c") $(cat "$work/cpu/tune_${k}_d64_false.err")"
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "max_err") m = i; next } $m == "" || $NF != "\"ok\"" { exit 1 }' "$c" ||
    fail "$k: a config not run or not checked on the interpreter: $(cat "$c")"
  grep -q "^d64_false,$k," "$work/cpu/summary.csv" || fail "$k: not in the summary"
done
echo "ok: device_tune.sh (fake kiln: winner, hand row, sweep verdicts, budget; interpreter: three kernels)"
