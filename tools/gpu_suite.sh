#!/usr/bin/env bash
# gpu_suite.sh — run Kiln's GPU suite (the ctest label "gpu") on a GPU machine.
#
#   tools/gpu_suite.sh [BUILD_DIR]        (from anywhere; BUILD_DIR defaults to build)
#   tools/gpu_suite.sh --pack BUILD_DIR DEST
#       (on the build machine) copy the gpu test executables, stripped, to
#       DEST/tests and the shared libraries they need beyond the base system
#       (Check's libsubunit, ...) to DEST/lib: carry DEST and run
#       tools/gpu_suite.sh DEST on the GPU machine.
#
# The build dir is usually built elsewhere and carried along: when its
# CMakeCache points at this checkout, the suite runs through ctest -L gpu;
# otherwise (another path) the gpu test executables BUILD_DIR/tests/gpu_test_*
# run directly, with the environment ctest would give them. Logs go to $OUT
# when it is set (else BUILD_DIR/gpu-logs): one log per test, nvidia-smi, and
# summary.txt. Ends with a short table; exit status 0 only if every test passed
# or was skipped (without a GPU a test prints "SKIP: no GPU (...)" and exits 77,
# which ctest reports as skipped; the table says SKIP).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "${1:-}" = --pack ]; then
  src=${2:?usage: gpu_suite.sh --pack BUILD_DIR DEST}; dest=${3:?usage: gpu_suite.sh --pack BUILD_DIR DEST}
  mkdir -p "$dest/tests" "$dest/lib"
  for t in "$src"/tests/gpu_test_*; do
    [ -x "$t" ] || continue
    strip -o "$dest/tests/$(basename "$t")" "$t" || cp "$t" "$dest/tests/"
    ldd "$t" | awk '/=> \// { print $3 }' | grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
      while read -r lib; do cp -L "$lib" "$dest/lib/"; done
  done
  echo "packed: $(ls "$dest/tests" | tr '\n' ' ')+ lib/: $(ls "$dest/lib" | tr '\n' ' ')"
  exit 0
fi
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
if [ ! -d "$build/tests" ]; then
  echo "gpu_suite: no build dir at $build (build with cmake first, or pass its path)" >&2
  exit 2
fi
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
logs=${OUT:-$build/gpu-logs}
mkdir -p "$logs"
{ command -v nvidia-smi >/dev/null && nvidia-smi; } >"$logs/nvidia-smi.txt" 2>&1 || true

mapfile -t tests < <(find "$build/tests" -maxdepth 1 -type f -name 'gpu_test_*' -perm -u+x | sort)
if [ ${#tests[@]} -eq 0 ]; then
  echo "gpu_suite: no gpu test executables in $build/tests (build the gpu_test_* targets)" >&2
  exit 2
fi

src_of_cache=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)
mode=direct
if [ "$src_of_cache" = "$root" ] && command -v ctest >/dev/null; then mode=ctest; fi
mode=${KILN_GPU_SUITE_MODE:-$mode}   # ctest | direct
echo "== Kiln GPU suite ($mode; build $build; logs $logs)"

status=0
declare -A result secs
if [ $mode = ctest ]; then
  ctest --test-dir "$build" -L gpu --output-on-failure -V >"$logs/ctest.log" 2>&1 || status=1
  for t in "${tests[@]}"; do
    n=$(basename "$t"); name=gpu/${n#gpu_}
    line=$(grep -E "Test +#[0-9]+: $name " "$logs/ctest.log" | tail -1)
    num=$(echo "$line" | grep -oE '#[0-9]+' | head -1 | tr -d '#')
    # ctest -V prefixes each line of a test's output with its number
    [ -n "$num" ] && sed -n "s/^$num: //p" "$logs/ctest.log" >"$logs/$n.log"
    case $line in *Passed*) result[$n]=PASS ;; *Skipped*) result[$n]=SKIP ;; *) result[$n]=FAIL ;; esac
    secs[$n]=$(echo "$line" | grep -oE '[0-9.]+ sec' | head -1)
  done
else
  for t in "${tests[@]}"; do
    n=$(basename "$t")
    start=$(date +%s.%N)
    ( cd "$build/tests" && KILN_SOURCE_DIR=$root KILN_BINARY_DIR=$build CK_DEFAULT_TIMEOUT=600 \
        timeout 1200 "$t" ) >"$logs/$n.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    secs[$n]=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f sec", b - a }')
    if [ $rc -eq 0 ]; then result[$n]=PASS; elif [ $rc -eq 77 ]; then result[$n]=SKIP; else result[$n]=FAIL; status=1; fi
  done
fi

{
  echo
  echo "== GPU suite summary"
  grep -h -m1 '^device:' "$logs"/gpu_test_*.log 2>/dev/null | head -1
  printf '%-34s %-6s %s\n' test result time
  for t in "${tests[@]}"; do
    n=$(basename "$t")
    r=${result[$n]}
    printf '%-34s %-6s %s\n' "${n#gpu_}" "$r" "${secs[$n]:-}"
  done
  skip=$(grep -h -m1 'SKIP: no GPU' "$logs"/gpu_test_*.log 2>/dev/null | head -1)
  [ -n "$skip" ] && echo "$skip"
  rows=$(grep -h '^ROW ' "$logs"/gpu_test_e2e_gpu_examples.log 2>/dev/null)
  if [ -n "$rows" ]; then
    echo
    printf '%-11s %-30s %11s %11s %9s %9s %10s %9s  %s\n' example shape err/f64 err/interp tol time_ms compile_ms cached_ms result
    echo "$rows" | sed 's/^ROW //'
  fi
  grep -h '^timing:' "$logs"/gpu_test_*.log 2>/dev/null
  echo
  if [ $status -eq 0 ]; then echo "GPU suite: OK"; else echo "GPU suite: FAILED (logs in $logs)"; fi
} | tee "$logs/summary.txt"
exit $status
