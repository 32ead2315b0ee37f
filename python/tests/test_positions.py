"""Whole-sequence positions (kiln.attention's q_pos_offset / kv_pos_offset): a call on a shard of
the queries against a shard of the keys computes that block of the whole problem, causal and a
sliding window judged in positions, against float64 (forward, LSE and autograd gradients)."""
import pytest
import torch

import kiln
from conftest import close, rand, ref_attention

N, HQ, HKV, D, WL = 150, 4, 2, 32, 37

SHARDS = [  # qa, lq, ka, lk, causal, window
    (40, 70, 0, N, True, False),     # the full call's rows
    (75, 75, 50, 75, True, False),   # the diagonal crosses the shard unaligned: a mask
    (0, 50, 100, 50, True, False),   # every key hidden
    (90, 60, 30, 80, False, False),
    (100, 50, 40, 80, True, True),   # a window in positions
]


def _mask(qa, lq, ka, lk, causal, window):
    i = torch.arange(qa, qa + lq)[:, None]
    j = torch.arange(ka, ka + lk)[None, :]
    vis = torch.ones(lq, lk, dtype=torch.bool)
    if causal:
        vis &= j <= i
    if window:
        vis &= j >= i - WL
    return vis


@pytest.mark.parametrize("shard", SHARDS)
def test_shard_matches_float64(device, shard):
    qa, lq, ka, lk, causal, window = shard
    q = rand(1, HQ, N, D, device=device, seed=1)[:, :, qa:qa + lq].requires_grad_()
    k = rand(1, HKV, N, D, device=device, seed=2)[:, :, ka:ka + lk].requires_grad_()
    v = rand(1, HKV, N, D, device=device, seed=3)[:, :, ka:ka + lk].requires_grad_()
    var = kiln.Variant("sliding_window", window_left=WL, window_right=-1) if window else None
    out, lse = kiln.attention(q, k, v, causal=causal, variant=var, return_lse=True, q_pos_offset=qa,
                              kv_pos_offset=ka)
    mask = _mask(qa, lq, ka, lk, causal, window).to(device)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = ref_attention(q64, k64, v64, mask=mask)
    close(out, ref, 2e-3)
    s = torch.einsum("bhid,bhjd->bhij", q64, k64.repeat_interleave(HQ // HKV, 1)) / D ** 0.5
    ref_lse = torch.logsumexp(s.masked_fill(~mask, float("-inf")), dim=-1)
    empty = ~mask.any(-1).expand_as(ref_lse)
    assert torch.isneginf(lse[empty]).all()
    if (~empty).any():
        close(lse[~empty], ref_lse[~empty], 1e-4 * (1 + ref_lse[~empty].abs().max().item()))
    dout = rand(*out.shape, device=device, seed=4)
    out.backward(dout)
    ref.backward(dout.double())
    for name, got, want in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        close(got, want, 1e-2 * want.abs().max().item() + 1e-3)


def test_positions_errors():
    q = rand(1, 2, 16, 32)
    with pytest.raises(ValueError, match="q_pos_offset"):
        kiln.attention(q, q, q, q_pos_offset=-1)
    with pytest.raises(ValueError, match="kv_pos_offset"):
        kiln.attention(q, q, q, kv_pos_offset=2 ** 31)
