"""kiln.distributed on the gloo backend: 2 and 4 processes (torch.multiprocessing, forked) on CPU
tensors through the interpreter, small shapes (the CI machine has 2 cores). Each rank runs
context-parallel attention on its shard; its output shard, and after backward its gradient
shards, are compared with float64 attention of the whole sequence (and rank 0 compares the
gathered output with a single-process kiln.attention call). Cases: causal and not (ring, zigzag),
contiguous layout, GQA, a causal sliding window (global positions), a two-sided window without
causal, a variant whose score_mod and mask_mod read absolute positions (causal and not), the
all-gather schedule, and packed (varlen) batches: causal, and with those variants (positions in
each sequence). Block masks of the whole sequence (a document mask, causal and not,
and a sliding-window mask; ring and all-gather): the outputs and gradients as above, and the ring
steps each rank skips equal to those the dense mask hides entirely."""
import math
import os
import socket
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))

HQ, HKV, D, WL, WR = 2, 1, 32, 29, 7

# A variant whose score_mod and mask_mod read absolute positions (a shift of either index changes
# both), so hooks that saw local or wrong positions fail the comparison.
CUSTOM = """import "attention";
param bias: f32;
fn score_mod(s, b, h, q_idx, kv_idx) { return s + bias * ((q_idx + 2 * kv_idx) % 7).to(f32) - bias * h.to(f32); }
fn mask_mod(b, h, q_idx, kv_idx) { return kv_idx % 5 != 3 || kv_idx == q_idx; }
"""
BIAS = 0.25

CASES = [  # name, causal, variant kind (_variant), layout, mode
    ("ring causal zigzag", True, None, "zigzag", "ring"),
    ("ring full zigzag", False, None, "zigzag", "ring"),
    ("ring causal contiguous", True, None, "contiguous", "ring"),
    ("ring causal window", True, "window", "zigzag", "ring"),
    ("allgather causal window", True, "window", "zigzag", "allgather"),
    ("ring full two-sided window", False, "window2", "zigzag", "ring"),
    ("ring causal custom", True, "custom", "zigzag", "ring"),
    ("ring full custom contiguous", False, "custom", "contiguous", "ring"),
]
SINGLE = ("ring causal zigzag", "ring causal custom")


def _variant(kind, kiln):
    """(kiln.Variant or None, dense(n) -> (visibility [n, n], additive bias [HQ, n, n]) in positions)."""
    ij = (lambda n: (torch.arange(n)[:, None], torch.arange(n)[None, :]))
    if kind is None:
        return None, lambda n: (torch.ones(n, n, dtype=torch.bool), 0.0)
    if kind in ("window", "window2"):
        wr = WR if kind == "window2" else -1
        var = kiln.Variant("sliding_window", window_left=WL, window_right=wr)

        def dense(n):
            i, j = ij(n)
            return (j >= i - WL) & ((j <= i + wr) if wr >= 0 else True), 0.0
        return var, dense
    assert kind == "custom"

    def dense(n):
        i, j = ij(n)
        h = torch.arange(HQ, dtype=torch.float64)[:, None, None]
        return (j % 5 != 3) | (j == i), BIAS * ((i + 2 * j) % 7).double() - BIAS * h
    return kiln.Variant(CUSTOM, bias=BIAS), dense


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ref(q, k, v, causal=False, vis=None, bias=0.0):
    """float64 attention of the whole sequence [b, h, n, d]: causal in positions, the dense
    visibility vis [n, n] and an additive bias on the scaled scores; rows that see no key give 0;
    differentiable."""
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    n = q.shape[2]
    s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1]) + bias
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    vis = torch.ones(n, n, dtype=torch.bool) if vis is None else vis
    if causal:
        vis = vis & (j <= i)
    p = torch.softmax(s.masked_fill(~vis, float("-inf")), -1).nan_to_num(0.0)
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
        for name, causal, kind, layout, mode in CASES:
            var, dense = _variant(kind, kiln)
            ql, kl, vl = (kd.shard(t, layout=layout).requires_grad_() for t in (q, k, v))
            out = kd.attention(ql, kl, vl, causal=causal, variant=var, layout=layout, mode=mode)
            out.backward(kd.shard(dout, layout=layout))
            q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
            vis, bias = dense(n)
            ref = _ref(q64, k64, v64, causal, vis, bias)
            ref.backward(dout.double())
            _check(f"{name}, {world} ranks, rank {rank}", lambda x: kd.shard(x, layout=layout),
                   ((out, ref), (ql.grad, q64.grad), (kl.grad, k64.grad), (vl.grad, v64.grad)))
            if name in SINGLE:   # the same as one process's kiln.attention (every rank joins the all_gather)
                whole = kd.unshard(out.detach(), layout=layout)
                if rank == 0:
                    single = kiln.attention(q, k, v, causal=causal, variant=var)
                    assert (whole.double() - single.double()).abs().max().item() <= 2e-3, name
        for causal, kind in VARLEN_CASES:
            _varlen_case(rank, world, kiln, kd, rand, causal, kind)
    finally:
        dist.destroy_process_group()


