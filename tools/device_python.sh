#!/usr/bin/env bash
# On the GPU machine, from the repository root, with .carry/bundle.tar.xz (tools/device_pack.sh)
# carried along: the Python package's checks on CUDA tensors. The machine's python3 holds torch
# (no venv there: nothing can be installed). Runs, each under its own time limit:
#   1. python/tests (pytest): the CUDA cases (forward, backward, decode on CUDA tensors,
#      CUDA-graph capture and replay, torch.compile reduce-overhead) beside the CPU ones;
#   2. python/examples/train_gpt.py: a small GPT with kiln.attention, SDPA and FlexAttention
#      side by side (loss curves, tokens/s), plain causal and with the sliding_window variant;
#   3. python/examples/bench_host.py: host cost per eager call against SDPA, and under a CUDA graph.
# Full logs go to $OUT (pytest.log, train.log, train_window.log, host.log); the tails print last.
set -uo pipefail
. "$(dirname "$0")/device_env.sh"
export KILN_LIBRARY=$kiln/lib/libkiln_all.so PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
steps=${STEPS:-300}
timeout "${PYTEST_S:-240}" python3 -m pytest -q -p no:cacheprovider -rs python/tests >"$out/pytest.log" 2>&1
echo "pytest rc=$?"
timeout "${TRAIN_S:-150}" python3 python/examples/train_gpt.py --steps "$steps" >"$out/train.log" 2>&1
echo "train rc=$?"
timeout "${TRAIN_S:-150}" python3 python/examples/train_gpt.py --steps "$steps" --window 256 >"$out/train_window.log" 2>&1
echo "train --window rc=$?"
timeout 120 python3 python/examples/bench_host.py >"$out/host.log" 2>&1
echo "bench_host rc=$?"
for f in pytest train train_window host; do echo "=========== $f"; tail -n 25 "$out/$f.log"; done
