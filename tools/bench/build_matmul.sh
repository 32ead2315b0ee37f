#!/usr/bin/env bash
# Build tools/bench/kiln_bench_matmul against an existing Kiln build directory (the
# static libraries and LLVM 19), on the build machine; like build.sh, the binary
# needs only libc, libstdc++, zlib and zstd, and dlopens libcuda at run time.
#   bash tools/bench/build_matmul.sh [BUILD_DIR] [OUTPUT]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
out=${2:-$root/tools/bench/kiln_bench_matmul}
cmake --build "$build" --target kiln kiln_lang kiln_passes kiln_interp kiln_codegen kiln_runtime -j2 >/dev/null
llvm_config=$(command -v llvm-config-19 || command -v llvm-config)
libs=(kiln kiln_lang kiln_passes kiln_interp kiln_codegen kiln_runtime kiln_ir kiln_support)
link=()
for l in "${libs[@]}"; do link+=("$build/lib$l.a"); done
gcc -std=c17 -O2 -Wall -Wextra -D_GNU_SOURCE -I"$root" -I"$root/runtime" \
    "$root/tools/bench/kiln_bench_matmul.c" \
    "${link[@]}" "${link[@]}" \
    -L"$("$llvm_config" --libdir)" $("$llvm_config" --link-static --libs nvptx core analysis target passes bitwriter) \
    -lstdc++ -lz -lzstd -ldl -lpthread -lm -o "$out"
echo "$out"