VARLEN_CASES = [(True, None), (True, "custom"), (False, "window2"), (True, "window")]


def _varlen_case(rank, world, kiln, kd, rand, causal, kind):
    """A packed batch of three sequences (chunks of 5, 12 and 3 tokens), GQA; a variant's hooks
    see the positions in each sequence."""
    lens = [2 * world * c for c in (5, 12, 3)]
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    t = cu[-1].item()
    q, k, v = rand(t, HQ, D, seed=5), rand(t, HKV, D, seed=6), rand(t, HKV, D, seed=7)
    dout = rand(t, HQ, D, seed=8)
    var, dense = _variant(kind, kiln)
    ql, kl, vl = (kd.shard_varlen(x, cu).requires_grad_() for x in (q, k, v))
    out = kd.attention_varlen(ql, kl, vl, cu, causal=causal, variant=var)
    out.backward(kd.shard_varlen(dout, cu))
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    seq = (lambda x, a, b: x[a:b].transpose(0, 1)[None])
    ref = torch.cat([_ref(seq(q64, a, b), seq(k64, a, b), seq(v64, a, b), causal, *dense(b - a))[0].transpose(0, 1)
                     for a, b in zip(cu.tolist(), cu.tolist()[1:])])
    ref.backward(dout.double())
    _check(f"varlen causal={causal} {kind}, {world} ranks, rank {rank}", lambda x: kd.shard_varlen(x, cu),
           ((out, ref), (ql.grad, q64.grad), (kl.grad, k64.grad), (vl.grad, v64.grad)))
    whole = kd.unshard_varlen(out.detach(), cu)
    assert (whole.double() - ref.detach()).abs().max().item() <= 2e-3


def _check(where, shard, pairs):
    """Each (got shard, whole-sequence float64 reference) pair: out, dq, dk, dv."""
    for what, (got, want) in zip(("out", "dq", "dk", "dv"), pairs):
        want = shard(want.detach())
        err = (got.double() - want).abs().max().item()
        tol = 2e-3 if what == "out" else 1e-2 * want.abs().max().item() + 1e-3
        assert err <= tol, f"{where}: max |{what} - ref| = {err:.3g} > {tol:.3g}"


# ---------------- block masks of the whole sequence ----------------

BM_CHUNK, BM_BLOCK, BM_WL = 32, 16, 20
# documents (lengths) of the block-mask cases' whole sequence, 2W chunks of 32: boundaries inside
# chunks and blocks (partial blocks) and long documents that leave whole chunk pairs hidden
BM_DOCS = {2: [24, 8, 64, 32], 4: [40, 24, 64, 80, 48]}


