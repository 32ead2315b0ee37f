"""kiln.distributed on the gloo backend: 2 and 4 processes (torch.multiprocessing, forked) on CPU
tensors through the interpreter, small shapes (the CI machine has 2 cores). Each rank runs
context-parallel attention on its shard; its output shard, and after backward its gradient
shards, are compared with float64 attention of the whole sequence (and rank 0 compares the
gathered output with a single-process kiln.attention call). Cases: causal and not (ring, zigzag),
contiguous layout, GQA, a causal sliding window (global positions), the all-gather schedule, and a
packed (varlen) batch, causal."""
import math
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))

HQ, HKV, D, WL = 2, 1, 32, 29

CASES = [  # name, causal, window, layout, mode
    ("ring causal zigzag", True, False, "zigzag", "ring"),
    ("ring full zigzag", False, False, "zigzag", "ring"),
    ("ring causal contiguous", True, False, "contiguous", "ring"),
    ("ring causal window", True, True, "zigzag", "ring"),
    ("allgather causal window", True, True, "zigzag", "allgather"),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ref(q, k, v, causal, window):
    """float64 attention of the whole sequence, causal / window in positions; differentiable."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    n = q.shape[2]
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    vis = torch.ones(n, n, dtype=torch.bool)
    if causal:
        vis &= j <= i
    if window:
        vis &= j >= i - WL
    p = torch.softmax(s.masked_fill(~vis, float("-inf")), -1)
    return torch.einsum("bhij,bhjd->bhid", p, v)


def _worker(rank, world, port, n):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        import kiln
        import kiln.distributed as kd
        from conftest import rand
        q = rand(1, HQ, n, D, seed=1)
        k, v = rand(1, HKV, n, D, seed=2), rand(1, HKV, n, D, seed=3)
        dout = rand(1, HQ, n, D, seed=4)
        for name, causal, window, layout, mode in CASES:
            var = kiln.Variant("sliding_window", window_left=WL, window_right=-1) if window else None
            ql, kl, vl = (kd.shard(t, layout=layout).requires_grad_() for t in (q, k, v))
            out = kd.attention(ql, kl, vl, causal=causal, variant=var, layout=layout, mode=mode)
            out.backward(kd.shard(dout, layout=layout))
            q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
            ref = _ref(q64, k64, v64, causal, window)
            ref.backward(dout.double())
            for what, got, want in (("out", out, ref), ("dq", ql.grad, q64.grad), ("dk", kl.grad, k64.grad),
                                    ("dv", vl.grad, v64.grad)):
                want = kd.shard(want.detach(), layout=layout)
                err = (got.double() - want).abs().max().item()
                tol = 2e-3 if what == "out" else 1e-2 * want.abs().max().item() + 1e-3
                assert err <= tol, f"{name}, {world} ranks, rank {rank}: max |{what} - ref| = {err:.3g} > {tol:.3g}"
            if rank == 0 and name == "ring causal zigzag":   # the same as one process's kiln.attention
                single = kiln.attention(q, k, v, causal=True)
                whole = kd.unshard(out.detach(), layout=layout)
                assert (whole.double() - single.double()).abs().max().item() <= 2e-3
            elif name == "ring causal zigzag":
                kd.unshard(out.detach(), layout=layout)   # every rank takes part in the all_gather
        _varlen_case(rank, world, kd, rand)
    finally:
        dist.destroy_process_group()


def _varlen_case(rank, world, kd, rand):
    """A packed batch of three sequences (chunks of 5, 12 and 3 tokens), causal, GQA."""
    lens = [2 * world * c for c in (5, 12, 3)]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    t = cu[-1].item()
    q, k, v = rand(t, HQ, D, seed=5), rand(t, HKV, D, seed=6), rand(t, HKV, D, seed=7)
    dout = rand(t, HQ, D, seed=8)
    ql, kl, vl = (kd.shard_varlen(x, cu).requires_grad_() for x in (q, k, v))
    out = kd.attention_varlen(ql, kl, vl, cu, causal=True)
    out.backward(kd.shard_varlen(dout, cu))
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    ref = torch.cat([_ref(q64[a:b].transpose(0, 1)[None], k64[a:b].transpose(0, 1)[None],
                          v64[a:b].transpose(0, 1)[None], True, False)[0].transpose(0, 1)
                     for a, b in zip(cu.tolist(), cu.tolist()[1:])])
    ref.backward(dout.double())
    for what, got, want in (("out", out, ref), ("dq", ql.grad, q64.grad), ("dk", kl.grad, k64.grad),
                            ("dv", vl.grad, v64.grad)):
        want = kd.shard_varlen(want.detach(), cu)
        err = (got.double() - want).abs().max().item()
        tol = 2e-3 if what == "out" else 1e-2 * want.abs().max().item() + 1e-3
        assert err <= tol, f"varlen, {world} ranks, rank {rank}: max |{what} - ref| = {err:.3g} > {tol:.3g}"
    whole = kd.unshard_varlen(out.detach(), cu)
    assert (whole.double() - ref.detach()).abs().max().item() <= 2e-3


@pytest.mark.parametrize("world", [2, 4])
def test_context_parallel_gloo(world):
    n = 2 * world * 24   # zigzag: 2 * world chunks of 24 tokens (no multiple of the 64-row tiles)
    # fork: the children inherit the imported torch and kiln (spawn re-imports them in each process,
    # most of a minute on 2 cores); the workers use one thread each
    mp.start_processes(_worker, args=(world, _free_port(), n), nprocs=world, join=True, start_method="fork")


def test_plan_skips_what_causal_hides():
    from kiln.distributed import _chunks, _plan
    world = 4
    for rank in range(world):
        qcs = _chunks("zigzag", rank, world, 64)
        for src in range(world):
            calls = _plan(qcs, _chunks("zigzag", src, world, 64), True, False, src == rank)
            assert len(calls) == 1   # zigzag without a variant: one call a step
            q_lo, q_hi, k_lo, k_hi, causal, pos = calls[0]
            work = (q_hi - q_lo) * (k_hi - k_lo) // (2 if causal else 1)
            assert work == 32 * 64   # every step the same work: the balance zigzag is for


def test_plan_skips_what_a_window_hides():
    from kiln.distributed import _chunks, _plan
    qcs, kcs = _chunks("zigzag", 3, 4, 64), _chunks("zigzag", 0, 4, 64)   # q at 96.., 128..; k at 0.., 224..
    assert len(_plan(qcs, kcs, True, True, False)) == 2          # a variant: each visible pair a call
    assert _plan(qcs, kcs, True, True, False, (8, -1)) == []     # the window hides keys 0..31 from 96..


def test_use_ring_rule():
    from kiln.distributed import ALLGATHER_MAX_TOKENS, use_ring
    assert not use_ring(ALLGATHER_MAX_TOKENS - 1)
    assert use_ring(ALLGATHER_MAX_TOKENS)
    assert use_ring(16, "ring") and not use_ring(1 << 20, "allgather")
    with pytest.raises(ValueError):
        use_ring(16, "bogus")
