"""python/examples/train_gpt.py keeps working: two CPU steps of a one-layer model with
kiln.attention and with SDPA (the same seed and data) give the same losses within bf16 noise,
plain and with the sliding-window variant."""
import os
import subprocess
import sys

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_gpt.py")


@pytest.mark.parametrize("window", ["0", "8"])
def test_train_gpt_smoke(window):
    out = subprocess.run([sys.executable, EXAMPLE, "--device", "cpu", "--steps", "3", "--warmup", "1", "--log", "1",
                          "--layers", "1", "--seq", "64", "--period", "16", "--dim", "64", "--heads", "2",
                          "--batch", "2", "--vocab", "64", "--impl", "kiln", "sdpa", "--window", window],
                         capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line.split() for line in out.stdout.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == 3
    for _, kiln_loss, sdpa_loss in rows:
        assert abs(float(kiln_loss) - float(sdpa_loss)) < 0.01, out.stdout
