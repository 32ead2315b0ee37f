#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: the learnable-bias backward (issue 28, section 1) — Kiln's T5 bias-table and
# ALiBi-slope gradients against FlexAttention's (tools/bench/bench_param_grads.py through the
# Python package on the bundle's libkiln_all.so): the float64 check and bit-identity of each,
# then the backward's median time. Arguments go to the benchmark (e.g. --n 8192). Results in
# $OUT: param_grads_bench.{json,md}, bench_param_grads.log; the table is printed last.
#   device run, carry [".carry"]:  bash tools/device_bench_param_grads.sh
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
timeout 540 python3 tools/bench/bench_param_grads.py --lib "$kiln/lib/libkiln_all.so" --out "$out" "$@" \
  >"$out/bench_param_grads.log" 2>&1
rc=$?
echo "bench_param_grads exit $rc"
tail -40 "$out/bench_param_grads.log"
exit $rc
