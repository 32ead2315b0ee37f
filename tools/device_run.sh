#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .carry/bundle.tar.xz
# (tools/device_pack.sh) carried along: the main job on the GPU, the GPU suite,
# then the benchmarks named in $KILN_BENCH (memory matmul attention; default all;
# also decode (kiln-bench-decode: GB/s of K+V, contiguous and paged 64), attention-bwd
# (bench_attention_bwd.py and its SVG charts; tools/device_bench_bwd.sh runs it alone), flex
# (bench_flex.py: the shipped variants against FlexAttention, and its chart; tools/device_bench_flex.sh
# runs it alone), compile
# (kiln-bench-compile: every shipped kernel's source -> PTX time by phase, and the forward's
# PTX/cubin load and cache-hit times, and --variant-cold: a new variant's cold first fwd/bwd), attention-sweep and matmul-sweep: Kiln's schedules against FA2 / cuBLAS
# within KILN_SWEEP_BUDGET_S seconds, default 240), and optionally the fuzzer
# (KILN_FUZZ_SECONDS, over all cores). KILN_SUITE=0 skips the main job and the GPU
# suite (a tuning session: KILN_SUITE=0 KILN_BENCH=attention-sweep). KILN_MATMUL_ARGS /
# KILN_ATTN_ARGS go to the matmul / attention scripts only; `profile` runs ncu on Kiln's
# and FA2's attention kernels (tools/bench/profile_attention.sh; D, N, SCHEDS). Full logs go
# to $OUT; a short table is printed last.
set -uo pipefail
. "$(dirname "$0")/device_env.sh" >/dev/null   # unpacks the bundle (KILN_BUNDLE, KILN_UNPACK_DIR): $root, $out, $kiln
bin=$kiln/bin
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1
note "GPU: $(sed -n 2p "$out/gpu.txt")   date: $(date -u +%F)"

if [ "${KILN_SUITE:-1}" != 0 ]; then
note "== main job (kiln-examples)"
"$bin/kiln-examples" >"$out/examples.log" 2>&1; note "kiln-examples exit $?"
grep -E " ok$| FAIL$|FAIL" "$out/examples.log" | tee -a "$summary"

note "== kiln run (GPU path)"
"$bin/kiln" run examples/vec_add.tile --grid 4 X=rand:1000 Y=rand:1000 Z=zeros:1000 n=1000 >"$out/kiln_run.log" 2>&1
note "kiln run exit $?: $(head -1 "$out/kiln_run.log")"

note "== GPU suite"
mkdir -p "$out/suite"
for t in "$kiln"/tests/gpu_test_*; do
  n=$(basename "$t")
  s=$(date +%s)
  ( cd "$kiln/tests" && CK_DEFAULT_TIMEOUT=600 timeout "${KILN_TEST_TIMEOUT:-300}" "$t" ) >"$out/suite/$n.log" 2>&1
  rc=$?
  case $rc in 0) r=PASS ;; 77) r=SKIP ;; *) r="FAIL($rc)" ;; esac   # 77: the test could not run here
  note "$(printf '%-36s %s  %ss' "$n" "$r" $(( $(date +%s) - s )))"
