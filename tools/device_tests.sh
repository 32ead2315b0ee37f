#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: run GPU test executables of the bundle, each with a time limit of its own
# (NAME:SECONDS), e.g.
#   bash tools/device_tests.sh gpu_test_e2e_gpu_attention_bwd:330 gpu_test_e2e_gpu_attention_decode:460
# (the decode sweep needs ~460 s: more than device_run.sh gives one test).
# KILN_PAR=1 runs them all at once (one GPU shared: the call takes as long as the slowest test
# instead of the sum; the timings of tests that overlap are not comparable with serial ones).
# The device tool returns at most 8 files, so $OUT gets exactly two: summary.txt (each test's
# last ROW / summary / FAIL / Checks lines, then a table of exit status and seconds per test)
# and logs.tgz (each test's full log). The summary is printed last.
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
logs=$(mktemp -d)
summary=$out/summary.txt
: >"$summary"

one() {   # NAME SECONDS: run one test, its log in $logs/NAME.log and "NAME rc=RC Ns" in $logs/NAME.rc
  local n=$1 t=$2 s rc
  s=$(date +%s)
  ( cd "$kiln/tests" && CK_DEFAULT_TIMEOUT=600 timeout "$t" "./$n" ) >"$logs/$n.log" 2>&1
  rc=$?
  echo "$n rc=$rc $(( $(date +%s) - s ))s" >"$logs/$n.rc"
}

for spec in "$@"; do
  n=${spec%%:*}; t=${spec##*:}
  [ "$n" = "$spec" ] && t=600   # no limit given: the tool's own
  if [ "${KILN_PAR:-0}" = 1 ]; then one "$n" "$t" & else one "$n" "$t"; cat "$logs/$n.rc"; fi
done
wait

for spec in "$@"; do   # each test's last ROW / summary / FAIL / Checks lines, then the table
  n=${spec%%:*}
  { echo "== $n"; grep -E "^ROW|summary|FAIL|Checks" "$logs/$n.log" 2>/dev/null | tail -12; } >>"$summary"
done
{ echo "==== test rc seconds (rc 124: the limit; 77: skipped, no GPU)"
  for spec in "$@"; do n=${spec%%:*}; cat "$logs/$n.rc" 2>/dev/null || echo "$n no result"; done; } >>"$summary"
# The archive is written outside $OUT first: tar refuses a folder that changes as it reads it.
tar -C "$logs" -czf "$logs.tgz" . && mv "$logs.tgz" "$out/logs.tgz"
rm -rf "$logs"
echo; echo "=========== summary"; cat "$summary"
