"""bench_cp.py — kiln.distributed on the GPUs of one machine, run by torchrun (one process per GPU,
NCCL; tools/device_cp.sh): (a) correctness against one GPU's kiln.attention and float64 on
moderate sizes, ring and all-gather, causal, full and a sliding window, and a packed (varlen)
batch against one GPU's flash_attn_varlen_func; (b) forward+backward time
at fixed tokens per GPU on 1, 2, 4 GPUs, causal, and the parallel efficiency
t_1(N) / (W * t_W(N)) with N = W * tokens per GPU (t_1 measured on one GPU); (c) the longest causal
sequence that trains (forward+backward) on all the GPUs, doubling until memory or the time budget
runs out. Rank 0 prints the table last.

  torchrun --nproc-per-node 4 python/examples/bench_cp.py
  torchrun --nproc-per-node 2 python/examples/bench_cp.py --device cpu --tiny   # a smoke test (gloo)
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402
import kiln.distributed as kd  # noqa: E402


def log(*a):
    if dist.get_rank() == 0:
        print(*a, flush=True)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def inputs(n, hq, hkv, d, dtype, dev, seed):
    """Uniform in [-1, 1), generated on the device (the same on every rank: one seed, one shape)."""
    g = torch.Generator(device=dev).manual_seed(seed)
    mk = lambda h: (torch.rand(1, h, n, d, generator=g, device=dev) * 2 - 1).to(dtype)  # noqa: E731
    return mk(hq), mk(hkv), mk(hkv), mk(hq)


def ref_rows(q, k, v, rows, causal, window):
    """float64 attention output of the given query rows against the whole sequence."""
    g = q.shape[1] // k.shape[1]
    out = []
    for r0 in range(0, len(rows), 64):
        idx = rows[r0:r0 + 64]
        qd = q[:, :, idx].double()
        kd_, vd = k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
        s = torch.einsum("bhid,bhjd->bhij", qd, kd_) / math.sqrt(q.shape[-1])
        j = torch.arange(k.shape[2], device=q.device)[None, :]
        i = idx[:, None]
        vis = torch.ones_like(s[0, 0], dtype=torch.bool)
        if causal:
            vis &= j <= i
        if window:
            vis &= j >= i - window
        p = torch.softmax(s.masked_fill(~vis, float("-inf")), -1)
        out.append(torch.einsum("bhij,bhjd->bhid", p, vd))
    return torch.cat(out, 2)


def correctness(a, dev, rows_table):
    """(a): every rank runs the distributed call; rank 0 also the whole problem on its GPU."""
    world, rank = dist.get_world_size(), dist.get_rank()
    n = a.check_tokens * world
    q, k, v, dout = inputs(n, a.hq, a.hkv, a.d, a.dtype, dev, seed=7)
    for name, causal, window, mode in (("ring causal", True, 0, "ring"), ("ring full", False, 0, "ring"),
                                       (f"ring causal window {a.window}", True, a.window, "ring"),
                                       ("allgather causal", True, 0, "allgather")):
        var = kiln.Variant("sliding_window", window_left=window, window_right=-1) if window else None
        ql, kl, vl = (kd.shard(t).requires_grad_() for t in (q, k, v))
        out = kd.attention(ql, kl, vl, causal=causal, variant=var, mode=mode)
        out.backward(kd.shard(dout))
        got = [kd.unshard(t.detach()) for t in (out, ql.grad, kl.grad, vl.grad)]
        if rank == 0:
            qs, ks, vs = (t.clone().requires_grad_() for t in (q, k, v))
            single = kiln.attention(qs, ks, vs, causal=causal, variant=var)
            single.backward(dout)
            want = [single.detach(), qs.grad, ks.grad, vs.grad]
            errs = [((x.float() - y.float()).abs().max() / y.float().abs().max().clamp_min(1e-6)).item()
                    for x, y in zip(got, want)]
            rows = torch.linspace(0, n - 1, 256, device=dev).long()
            ref = ref_rows(q, k, v, rows, causal, window)
            e64 = (got[0][:, :, rows].double() - ref).abs().max().item()
            e64_single = (want[0][:, :, rows].double() - ref).abs().max().item()
            ok = errs[0] < 2e-2 and max(errs[1:]) < 5e-2 and e64 <= 2 * e64_single + 1e-3
            rows_table.append(f"check {name:26s} N={n:7d} rel err vs 1 GPU: out {errs[0]:.2e} dq {errs[1]:.2e} "
                              f"dk {errs[2]:.2e} dv {errs[3]:.2e}; |out - f64| {e64:.2e} (1 GPU {e64_single:.2e}) "
                              f"{'OK' if ok else 'FAIL'}")
            log(rows_table[-1])
        dist.barrier()
    block_mask_check(a, dev, rows_table)
    # a packed batch: three sequences, causal, against one GPU's flash_attn_varlen_func
    lens = [2 * world * c for c in (a.check_tokens // 4, a.check_tokens // 8, a.check_tokens // 2)]
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=dev)
    t = cu[-1].item()
    q, k, v, dout = (x[0].transpose(0, 1).contiguous() for x in inputs(t, a.hq, a.hkv, a.d, a.dtype, dev, seed=9))
    for name, window in (("varlen causal (3 seqs)", -1), (f"varlen causal window {a.window}", a.window)):
        ql, kl, vl = (kd.shard_varlen(x, cu).requires_grad_() for x in (q, k, v))
        var = kiln.Variant("sliding_window", window_left=window, window_right=-1) if window >= 0 else None
        out = kd.attention_varlen(ql, kl, vl, cu, causal=True, variant=var)
        out.backward(kd.shard_varlen(dout, cu))
        got = [kd.unshard_varlen(x.detach(), cu) for x in (out, ql.grad, kl.grad, vl.grad)]
        if rank == 0:
            qs, ks, vs = (x.clone().requires_grad_() for x in (q, k, v))
            m = max(lens)
            single = kiln.flash_attn_varlen_func(qs, ks, vs, cu, cu, m, m, causal=True, window_size=(window, -1))
            single.backward(dout)
            want = [single.detach(), qs.grad, ks.grad, vs.grad]
            check_row(rows_table, name, t, got, want)
        dist.barrier()


def rel_errs(got, want):
    return [((x.float() - y.float()).abs().max() / y.float().abs().max().clamp_min(1e-6)).item()
            for x, y in zip(got, want)]


def check_row(rows_table, name, n, got, want, extra=""):
    errs = rel_errs(got, want)
    ok = errs[0] < 2e-2 and max(errs[1:]) < 5e-2
    rows_table.append(f"check {name:26s} N={n:7d} rel err vs 1 GPU: out {errs[0]:.2e} dq {errs[1]:.2e} "
                      f"dk {errs[2]:.2e} dv {errs[3]:.2e}{extra} {'OK' if ok else 'FAIL'}")
    log(rows_table[-1])


def block_mask_check(a, dev, rows_table):
    """A document mask of the whole sequence (documents of 3/8, 1/8, 1/4 and 1/4 of it; causal):
    the ring with its slices against one GPU's kiln.attention with the whole mask, and the ring
    steps it skipped (rank 0's, forward)."""
    world, rank = dist.get_world_size(), dist.get_rank()
    n = a.check_tokens * world
    q, k, v, dout = inputs(n, a.hq, a.hkv, a.d, a.dtype, dev, seed=8)
    cuts = [0, 3 * n // 8, n // 2, 3 * n // 4, n]
    docs = torch.cat([torch.full((b - c,), i, dtype=torch.int32, device=dev) for i, (c, b) in
                      enumerate(zip(cuts, cuts[1:]))])[None].contiguous()
    var = kiln.Variant("document", doc_ids=docs, doc_stride=n, doc_len=n)
    bm = kiln.create_block_mask(var, None, None, n, n, device=dev, BLOCK_SIZE=a.bm_block, causal=True)
    kd.reset_stats()
    ql, kl, vl = (kd.shard(t).requires_grad_() for t in (q, k, v))
    out = kd.attention(ql, kl, vl, causal=True, variant=var, mode="ring", block_mask=bm)
    out.backward(kd.shard(dout))
    got = [kd.unshard(t.detach()) for t in (out, ql.grad, kl.grad, vl.grad)]
    if rank == 0:
        qs, ks, vs = (t.clone().requires_grad_() for t in (q, k, v))
        single = kiln.attention(qs, ks, vs, causal=True, variant=var, block_mask=bm)
        single.backward(dout)
        check_row(rows_table, "ring doc block mask", n, got, [single.detach(), qs.grad, ks.grad, vs.grad],
                  f"; steps skipped {kd.STATS['fwd_skipped']}/{kd.STATS['fwd_steps']}")
    dist.barrier()


_warm = set()


def fwd_bwd_time(q, k, v, dout, group, iters, dist_call):
    """Median seconds of forward+backward (distributed when dist_call, else kiln.attention), after
    one untimed run the first time a kind of call (one GPU, or W GPUs) is timed: the kernels are
    the same at every length, so later lengths need no warm-up."""
    dev = q.device
    times = []
    kind = (dist_call, dist.get_world_size(group) if group is not None else 1)
    first = 0 if kind in _warm else 1
    _warm.add(kind)
    for it in range(iters + first):
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        if group is not None:
            dist.barrier(group=group)
        sync(dev)
        t0 = time.perf_counter()
        out = kd.attention(qq, kk, vv, causal=True, group=group, mode="ring") if dist_call else \
            kiln.attention(qq, kk, vv, causal=True)
        out.backward(dout)
        sync(dev)
        if it >= first:
            times.append(time.perf_counter() - t0)
        del out, qq, kk, vv
    times.sort()
    return times[len(times) // 2]


def scaling(a, dev, rows_table, budget_end):
    """(b): fixed tokens per GPU, 1..W GPUs (subgroups of the first ranks). A point whose estimated
    time (t_1 grows as N^2 under causal masking, from the last one measured) would pass the
    phase's budget is skipped with a line saying so; long points are timed once."""
    world, rank = dist.get_world_size(), dist.get_rank()
    sizes = [w for w in (1, 2, 4, 8) if w <= world]
    groups = {w: dist.new_group(list(range(w))) for w in sizes if w > 1}
    t1_known = {}   # N -> t_1(N), rank 0's, shared
    for tpg in a.tokens:
        for w in sizes:
            n = w * tpg
            est = torch.zeros(1, device=dev)
            if rank == 0 and t1_known:
                n0 = max(t1_known)
                t1e = t1_known.get(n, t1_known[n0] * (n / n0) ** 2)
                est[0] = t1e * (1 + 1.3 / w) if w > 1 else t1e   # t_1 and t_W (efficiency >= ~75%)
            dist.broadcast(est, 0)
            iters = a.iters if est.item() < 5 else 1
            if time.time() + iters * est.item() > budget_end:
                log(f"scaling: skipping {tpg // 1024}k tokens/GPU on {w} GPUs (about {iters * est.item():.0f} s, "
                    f"{budget_end - time.time():.0f} s left)")
                continue
            # t_1(n): the whole sequence on one GPU (rank 0)
            t1 = None
            if rank == 0:
                if n in t1_known:
                    t1 = t1_known[n]
                else:
                    q, k, v, dout = inputs(n, a.hq, a.hkv, a.d, a.dtype, dev, seed=1)
                    t1 = t1_known[n] = fwd_bwd_time(q, k, v, dout, None, iters, False)
                    del q, k, v, dout
            tw = None
            if w > 1 and rank < w:
                q, k, v, dout = inputs(n, a.hq, a.hkv, a.d, a.dtype, dev, seed=1)
                g = groups[w]
                ql, kl, vl, dl = (kd.shard(t, group=g) for t in (q, k, v, dout))
                del q, k, v, dout
                tw = fwd_bwd_time(ql, kl, vl, dl, g, iters, True)
                del ql, kl, vl, dl
            dist.barrier()
            if rank == 0:
                tw = t1 if w == 1 else tw
                eff = t1 / (w * tw)
                a.eff[(tpg, w)] = eff
                rows_table.append(f"scale {tpg // 1024:4d}k tok/GPU x {w} GPU (N={n // 1024:5d}k causal fwd+bwd): "
                                  f"{tw * 1e3:9.1f} ms, 1 GPU {t1 * 1e3:9.1f} ms, efficiency {eff * 100:5.1f}%")
                log(rows_table[-1])
            if dev.type == "cuda":
                torch.cuda.empty_cache()


def longest(a, dev, rows_table, budget_end):
    """(c): double the causal sequence on all GPUs until it fails or the budget would be passed."""
    world, rank = dist.get_world_size(), dist.get_rank()
    tpg, last = a.long_start, None
    while True:
        n = tpg * world
        left = budget_end - time.time()
        if last is not None and last * 4.5 > left:   # causal: ~4x the time per doubling
            stop = f"longest: stopped before N={n // 1024}k by the time limit (about {last * 4.5:.0f} s, {left:.0f} s left)"
            rows_table.append(stop)
            log(stop)
            break
        # an out-of-memory on one rank mid-ring would leave the others waiting: estimate first
        # (q, out, dout, dq in the dtype, the fp32 output and dQ accumulators; K/V, the ring's two
        # K/V buffers, dK/dV and their fp32 partials)
        need = tpg * a.d * (a.hq * (4 * 2 + 2 * 4) + a.hkv * (8 * 2 + 6 * 4))
        if dev.type == "cuda" and need > 0.85 * torch.cuda.get_device_properties(dev).total_memory:
            stop = f"longest: stopped before N={n // 1024}k by memory (about {need / 2 ** 30:.0f} GiB per GPU needed)"
            rows_table.append(stop)
            log(stop)
            break
        status = torch.zeros(1, device=dev)
        try:
            g = torch.Generator(device=dev).manual_seed(rank)
            mk = lambda h: (torch.rand(1, h, tpg, a.d, generator=g, device=dev) * 2 - 1).to(a.dtype)  # noqa: E731
            ql, kl, vl = (mk(h).requires_grad_() for h in (a.hq, a.hkv, a.hkv))
            dist.barrier()
            sync(dev)
            t0 = time.perf_counter()
            out = kd.attention(ql, kl, vl, causal=True, mode="ring")
            out.backward(torch.ones_like(out))
            sync(dev)
            dt = time.perf_counter() - t0
            fin = torch.isfinite(ql.grad).all() and torch.isfinite(kl.grad).all()
            status[0] = 1 if fin else 2
        except torch.cuda.OutOfMemoryError:
            status[0] = 3
            dt = None
        ql = kl = vl = out = None
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        dist.all_reduce(status, op=dist.ReduceOp.MAX)
        if status.item() != 1:
            stop = f"longest: N={n // 1024}k {'not finite' if status.item() == 2 else 'out of memory'} on some rank"
            rows_table.append(stop)
            log(stop)
            break
        mem = torch.cuda.max_memory_allocated(dev) / 2 ** 30 if dev.type == "cuda" else 0
        rows_table.append(f"train N={n // 1024:6d}k causal on {world} GPUs: fwd+bwd {dt:8.2f} s, "
                          f"peak {mem:.1f} GiB/GPU")
        a.longest = f"{n // 1024}k tokens in {dt:.1f} s, {mem:.1f} GiB/GPU"
        log(rows_table[-1])
        write_table(a, rows_table, dev)
        last, tpg = dt, tpg * 2
        if tpg > a.long_max:
            break


def summary(a):
    """The short table: efficiency per tokens per GPU and GPU count, the longest that trained."""
    lines = ["---- summary (causal fwd+bwd; efficiency t_1(N) / (W t_W(N)))"]
    for tpg in a.tokens:
        cells = [f"{w} GPUs {a.eff[(tpg, w)] * 100:5.1f}%" for w in (2, 4, 8) if (tpg, w) in a.eff]
        if cells:
            lines.append(f"{tpg // 1024:4d}k tok/GPU: " + ", ".join(cells))
    lines.append(f"longest trained on {dist.get_world_size()} GPUs: {a.longest or 'none'}")
    return lines


def write_table(a, rows, dev):
    if a.table and dist.get_rank() == 0:
        with open(a.table, "w") as f:
            f.write(f"==== kiln.distributed on {dist.get_world_size()} x {dev.type}\n" + "\n".join(rows + summary(a)) +
                    "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="small sizes (a smoke test, e.g. on CPU with gloo)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--heads-kv", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--tokens", default="65536,131072", help="tokens per GPU for the scaling runs")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--budget", type=float, default=300,
                    help="seconds for the whole run from its start: (a), then (b) up to half of it, (c) the rest")
    ap.add_argument("--table", default="", help="also write the table to this file (rank 0)")
    ap.add_argument("--skip", default="", help="phases to skip: a, b, c")
    a = ap.parse_args()
    a.hq, a.hkv, a.d, a.dtype = a.heads, a.heads_kv, a.head_dim, torch.bfloat16
    a.tokens = [int(x) for x in a.tokens.split(",")]
    a.eff, a.longest = {}, None   # the summary's: (tokens per GPU, GPUs) -> efficiency; the longest run
    a.check_tokens, a.long_start, a.long_max, a.window, a.bm_block = 4096, 262144, 1 << 23, 1024, 128
    if a.tiny:
        a.hq, a.hkv, a.d, a.tokens, a.check_tokens, a.long_start, a.long_max, a.window, a.bm_block = \
            2, 1, 32, [64], 64, 64, 128, 29, 16
    if a.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        try:   # device_id binds the communicator to the GPU at once (torch >= 2.3)
            dist.init_process_group("nccl", device_id=dev)
        except TypeError:
            dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        a.dtype = torch.float16
        dist.init_process_group("gloo")
    start = time.time()
    rows = []
    log(f"bench_cp: {dist.get_world_size()} ranks on {dev.type}, heads {a.hq}/{a.hkv}, d {a.d}, {a.dtype}")
    if "a" not in a.skip:
        correctness(a, dev, rows)
        write_table(a, rows, dev)
    budget_end = start + a.budget
    # rows so far go to the table file after each phase: a run cut by the time limit keeps them
    if "b" not in a.skip:
        scaling(a, dev, rows, start + a.budget * (0.5 if "c" not in a.skip else 1.0))
        write_table(a, rows, dev)
    if "c" not in a.skip:
        longest(a, dev, rows, budget_end)
    log(f"\n==== kiln.distributed on {dist.get_world_size()} x {dev.type} ({time.time() - start:.0f} s)")
    for r in rows + summary(a):
        log(r)
    write_table(a, rows, dev)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
