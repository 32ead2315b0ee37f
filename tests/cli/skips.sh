#!/usr/bin/env bash
# Honest skips: a test that cannot run exits 77 (ctest: skipped), never 0.
# Usage: skips.sh BUILD_DIR. Uses codegen_test_e2e_alu_fma (cases tagged ptxas,
# tests/ptx_util.h) and codegen_test_e2e_ptxas (every case needs ptxas) with
# KILN_PTXAS pointing at a missing file, so it behaves the same on any machine.
set -u
t=$1/tests
fail=0
check() { # check WANT_RC DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  out=$("$@" 2>&1); local got=$?
  if [ "$got" != "$want" ]; then echo "FAIL: $what: exit $got, expected $want"; echo "$out" | head -5; fail=1; fi
}
export KILN_PTXAS=/nonexistent/ptxas
check 77 "ptxas cases alone, no ptxas" -- env CK_INCLUDE_TAGS=ptxas "$t/codegen_test_e2e_alu_fma"
echo "$out" | grep -q "^SKIP: ptxas not found" || { echo "FAIL: no SKIP line"; fail=1; }
check 77 "all-ptxas executable, no ptxas" -- "$t/codegen_test_e2e_ptxas"
check 0 "the other cases still run" -- env CK_EXCLUDE_TAGS=ptxas "$t/codegen_test_e2e_alu_fma"
echo "$out" | grep -q "Checks: [1-9]" || { echo "FAIL: no cases ran"; fail=1; }
check 0 "run directly without ptxas: the rest runs" -- "$t/codegen_test_e2e_alu_fma"
echo "$out" | grep -q "^SKIP: the cases tagged ptxas" || { echo "FAIL: no SKIP line for the ptxas cases"; fail=1; }
# With a ptxas (a fake that fails) the ptxas cases run, and fail: nothing is skipped then.
fake=$(mktemp); printf '#!/bin/sh\nexit 1\n' >"$fake"; chmod +x "$fake"
KILN_PTXAS=$fake check 1 "ptxas cases run when ptxas is there" -- env CK_INCLUDE_TAGS=ptxas "$t/codegen_test_e2e_alu_fma"
rm -f "$fake"
[ $fail = 0 ] && echo "skips: ok"
exit $fail
