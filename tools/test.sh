#!/usr/bin/env bash
# The README's second command (and CI's, .ci/run): build and run every test, twice —
# a normal build (build-test/, RelWithDebInfo), and an AddressSanitizer +
# UndefinedBehaviorSanitizer build (build-asan/, Debug) — and the Python package's
# pytest suite (python/tests) against the first build's libkiln.so, in the venv of
# tools/pyenv.sh (torch from PyPI, ~5 GB, made once per machine and kept).
# What it costs: two full builds from scratch, ~17 minutes on 2 cores (most of it the
# ASan build and its test run) and ~7.5 GB of build trees. Each phase prints its wall
# time. KILN_KEEP_BUILD=0 removes both trees at the end (CI=true makes that the
# default); run by hand, they are kept for the next run, and the end says so.
# A test that cannot run here (the GPU suite without a GPU, the ptxas cases
# without ptxas) exits 77; ctest counts it as skipped, never passed, and lists
# it under "The following tests did not run".
set -euo pipefail
cd "$(dirname "$0")/.."
keep=${KILN_KEEP_BUILD:-$([ "${CI:-}" = true ] && echo 0 || echo 1)}
echo "tools/test.sh: 2 builds (normal, ASan + UBSan) and their tests: ~17 min and ~7.5 GB on 2 cores;" \
     "build trees: $([ "$keep" = 1 ] && echo "kept (KILN_KEEP_BUILD=0 removes them)" || echo "removed at the end")"
bash tools/deps.sh
jobs=$(nproc)
phase_start=$SECONDS
phase() {  # the previous phase's wall time, then the next phase's name
  [ -n "${phase_name:-}" ] && echo "== $phase_name: $((SECONDS - phase_start)) s"
  phase_name=$1
  phase_start=$SECONDS
  [ -n "$phase_name" ] && echo "== $phase_name"
  return 0
}
phase "build (RelWithDebInfo)"
# KILN_WERROR=ON (CI, .ci/run): every warning of this build is an error. Not the ASan build's:
# -O0 with the sanitizers gives gcc's flow warnings other (false) positives.
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_WERROR="${KILN_WERROR:-OFF}" >/dev/null
cmake --build build-test -j"$jobs"
phase "tests"
ctest --test-dir build-test --output-on-failure -j"$jobs"
phase "the Python package (pytest, against build-test/libkiln.so: no third LLVM build)"
py=$(bash tools/pyenv.sh | tail -n 1)
# pytest exits 5 when it collects no test: under set -e that fails the run like any other error
KILN_LIBRARY="$PWD/build-test/libkiln.so" "$py" -m pytest -q -p no:cacheprovider python/tests
phase "build (ASan + UBSan)"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DKILN_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
phase "tests under ASan + UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs"
phase ""
echo "== all: $SECONDS s"
if [ "$keep" = 1 ]; then
  echo "build trees kept: build-test build-asan ($(du -shc build-test build-asan 2>/dev/null | tail -1 | cut -f1)); KILN_KEEP_BUILD=0 removes them"
else
  rm -rf build-test build-asan
  echo "build trees removed (build-test, build-asan)"
fi