def _bm_cases(world, kiln, n):
    """(name, variant, causal, dense visibility [n, n], layout, mode) of the block-mask cases."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    docs = torch.repeat_interleave(torch.arange(len(BM_DOCS[world]), dtype=torch.int32), torch.tensor(BM_DOCS[world]))
    doc = kiln.Variant("document", doc_ids=docs[None].contiguous(), doc_stride=n, doc_len=n)
    win = kiln.Variant("sliding_window", window_left=BM_WL, window_right=0)
    same = docs[:, None] == docs[None, :]
    return [("doc causal ring", doc, True, same & (j <= i), "zigzag", "ring"),
            ("doc full ring", doc, False, same, "zigzag", "ring"),
            ("doc causal allgather", doc, True, same & (j <= i), "zigzag", "allgather"),
            ("window ring contiguous", win, True, (j <= i) & (j >= i - BM_WL), "contiguous", "ring"),
            ("window ring zigzag", win, True, (j <= i) & (j >= i - BM_WL), "zigzag", "ring")]


def _hidden_steps(vis, layout, rank, world):
    """Ring steps of rank whose (its queries, the step's keys) the dense mask hides entirely."""
    owned = _owned(layout, world)
    c = vis.shape[0] // sum(map(len, owned))
    pos = [torch.cat([torch.arange(x * c, (x + 1) * c) for x in owned[r]]) for r in range(world)]
    return sum(not vis[pos[rank]][:, pos[(rank - t) % world]].any() for t in range(world))


def _owned(layout, world):
    return [[r, 2 * world - 1 - r] if layout == "zigzag" else [r] for r in range(world)]


def _bm_worker(rank, world, kiln, kd, rand):
    n = 2 * world * BM_CHUNK
    q = rand(1, HQ, n, D, seed=11)
    k, v = rand(1, HKV, n, D, seed=12), rand(1, HKV, n, D, seed=13)
    dout = rand(1, HQ, n, D, seed=14)
    for name, var, causal, vis, layout, mode in _bm_cases(world, kiln, n):
        bm = kiln.create_block_mask(var, None, None, n, n, BLOCK_SIZE=BM_BLOCK, causal=causal)
        kd.reset_stats()
        ql, kl, vl = (kd.shard(t, layout=layout).requires_grad_() for t in (q, k, v))
        out = kd.attention(ql, kl, vl, causal=causal, variant=var, layout=layout, mode=mode, block_mask=bm)
        out.backward(kd.shard(dout, layout=layout))
        where = f"{name}, {world} ranks, rank {rank}"
        if mode == "ring":   # the steps the mask hides are skipped, forward and backward
            want = _hidden_steps(vis, layout, rank, world)
            got = (kd.STATS["fwd_skipped"], kd.STATS["bwd_skipped"])
            assert got == (want, want), f"{where}: skipped steps {got}, the mask hides {want}"
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        ref = _ref(q64, k64, v64, vis=vis)
        ref.backward(dout.double())
        _check(where, lambda x: kd.shard(x, layout=layout),
               ((out, ref), (ql.grad, q64.grad), (kl.grad, k64.grad), (vl.grad, v64.grad)))
        whole = kd.unshard(out.detach(), layout=layout)
        if rank == 0:   # the same as one process's kiln.attention with the whole mask
            single = kiln.attention(q, k, v, causal=causal, variant=var, block_mask=bm)
            assert (whole.double() - single.double()).abs().max().item() <= 2e-3, where
    # a mask whose blocks do not divide the chunks is refused
    bm = kiln.create_block_mask(None, None, None, n, n, BLOCK_SIZE=64, causal=True)
    with pytest.raises(ValueError, match="divide the chunks"):
        kd.attention(*(kd.shard(t) for t in (q, k, v)), causal=True, block_mask=bm)


def _bm_entry(rank, world, port):
    _init(rank, world, port)
    try:
        import kiln
        import kiln.distributed as kd
        from conftest import rand
        _bm_worker(rank, world, kiln, kd, rand)
    finally:
        dist.destroy_process_group()


def _init(rank, world, port):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)


