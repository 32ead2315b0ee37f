"""Learnable params: a variant's `param X: *f32 differentiable;` tensor gets X.grad from
kiln.attention's backward. The shipped T5 bucketed bias (relative_bias, bias[h, bucket(j - i)])
and ALiBi with learnable slopes (alibi), against torch autograd on the materialised float64
scores (the same bias built in torch), on the CPU interpreter (and the GPU when there is one):
lengths no multiple of the tiles, GQA, causal and not, both dQ algorithms; two runs give the
same bits; a param that does not require grad gets none.
"""
import math

import pytest
import torch

import kiln
from conftest import close, rand, ref_attention

NB, MAXDIST = 32, 128   # relative_bias.tile's NUM_BUCKETS, MAX_DISTANCE


def t5_buckets(sq, sk, device):
    """relative_bias.tile's t5_bucket(q_idx, kv_idx) for every pair, in torch (f32 log2 as the tile)."""
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    half, exact = NB // 2, NB // 4
    rel = j - i
    n = rel.abs()
    big = exact + (torch.log2(n.clamp(min=1).float() * (1.0 / exact)) *
                   ((half - exact) / math.log2(MAXDIST / exact))).to(torch.int64)
    return torch.where(rel > 0, half, 0) + torch.where(n < exact, n, big.clamp(max=half - 1))


def qkv(b, hq, hkv, sq, sk, d, dtype, device, seed):
    return (rand(b, hq, sq, d, dtype=dtype, device=device, seed=seed).requires_grad_(),
            rand(b, hkv, sk, d, dtype=dtype, device=device, seed=seed + 1).requires_grad_(),
            rand(b, hkv, sk, d, dtype=dtype, device=device, seed=seed + 2).requires_grad_())


def run(kind, theta, q, k, v, dout, causal, deterministic):
    """kiln's (out, theta.grad) for a fresh leaf copy of theta."""
    t = theta.detach().clone().requires_grad_()
    var = kiln.Variant("relative_bias", rel_bias=t) if kind == "t5" else kiln.Variant("alibi", alibi_slopes=t)
    out = kiln.attention(q, k, v, causal=causal, variant=var, deterministic=deterministic)
    out.backward(dout)
    return out, t.grad


def reference(kind, theta, q, k, v, dout, causal):
    """float64 autograd through the materialised scores."""
    t = theta.detach().double().requires_grad_()
    sq, sk = q.shape[2], k.shape[2]
    if kind == "t5":
        bias = t[:, t5_buckets(sq, sk, q.device)]                        # [h, sq, sk]
    else:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        bias = -t[:, None, None] * (i - j).abs().double()
    out = ref_attention(q.detach(), k.detach(), v.detach(), causal=causal, score_mod=lambda s: s + bias)
    out.backward(dout.double())
    return out, t.grad


CASES = [("t5", torch.float16, (2, 4, 2, 37, 45, 32), False, True),
         ("t5", torch.bfloat16, (1, 2, 2, 29, 70, 64), True, False),
         ("alibi", torch.float16, (2, 4, 2, 45, 37, 32), True, True),
         ("alibi", torch.bfloat16, (1, 2, 1, 53, 29, 64), False, False)]


@pytest.mark.parametrize("kind,dtype,shape,causal,deterministic", CASES)
def test_param_grad_matches_autograd(device, kind, dtype, shape, causal, deterministic):
    b, hq, hkv, sq, sk, d = shape
    q, k, v = qkv(b, hq, hkv, sq, sk, d, dtype, device, seed=300)
    g = torch.Generator().manual_seed(301)
    if kind == "t5":
        theta = (torch.rand(hq, NB, generator=g) * 2 - 1).to(device)
    else:
        theta = (0.02 + 0.28 * torch.rand(hq, generator=g)).to(device)
    dout = rand(b, hq, sq, d, dtype=dtype, device=device, seed=302)
    out, grad = run(kind, theta, q, k, v, dout, causal, deterministic)
    ref_out, ref_grad = reference(kind, theta, q, k, v, dout, causal)
    assert grad is not None and grad.shape == theta.shape and grad.dtype == torch.float32
    assert ref_grad.abs().max() > 1e-2, "the reference gradient is ~0: the test cannot fail"
    # the backward reads O rounded to the dtype: its error scales with the dtype's epsilon
    eps = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    close(grad, ref_grad, 8 * eps * ref_grad.abs().max().item() + 1e-4)
    # the same bits again
    q.grad = k.grad = v.grad = None
    _, again = run(kind, theta, q, k, v, dout, causal, deterministic)
    assert torch.equal(grad, again), "two runs gave different gradients"


def test_no_grad_wanted_no_grad_computed(device):
    """A differentiable param that does not require grad: the plain backward, no .grad."""
    q, k, v = qkv(1, 2, 2, 20, 30, 32, torch.float16, device, seed=310)
    slopes = torch.tensor([0.1, 0.2], device=device)
    out = kiln.attention(q, k, v, variant=kiln.Variant("alibi", alibi_slopes=slopes))
    out.backward(rand(*out.shape, device=device, seed=311))
    assert slopes.grad is None and q.grad is not None


def test_differentiable_param_must_be_contiguous():
    bias = torch.zeros(32, 4).t()
    with pytest.raises(ValueError, match="contiguous"):
        kiln.Variant("relative_bias", rel_bias=bias)


def test_opcheck_bwd_params(device):
    q, k, v = (t.detach() for t in qkv(1, 2, 2, 20, 30, 32, torch.float16, device, seed=320))
    bias = torch.rand(2, NB, device=device)
    var = kiln.Variant("relative_bias", rel_bias=bias)
    out, lse = torch.ops.kiln.fwd(q, k, v, None, None, 0, 0, False, 0.125, False, var.id, [bias], None, [], [])
    dout = rand(*out.shape, device=device, seed=321)
    torch.library.opcheck(torch.ops.kiln.bwd_params.default,
                          (dout, q, k, v, out, lse, None, None, 0, 0, False, 0.125, True, var.id, [bias], None, [],
                           []),
                          test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))
