#!/usr/bin/env bash
# On the GPU machine, from the repository root: Kiln's forward and backward beside FlashAttention-4,
# cuDNN and FA2 on the same torch tensors (tools/bench/bench_peers.py), with the bundle of
# tools/device_pack.sh in .carry/ and FlashAttention-4 unpacked from .carry/fa4site.tar.xz, or from
# a site folder already there (FA4_SITE, default /tmp/fa4site). That archive holds the unpacked
# wheels of flash-attn-4 4.0.0b36 and nvidia-cutlass-dsl 4.8.1 (+ libs-base/core/cu13,
# apache-tvm-ffi, torch-c-dlpack-ext, quack-kernels), made here with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_28_x86_64 -d W flash-attn-4==4.0.0b36 ...; for w in W/*.whl; do
#     unzip -q -o $w -d site; done; tar -C site -cJf .carry/fa4site.tar.xz .
# (one xz archive fits a call's 64 MiB where the cu13 wheel alone is 92 MB). Arguments go to
# bench_peers.py. Full log: $OUT/peers.log; the table prints last.
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
site=${FA4_SITE:-/tmp/fa4site}
if [ ! -d "$site/flash_attn" ] && [ -f .carry/fa4site.tar.xz ]; then
  mkdir -p "$site" && tar -C "$site" -xJf .carry/fa4site.tar.xz
fi
[ -d "$site/flash_attn" ] && export PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages${PYTHONPATH:+:$PYTHONPATH}
export KILN_LIBRARY=$kiln/lib/libkiln_all.so PYTHONPATH=$root/python:${PYTHONPATH:-}
python3 -c 'import flash_attn.cute.interface as m; print("fa4:", m.__file__)' 2>&1 | tail -1
python3 tools/bench/bench_peers.py --out "$out" "$@" 2>"$out/peers.log"
echo "bench_peers rc=$?"; tail -n 5 "$out/peers.log"
