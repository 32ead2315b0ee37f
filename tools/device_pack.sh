#!/usr/bin/env bash
# Build what the GPU machine needs, here, and pack it into .carry/bundle.tar.xz:
# one Release build with KILN_SHARED=ON (libkiln_all.so + small programs: kiln,
# kiln-examples, the GPU tests, the benchmark drivers), stripped, plus the few
# shared libraries the GPU machine lacks (Check's libsubunit), and the libFuzzer
# target when KILN_PACK_FUZZ=1. Then: device run with carry [".carry"] and
# `bash tools/device_run.sh`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${KILN_PACK_BUILD:-build-gpu}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_SHARED=ON >/dev/null
targets=(kiln_cli kiln-examples kiln-bench kiln-bench-attn kiln-bench-matmul kiln-bench-decode kiln-bench-compile
         kiln-bench-host)
while read -r t; do targets+=("$t"); done < <(cd "$build" && make help 2>/dev/null | sed -n 's/^\.\.\. \(gpu_test_[a-z0-9_]*\)$/\1/p')
cmake --build "$build" -j2 --target "${targets[@]}"
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib" "$stage/tests"
strip -o "$stage/lib/libkiln_all.so" "$build/libkiln_all.so"
for b in kiln kiln-examples kiln-bench kiln-bench-attn kiln-bench-matmul kiln-bench-decode kiln-bench-compile \
         kiln-bench-host; do
  [ -x "$build/$b" ] && strip -o "$stage/bin/$b" "$build/$b"
done
for t in "$build"/tests/gpu_test_*; do
  [ -x "$t" ] && strip -o "$stage/tests/$(basename "$t")" "$t"
done
for f in "$stage"/bin/* "$stage"/tests/*; do
  ldd "$f" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libz|libzstd|libkiln_all|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -nL "$lib" "$stage/lib/"; done || true
done
if [ "${KILN_PACK_FUZZ:-0}" = 1 ] && [ -x build-fuzz/tests/fuzz/fuzz_frontend ]; then
  cp build-fuzz/tests/fuzz/fuzz_frontend "$stage/bin/"
fi
mkdir -p .carry
tar -C "$stage" -cJf .carry/bundle.tar.xz .
rm -rf "$stage"
ls -la .carry/bundle.tar.xz
