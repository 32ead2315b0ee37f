#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: the FP8 forward's checks and timings in one `run` call (about 5 minutes).
#   1. gpu_test_e2e_gpu_attention_fp8 against float64: every case with FP8 wgmma
#      (schedule.no_fp8_wgmma = -1; sm_90a: the dots on FP8 wgmma where the tiles allow,
#      docs/tensor_cores.md 4e) and widened ("[widened]" rows: the f16 tensor-core path, the
#      runtime's default until this check has passed: jit/attention.c), PASS/FAIL;
#   2. the same test with KILN_FP8_BENCH=1: B 2, H 16, N 4096/8192, d 128/256 (the runtime's
#      tiles), "BENCH" lines with the FP8 forward native, widened, native with overlap (off by
#      default for FP8) and the f16 forward, and the ratios fp8/widened and fp8/f16;
#   3. tools/bench/bench_attention.py --fp8 --quick: Kiln FP8 against torch's SDPA on
#      float8_e4m3fn (cuDNN's FP8 attention where torch exposes it, else "fail") and the f16
#      forwards (Kiln, SDPA's cuDNN backend) on 16k tokens, with FlashAttention-3's RMSE against
#      float64 (attention_fp8.{json,md} in $OUT).
# Results in $OUT: fp8_test.log, fp8_bench.log, bench_fp8.log and the benchmark's files; the
# ROW/BENCH lines and the table are printed last. Exit status: 1 when the test failed.
#   device run, carry [".carry"]:  bash tools/device_bench_fp8.sh
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
t=$kiln/tests/gpu_test_e2e_gpu_attention_fp8
( cd "$kiln/tests" && CK_DEFAULT_TIMEOUT=600 timeout 200 "$t" ) >"$out/fp8_test.log" 2>&1
rc=$?
( cd "$kiln/tests" && KILN_FP8_BENCH=1 timeout 120 "$t" ) >"$out/fp8_bench.log" 2>&1
echo "fp8 bench exit $?"
KILN_LIBRARY=$kiln/lib/libkiln_all.so timeout 240 python3 tools/bench/bench_attention.py --fp8 --quick \
  --out "$out" >"$out/bench_fp8.log" 2>&1
echo "bench_attention --fp8 exit $?"
echo "=========== gpu_test_e2e_gpu_attention_fp8 (exit $rc)"
grep -E "^ROW|PASS|FAIL" "$out/fp8_test.log"
echo "=========== KILN_FP8_BENCH=1"
grep -E "^BENCH|FAIL" "$out/fp8_bench.log"
echo "=========== bench_attention.py --fp8 --quick"
if [ -f "$out/attention_fp8.md" ]; then cat "$out/attention_fp8.md"; else tail -30 "$out/bench_fp8.log"; fi
[ "$rc" = 0 ]