def _start_method():
    """fork: the children inherit the imported torch and kiln (spawn re-imports them in each
    process, most of a minute on 2 cores). Not where CUDA is: a parent whose earlier tests ran
    autograd on CUDA has autograd's device threads, and a forked child's backward then fails
    ("Unable to handle autograd's threading in combination with fork-based multiprocessing", on
    the H200 machine); spawn there (16 cores)."""
    return os.environ.get("KILN_TEST_MP_START") or ("spawn" if torch.cuda.is_available() else "fork")


@pytest.mark.parametrize("world", [2, 4])
def test_block_mask_gloo(world):
    mp.start_processes(_bm_entry, args=(world, _free_port()), nprocs=world, join=True, start_method=_start_method())


@pytest.mark.parametrize("world", [2, 4])
def test_context_parallel_gloo(world):
    n = 2 * world * 24   # zigzag: 2 * world chunks of 24 tokens (no multiple of the 64-row tiles)
    # the workers use one thread each (_start_method: fork, or spawn where CUDA is)
    mp.start_processes(_worker, args=(world, _free_port(), n), nprocs=world, join=True, start_method=_start_method())


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


def test_block_mask_slice_rebuilds_the_lists():
    """A slice of the whole mask over the whole sequence rebuilds the lists create_block_mask made
    (counts, the listed indices, classes); a chunk pair's slice holds the rectangle's classes."""
    import kiln
    from kiln.distributed import _BlockMaskSlicer, _bm_offsets
    n, world = 256, 2
    docs = torch.repeat_interleave(torch.arange(3, dtype=torch.int32), torch.tensor([40, 100, 116]))
    var = kiln.Variant("document", doc_ids=docs[None].contiguous(), doc_stride=n, doc_len=n)
    bm = kiln.create_block_mask(var, None, None, n, n, BLOCK_SIZE=(16, 32), causal=True)
    sl = _BlockMaskSlicer(bm, torch.empty(1, 2, n // world, 32), world, 2 * world, True)
    data, meta = sl.sub(0, n, 0, n, True)
    assert meta == bm.meta and data.numel() == _bm_offsets(1, bm.num_q_blocks, bm.num_kv_blocks)[1]

    def arrays(d, m):
        offs, nq, nk = m[9:], m[7], m[8]
        sizes = (nq, nq * nk, nq, nq * nk, nk, nq * nk, nk, nq * nk, nq * nk)
        return [d[o:o + 4 * e].view(torch.int32) for o, e in zip(offs, sizes)]

    got, want = arrays(data, meta), arrays(bm.data, bm.meta)
    for cnt, idx, r in ((0, 1, bm.num_kv_blocks), (2, 3, bm.num_kv_blocks), (4, 5, bm.num_q_blocks),
                        (6, 7, bm.num_q_blocks)):
        assert torch.equal(got[cnt], want[cnt])
        for row, c in enumerate(want[cnt].tolist()):
            assert torch.equal(got[idx][row * r:row * r + c], want[idx][row * r:row * r + c])
    assert torch.equal(got[8], want[8]) and want[8].eq(1).any() and want[8].eq(2).any()
    cls = want[8].view(bm.num_q_blocks, bm.num_kv_blocks)
    d2, m2 = sl.sub(192, 64, 128, 64, False)   # global chunk 3's queries against chunk 2's keys
    assert m2[4:9] == [64, 64, 0, 4, 2]
    assert torch.equal(arrays(d2, m2)[8].view(4, 2), cls[12:16, 4:6]) and cls[12:16, 4:6].any()
    # chunks of 64: documents [0, 40), [40, 140), [140, 256); causal
    assert sl.vis[3][2] and sl.vis[1][0] and not sl.vis[3][1] and not sl.vis[0][3] and not sl.vis[3][0]
