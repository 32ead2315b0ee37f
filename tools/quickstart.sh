#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job —
# compile the shipped programs (the examples; FlashAttention forward, backward and a
# paged decode step) and run them (GPU if there is one, else the CPU interpreter),
# printing what they computed and their error against a float64 reference.
# It builds the target kiln_dist: kiln, kiln-examples, libkiln.a and libkiln.so,
# all that the README's next line, `cmake --install build --prefix P`, installs
# (tests/install/quickstart.sh runs the two in a row).
# KILN_BUILD_DIR: the build tree (default build, which the README's install line names).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${KILN_BUILD_DIR:-build}
bash tools/deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target kiln_dist
"$build/kiln" --version
"$build/kiln-examples"
