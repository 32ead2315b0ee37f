#!/usr/bin/env bash
# pyenv.sh — the Python environment the package's pytest suite (python/tests) runs in: a venv at
# ${KILN_PY_CACHE:-$HOME/.cache/kiln/venv} with torch, numpy and pytest from PyPI, created and
# filled ONCE per machine (torch is large: later runs only check that the imports work) under a
# lock, so two test runs never install at the same time. Prints the venv's python on stdout
# (the last line); everything else goes to stderr.
#
#   py=$(bash tools/pyenv.sh) && KILN_LIBRARY=build/libkiln.so "$py" -m pytest python/tests
set -euo pipefail
venv="${KILN_PY_CACHE:-$HOME/.cache/kiln/venv}"
python="${PYTHON:-python3}"
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c "import torch, numpy, pytest" >/dev/null 2>&1; then
  echo "pyenv.sh: installing torch, numpy and pytest into $venv (once per machine)" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet torch numpy pytest >&2
  "$venv/bin/python" -c "import torch, numpy, pytest" >&2
fi
echo "$venv/bin/python"
