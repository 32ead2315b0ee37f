#!/usr/bin/env bash
# tools/device_tests.sh without a GPU: a fake bundle of three "tests" (one passes, one runs past
# its limit, one sleeps), run serially and with KILN_PAR=1. Checks that $OUT holds exactly
# summary.txt and logs.tgz, that the summary's table lists every test in argument order with
# its exit status (124 past the limit), that the archive has every log, that the summary is
# printed last, and that KILN_PAR=1 overlaps the tests (about the slowest one's time, not the sum).
#   bash tests/tools/test_device_tests.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: test_device_tests.sh SOURCE_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$work/repo/tools" "$work/repo/.carry" "$work/b/tests"
cp "$src/tools/device_tests.sh" "$src/tools/device_env.sh" "$work/repo/tools/"
printf '#!/bin/sh\necho "Checks: 3, Failures: 0, Errors: 0"\necho "ROW t_ok 1"\nsleep 2\n' >"$work/b/tests/t_ok"
printf '#!/bin/sh\necho "FAIL: t_hang case"\nsleep 30\n' >"$work/b/tests/t_hang"
printf '#!/bin/sh\nsleep 2\necho "summary: t_nap 2/2"\n' >"$work/b/tests/t_nap"
chmod +x "$work/b/tests/"*
tar -C "$work/b" -cJf "$work/repo/.carry/bundle.tar.xz" tests

run() {   # OUTDIR [ENV...]: the script on the three tests; its stdout in OUTDIR.stdout, seconds in $secs
  local o=$1; shift
  mkdir -p "$o"
  local s=$(date +%s)
  (cd "$work/repo" && env OUT="$o" KILN_UNPACK_DIR="$work/unpack" "$@" \
     bash tools/device_tests.sh t_ok:20 t_hang:3 t_nap:20 >"$o.stdout" 2>&1) || fail "exit status $?"
  secs=$(( $(date +%s) - s ))
}

check() {   # OUTDIR
  local o=$1
  [ "$(cd "$o" && ls | sort | tr '\n' ' ')" = "logs.tgz summary.txt " ] || fail "$o holds $(ls "$o")"
  local table
  table=$(sed -n '/^==== test rc seconds/,$p' "$o/summary.txt" | sed 1d | sed 's/ [0-9]*s$//')
  [ "$table" = $'t_ok rc=0\nt_hang rc=124\nt_nap rc=0' ] || fail "table:"$'\n'"$table"
  grep -qx "ROW t_ok 1" "$o/summary.txt" || fail "no ROW line of t_ok"
  grep -qx "FAIL: t_hang case" "$o/summary.txt" || fail "no FAIL line of t_hang"
  grep -qx "summary: t_nap 2/2" "$o/summary.txt" || fail "no summary line of t_nap"
  local logs
  logs=$(tar -tzf "$o/logs.tgz" | grep '\.log$' | sed 's|^\./||' | sort | tr '\n' ' ')
  [ "$logs" = "t_hang.log t_nap.log t_ok.log " ] || fail "logs.tgz has $logs"
  tail -1 "$o.stdout" | grep -q "^t_nap rc=0" || fail "the summary is not printed last: $(tail -1 "$o.stdout")"
}

run "$work/serial"
serial=$secs
check "$work/serial"
run "$work/par" KILN_PAR=1
par=$secs
check "$work/par"
[ "$serial" -ge 7 ] || fail "serial run took ${serial}s, expected the sum (~7 s)"
[ "$par" -le 5 ] || fail "KILN_PAR=1 took ${par}s, expected the slowest test's time (~3 s)"
echo "ok: serial ${serial}s, KILN_PAR=1 ${par}s"
