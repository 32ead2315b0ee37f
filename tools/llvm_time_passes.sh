#!/bin/bash
# llvm_time_passes.sh — LLVM's own time per pass for one kernel, with Kiln's pipeline.
#
#   tools/llvm_time_passes.sh [--arch sm_90a] KILN_COMPILE_ARGS...
#   e.g. tools/llvm_time_passes.sh lang/lib/attention_fwd.tile -k attn_fwd_f16 -D HEAD_DIM=128 \
#        -D BLOCK_M=128 -D BLOCK_N=64 -D CAUSAL=false -D PLAIN_SCORES=true --num-warps 4 --num-stages 2
#
# Dumps the kernel's LLVM IR before LLVM's passes (kiln compile --dump-after all), then runs
# LLVM 19's opt with the pipeline of tests/codegen/llvm_pipeline.txt (the one cg_emit.c runs;
# its test keeps the file in step) and llc at the same codegen level, both with -time-passes:
# the IR passes' and the codegen passes' (instruction selection, ...) shares. Needs opt and llc
# (LLVM_BIN, default /usr/lib/llvm-19/bin) and a built kiln (KILN, default build/kiln).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kiln=${KILN:-$root/build/kiln}
bin=${LLVM_BIN:-/usr/lib/llvm-19/bin}
arch=sm_90a
if [ "${1:-}" = --arch ]; then arch=$2; shift 2; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$kiln" compile "$@" --arch "$arch" --emit ptx -o "$tmp/k.ptx" --dump-after all 2>"$tmp/dump.txt"
sed -n '/^; ----- LLVM IR after lower/,$p' "$tmp/dump.txt" | tail -n +2 >"$tmp/k.ll"
pipe=$(sed -n '/^passes:/,/^options:/p' "$root/tests/codegen/llvm_pipeline.txt" | sed '1d;$d' |
       sed 's/^ *//' | paste -sd, | sed 's/(,/(/g')
opts=$(sed -n 's/^options: //p' "$root/tests/codegen/llvm_pipeline.txt")
level=$(sed -n 's/^codegen level: //p' "$root/tests/codegen/llvm_pipeline.txt")
case $level in less) O=-O1 ;; default) O=-O2 ;; *) O=-O3 ;; esac
common=(-mtriple=nvptx64-nvidia-cuda -mcpu="$arch" -mattr=+ptx80)
echo "== LLVM IR passes (opt, $(grep -c . "$tmp/k.ll") lines of IR in) =="
# shellcheck disable=SC2086
"$bin/opt" "${common[@]}" $opts -passes="$pipe" -time-passes "$tmp/k.ll" -o "$tmp/k.bc" 2>&1 | sed -n '4,30p'
echo "== NVPTX codegen (llc $O) =="
# shellcheck disable=SC2086
"$bin/llc" "${common[@]}" $opts $O -time-passes "$tmp/k.bc" -o "$tmp/llc.ptx" 2>&1 | sed -n '4,30p'
