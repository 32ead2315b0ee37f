#!/usr/bin/env bash
# quickstart.sh — the README's sequence, as a user runs it: tools/quickstart.sh
# (configure, build the target kiln_dist, run the shipped programs), then the
# README's install line, `cmake --install BUILD --prefix P`, then every check of
# tests/install/run.sh on that prefix (which runs the install line itself).
# Before, the quick start built only kiln and kiln-examples and the install
# failed on the missing libkiln.so.0.1.0.
#
# A full Release build in a fresh tree: ~10 minutes on 2 idle cores, ~1.5 GB,
# removed at the end. Not part of the default ctest run (cmake
# -DKILN_TEST_QUICKSTART=ON registers it as install/quickstart).
#
# Usage: quickstart.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(mktemp -d /tmp/kiln-quickstart.XXXXXX)
trap 'rm -rf "$build"' EXIT
KILN_BUILD_DIR="$build" bash "$src/tools/quickstart.sh"
bash "$src/tests/install/run.sh" "$build" "$src"
echo "quickstart + install: ok"
