#!/usr/bin/env bash
# On the GPU machine: run GPU test executables of .carry/bundle.tar.xz (tools/device_pack.sh)
# with a time limit each, e.g. bash tools/device_tests.sh gpu_test_e2e_gpu_attention_bwd:330
# (the decode sweep needs ~460 s: more than device_run.sh gives one test). Logs to $OUT.
set -uo pipefail
root=$PWD; mkdir -p /tmp/kiln; tar -C /tmp/kiln -xJf .carry/bundle.tar.xz
export LD_LIBRARY_PATH=/tmp/kiln/lib KILN_SOURCE_DIR=$root KILN_CACHE_DIR=/tmp/kiln-cache
for spec in "$@"; do
  n=${spec%%:*}; t=${spec##*:}; s=$(date +%s)
  ( cd /tmp/kiln/tests && CK_DEFAULT_TIMEOUT=600 timeout $t ./$n ) > $OUT/$n.log 2>&1; rc=$?
  echo "$n rc=$rc $(( $(date +%s) - s ))s"
  grep -E "^ROW|summary|FAIL|Checks" $OUT/$n.log | tail -12
done
