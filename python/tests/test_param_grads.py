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


def run(kind, theta, q, k, v, dout, causal, deterministic, atomic=False):
    """kiln's (out, theta.grad) for a fresh leaf copy of theta."""
    t = theta.detach().clone().requires_grad_()
    var = kiln.Variant("relative_bias", rel_bias=t) if kind == "t5" else kiln.Variant("alibi", alibi_slopes=t)
    var.param_grads_atomic = atomic
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
@pytest.mark.parametrize("atomic", [False, True])
def test_param_grad_matches_autograd(device, kind, dtype, shape, causal, deterministic, atomic):
    b, hq, hkv, sq, sk, d = shape
    q, k, v = qkv(b, hq, hkv, sq, sk, d, dtype, device, seed=300)
    g = torch.Generator().manual_seed(301)
    if kind == "t5":
        theta = (torch.rand(hq, NB, generator=g) * 2 - 1).to(device)
    else:
        theta = (0.02 + 0.28 * torch.rand(hq, generator=g)).to(device)
    dout = rand(b, hq, sq, d, dtype=dtype, device=device, seed=302)
    out, grad = run(kind, theta, q, k, v, dout, causal, deterministic, atomic)
    ref_out, ref_grad = reference(kind, theta, q, k, v, dout, causal)
    assert grad is not None and grad.shape == theta.shape and grad.dtype == torch.float32
    assert ref_grad.abs().max() > 1e-2, "the reference gradient is ~0: the test cannot fail"
    # the backward reads O rounded to the dtype: its error scales with the dtype's epsilon
    eps = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    close(grad, ref_grad, 8 * eps * ref_grad.abs().max().item() + 1e-4)
    if atomic:   # the atomic sums' bits may vary on a GPU
        return
    q.grad = k.grad = v.grad = None   # the same bits again
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


def test_varlen_alibi_slopes_grad(device):
    """flash_attn_varlen_func with learnable alibi_slopes: the slopes' gradient summed over packed
    sequences (each sees its own indices), against float64 autograd per sequence."""
    lens_q, lens_k = [37, 1, 70], [50, 20, 70]
    hq, hkv, d = 4, 2, 32
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=device)
    q = rand(sum(lens_q), hq, d, device=device, seed=330).requires_grad_()
    k = rand(sum(lens_k), hkv, d, device=device, seed=331).requires_grad_()
    v = rand(sum(lens_k), hkv, d, device=device, seed=332).requires_grad_()
    slopes = (0.05 + 0.2 * torch.rand(hq, generator=torch.Generator().manual_seed(333))).to(device).requires_grad_()
    out = kiln.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True,
                                      alibi_slopes=slopes, deterministic=True)
    dout = rand(*out.shape, device=device, seed=334)
    out.backward(dout)
    s64 = slopes.detach().double().requires_grad_()
    for i in range(3):
        a, e, ka, ke = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        qs, ks, vs = (t.detach()[x:y].transpose(0, 1)[None] for t, x, y in ((q, a, e), (k, ka, ke), (v, ka, ke)))
        ii = torch.arange(e - a, device=device)[:, None]
        jj = torch.arange(ke - ka, device=device)[None, :]
        bias = -s64[:, None, None] * (ii - jj).abs().double()
        ref = ref_attention(qs, ks, vs, causal=True, score_mod=lambda s, bias=bias: s + bias)
        ref.backward(dout[a:e].transpose(0, 1)[None].double())
    assert slopes.grad is not None
    close(slopes.grad, s64.grad, 8 * 2.0 ** -11 * s64.grad.abs().max().item() + 1e-4)


T5_WINDOW = """
import "attention";
import "variants/relative_bias" as t5;
import "variants/sliding_window" as win;
fn score_mod(s, b, h, q_idx, kv_idx) { return t5_score_mod(s, b, h, q_idx, kv_idx); }
fn mask_mod(b, h, q_idx, kv_idx) { return win_mask_mod(b, h, q_idx, kv_idx); }
fn kv_start(start_m, block_m, seqlen_q, seqlen_k) { return win_kv_start(start_m, block_m, seqlen_q, seqlen_k); }
"""


def test_block_mask_t5_in_a_window(device):
    """The T5 table's gradient through the block-mask kernels (a composed variant: T5 bias inside
    a sliding window; the table imported under an alias stays differentiable)."""
    b, hq, n, d, left = 1, 2, 150, 32, 40
    q, k, v = qkv(b, hq, hq, n, n, d, torch.float16, device, seed=340)
    table = (torch.rand(hq, NB, generator=torch.Generator().manual_seed(341)) * 2 - 1).to(device).requires_grad_()
    var = kiln.Variant(T5_WINDOW, rel_bias=table, window_left=left, window_right=0)
    bm = kiln.create_block_mask(var, None, None, n, n, device=device, BLOCK_SIZE=32)
    out = kiln.attention(q, k, v, variant=var, block_mask=bm)
    dout = rand(*out.shape, device=device, seed=342)
    out.backward(dout)
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    t64 = table.detach().double().requires_grad_()
    bias = t64[:, t5_buckets(n, n, device)]
    ref = ref_attention(q.detach(), k.detach(), v.detach(), score_mod=lambda s: s + bias,
                        mask=(j <= i) & (j >= i - left))
    ref.backward(dout.double())
    assert t64.grad.abs().max() > 1e-2
    close(table.grad, t64.grad, 8 * 2.0 ** -11 * t64.grad.abs().max().item() + 1e-4)
