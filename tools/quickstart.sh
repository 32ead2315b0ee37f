#!/usr/bin/env bash
# The README's first command: install what is missing, build, and run the main job —
# compile the shipped programs (the examples; FlashAttention forward, backward and a
# paged decode step) and run them (GPU if there is one, else the CPU interpreter),
# printing what they computed and their error against a float64 reference.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target kiln_cli kiln-examples
./build/kiln --version
./build/kiln-examples
