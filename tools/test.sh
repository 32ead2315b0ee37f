#!/usr/bin/env bash
# The README's second command (and CI's): build and run every test, twice — a
# normal build, and an AddressSanitizer + UndefinedBehaviorSanitizer build — and the
# Python package's pytest suite (python/tests) in the venv of tools/pyenv.sh.
# A test that cannot run here (the GPU suite without a GPU, the ptxas cases
# without ptxas) exits 77; ctest counts it as skipped, never passed, and lists
# it under "The following tests did not run".
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
jobs=$(nproc)
echo "== build (RelWithDebInfo)"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-test -j"$jobs"
echo "== tests"
ctest --test-dir build-test --output-on-failure -j"$jobs"
echo "== the Python package (pytest, against build-test/libkiln.so: no third LLVM build)"
py=$(bash tools/pyenv.sh | tail -n 1)
# pytest exits 5 when it collects no test: under set -e that fails the run like any other error
KILN_LIBRARY="$PWD/build-test/libkiln.so" "$py" -m pytest -q -p no:cacheprovider python/tests
echo "== build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
echo "== tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
