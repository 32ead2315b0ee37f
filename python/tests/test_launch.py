"""kiln.load and kernel[grid](...): the examples run Triton-style on CPU tensors (the
interpreter) and CUDA tensors (when there is a GPU), compared with torch; consts become -D values
compiled once per combination; the errors name what is wrong."""
import os

import pytest
import torch

import kiln
from conftest import DEVICES, rand

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("block", [128, 1024])
def test_vec_add(device, block):
    mod = kiln.load(os.path.join(EXAMPLES, "vec_add.tile"))
    n = 3001                                               # not a multiple of the block
    x, y = rand(n, dtype=torch.float32, device=device, seed=1), rand(n, dtype=torch.float32, device=device, seed=2)
    z = torch.full((n + 5,), float("nan"), device=device)  # the 5 past n must stay NaN
    mod.vec_add[lambda meta: (cdiv(n, meta["BLOCK"]),)](x, y, z, n, BLOCK=block)
    if device == "cuda":
        torch.cuda.synchronize()
    assert torch.equal(z[:n], x + y)
    assert torch.isnan(z[n:]).all()


def test_softmax(device):
    mod = kiln.load(os.path.join(EXAMPLES, "softmax.tile"))
    rows, cols = 7, 300
    x = rand(rows, cols + 20, dtype=torch.float32, device=device, seed=3, scale=5.0)[:, :cols]   # strided rows
    y = torch.full((rows, cols), float("nan"), device=device)
    mod.softmax[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=512)
    if device == "cuda":
        torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x.double(), -1).float(), atol=1e-6, rtol=1e-5)


def test_consts_compile_once_per_combination():
    mod = kiln.load(os.path.join(EXAMPLES, "vec_add.tile"))
    x = torch.ones(100)
    for block in (64, 64, 128, 64):
        mod.vec_add[(cdiv(100, block),)](x, x, x, 100, BLOCK=block)
    assert sorted(dict(k)["BLOCK"] for k in mod.vec_add._sigs) == ["128", "64"]
    assert torch.equal(x, torch.full((100,), 16.0))   # x += x, four times (in place)


def test_source_string_and_errors():
    src = ("kernel scale(X: *f32, Y: *f32, n: i32, a: f32, const BLOCK: i32 = 64) {\n"
           "    let o = program_id(0) * BLOCK + arange(BLOCK);\n"
           "    store(Y + o, load(X + o, mask = o < n, other = 0) * a, mask = o < n);\n}\n")
    mod = kiln.load(src)
    x, y = rand(70, dtype=torch.float32, seed=4), torch.empty(70)
    mod.scale[(2,)](x, y, 70, 2.5)
    assert torch.equal(y, x * 2.5)
    with pytest.raises(TypeError, match="takes 4 runtime arguments"):
        mod.scale[(2,)](x, y, 70)
    with pytest.raises(TypeError, match="argument 'n'"):
        mod.scale[(2,)](x, y, 70.5, 1.0)
    with pytest.raises(TypeError, match="argument 'X'"):
        mod.scale[(2,)](3, y, 70, 1.0)
    with pytest.raises(TypeError, match="argument 'X': .*32-bit"):
        mod.scale[(2,)](x.half(), y, 70, 1.0)
    with pytest.raises(kiln.CompileError, match=r"<string>:\d+:\d+: error"):
        kiln.load("kernel k(X: *f32) {\n    store(X, nope);\n}\n").k[(1,)](x)
    with pytest.raises(FileNotFoundError):
        kiln.load("no_such_file.tile")
