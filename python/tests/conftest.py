"""Shared helpers of the kiln pytest suite: the devices to run on, random inputs, and float64
references (plain attention in torch, on float64 copies of the very values the kernels read).

Run from a source checkout (the package finds build*/libkiln.so) or with KILN_LIBRARY set;
tools/pyenv.sh makes the environment and tools/test.sh runs the suite.
"""
import math
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))   # the checkout's package

HAS_CUDA = torch.cuda.is_available()
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def rand(*shape, dtype=torch.float16, device="cpu", seed=0, scale=1.0):
    """Uniform in [-scale, scale) (never zeros), from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * scale).to(dtype).to(device)


def ref_attention(q, k, v, causal=False, scale=None, score_mod=None, mask=None):
    """Plain attention in float64 on [b, h, s, d] (GQA by repeating K/V heads); causal bottom-right
    aligned; score_mod(s, b, h, i, j) on the scaled scores; mask [.., sq, sk] bool (True: visible).
    Rows that see no key give 0. Differentiable (for autograd references)."""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    sq, sk = q.shape[2], k.shape[2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
    if score_mod is not None:
        s = score_mod(s)
    vis = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        vis = vis.tril(sk - sq)
    if mask is not None:
        vis = vis & mask
    s = s.masked_fill(~vis, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return torch.einsum("bhij,bhjd->bhid", p, v)


def close(got, want, tol):
    err = (got.double() - want.double()).abs().max().item()
    assert err <= tol, f"max |got - want| = {err:.3g} > {tol}"
    return err