done
grep -h '^ROW ' "$out"/suite/*.log 2>/dev/null | sed 's/^ROW //' >>"$summary"
fi

benches=${KILN_BENCH-memory matmul attention}
for b in $benches; do
  note "== bench $b"
  case $b in
    memory) timeout 240 python3 tools/bench/bench_memory.py --kiln-bin "$bin/kiln-bench" ${KILN_BENCH_ARGS:-} --out "$out" >"$out/bench_memory.log" 2>&1 ;;
    matmul) timeout 300 python3 tools/bench/bench_matmul.py --kiln-bin "$bin/kiln-bench-matmul" ${KILN_BENCH_ARGS:-} ${KILN_MATMUL_ARGS:-} --out "$out" >"$out/bench_matmul.log" 2>&1 ;;
    attention) timeout 540 python3 tools/bench/bench_attention.py --kiln-bin "$bin/kiln-bench-attn" ${KILN_BENCH_ARGS:-} ${KILN_ATTN_ARGS:-} --out "$out" >"$out/bench_attention.log" 2>&1 ;;
    decode) for pg in 0 64; do for d in 64 128; do timeout 120 "$bin/kiln-bench-decode" --dtype bf16 --head-dim $d \
        --batch ${KILN_DECODE_BATCH:-4} --heads 32 --heads-kv 8 --page $pg --seqlens 1024,8192,65536,262144; done; done \
        >"$out/bench_decode.log" 2>&1 ;;
    compile) { timeout 300 "$bin/kiln-bench-compile" --reps 5 --src-dir "$root" --cache
        timeout 120 "$bin/kiln-bench-attn" --src lang/lib/attention_fwd.tile --dtype f16 --head-dim 128 --heads 16 \
          --tokens 4096 --seqlens 1024 --compile-bench 5
        # a never-seen variant's first fwd / bwd: deferred (default) and the old eager path
        timeout 240 "$bin/kiln-bench-compile" --variant-cold --device --reps 3 --src-dir "$root"
        KILN_DEFER=0 timeout 120 "$bin/kiln-bench-compile" --variant-cold --device --reps 1 --src-dir "$root"
        } >"$out/bench_compile.log" 2>&1 ;;
    profile) timeout 300 bash tools/bench/profile_attention.sh "$bin/kiln-bench-attn" >"$out/bench_profile.log" 2>&1 ;;
    attention-sweep) timeout $((${KILN_SWEEP_BUDGET_S:-240} + 120)) python3 tools/bench/bench_attention.py --sweep \
        --budget-s "${KILN_SWEEP_BUDGET_S:-240}" --kiln-bin "$bin/kiln-bench-attn" ${KILN_BENCH_ARGS:-} ${KILN_ATTN_ARGS:-} --out "$out" \
        >"$out/bench_attention-sweep.log" 2>&1 ;;
    attention-bwd) timeout 420 python3 tools/bench/bench_attention_bwd.py --lib $kiln/lib/libkiln_all.so \
        --budget-s 360 ${KILN_BENCH_ARGS:-} --out "$out" >"$out/bench_attention-bwd.log" 2>&1 &&
        python3 tools/bench/plot_svg.py --preset backward "$out/attention_bwd_bench.csv" -o "$out/img" \
        >>"$out/bench_attention-bwd.log" 2>&1 ;;
    flex) timeout 540 python3 tools/bench/bench_flex.py --lib $kiln/lib/libkiln_all.so --budget-s 420 \
        ${KILN_BENCH_ARGS:-} --out "$out" >"$out/bench_flex.log" 2>&1 &&
        python3 tools/bench/plot_svg.py --preset flex "$out/flex_bench.csv" -o "$out/img" >>"$out/bench_flex.log" 2>&1 ;;
    matmul-sweep) timeout $((${KILN_SWEEP_BUDGET_S:-240} + 120)) python3 tools/bench/bench_matmul.py --sweep \
        --budget-s "${KILN_SWEEP_BUDGET_S:-240}" --kiln-bin "$bin/kiln-bench-matmul" ${KILN_BENCH_ARGS:-} ${KILN_MATMUL_ARGS:-} --out "$out" \
        >"$out/bench_matmul-sweep.log" 2>&1 ;;
    *) echo "unknown benchmark '$b' (memory matmul attention decode attention-bwd flex compile attention-sweep matmul-sweep profile)" >"$out/bench_$b.log"; false ;;
  esac
  note "bench $b exit $?"
  case $b in *-sweep|profile|compile) n=90 ;; *) n=40 ;; esac
  tail -$n "$out/bench_$b.log" >>"$summary"
done

if [ -n "${KILN_FUZZ_SECONDS:-}" ] && [ -x "$bin/fuzz_frontend" ]; then
  note "== fuzz: $(nproc) workers x ${KILN_FUZZ_SECONDS}s"
  mkdir -p /tmp/fuzz-corpus && cp tests/fuzz/corpus/* /tmp/fuzz-corpus/ 2>/dev/null
  ( cd /tmp && timeout $((KILN_FUZZ_SECONDS + 60)) "$bin/fuzz_frontend" -fork="$(nproc)" -ignore_crashes=0 \
      -max_total_time="$KILN_FUZZ_SECONDS" -dict="$root/tests/fuzz/kiln.dict" /tmp/fuzz-corpus ) >"$out/fuzz.log" 2>&1
  note "fuzz exit $? ; $(grep -cE 'ERROR|crash-' "$out/fuzz.log") crash lines; last: $(grep -E '#[0-9]+' "$out/fuzz.log" | tail -1)"
fi
# Only a few files come back from $OUT: everything but the summary and the
# result tables goes into one archive.
# (The archive is written outside $OUT first: tar refuses a folder that changes as it reads it.)
( cd "$out" && tar -czf /tmp/kiln-logs.tgz --exclude='*.json' --exclude='*.md' --exclude=summary.txt \
    --exclude='*.png' --exclude='*.csv' --exclude='*.svg' . && mv /tmp/kiln-logs.tgz logs.tgz && \
    find . -mindepth 1 -not -name logs.tgz -not -name '*.json' -not -name summary.txt -not -name '*.png' \
    -not -name '*.md' -not -name '*.csv' -not -name '*.svg' -not -type d -delete 2>/dev/null )
echo; echo "=========== summary"; cat "$summary"
