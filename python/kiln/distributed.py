"""kiln.distributed — context-parallel attention over a torch.distributed process group: each
rank holds a shard of the sequence's Q, K and V, and together they compute the attention of the
whole sequence, forward and backward (an autograd Function, usable in training). See
docs/distributed.md.

Two schedules, chosen per call by one rule (ALLGATHER_MAX_TOKENS, below):
  ring       K/V shards travel around the ring of ranks (batch_isend_irecv, on a side stream on
             CUDA, overlapped with the current step's attention); each step's partial outputs are
             merged into an fp32 accumulator by their log-sum-exps. The backward passes K/V around
             again, and with them the fp32 dK/dV partials, which arrive at their owner after a full
             turn.
  allgather  K/V gathered once (all_gather), each rank's queries against the keys they may see;
             the backward's dK/dV are summed back to their owners (reduce_scatter on NCCL,
             all_reduce elsewhere: gloo has no reduce_scatter).
Every call is Kiln's attention with whole-sequence positions (KilnAttentionParams.positions), so
causal masking, sliding windows and any variant's hooks see global positions; a causal call never
runs (query chunk, key chunk) pairs that causality hides.

Layouts: "zigzag" (default; load balance for causal: rank r holds chunks r and 2W-1-r of 2W
equal chunks, FlashAttention ring implementations' head-tail split) or "contiguous" (rank r holds
chunk r of W). shard() / unshard() convert. Shapes [batch, heads, seq_local, head_dim] as
kiln.attention (any strides, GQA). The sequence must split into equal chunks.

Example (torchrun --nproc-per-node 4):
    dist.init_process_group("nccl"); torch.cuda.set_device(rank)
    q, k, v = (kiln.distributed.shard(t) for t in (q_full, k_full, v_full))
    out = kiln.distributed.attention(q, k, v, causal=True)     # out: this rank's shard
    out.backward(dout)                                          # q.grad, k.grad, v.grad: shards
"""
import math

import torch
import torch.distributed as dist

from . import _attention as _A

# The rule between the two schedules (docs/distributed.md): all-gather when each rank holds fewer
# than this many tokens. Below it one step of ring attention is too short to hide a K/V transfer
# and the ring's W steps each pay launch and synchronisation costs; above it the ring's
# memory (two K/V shards, not the whole sequence's) and overlap win.
ALLGATHER_MAX_TOKENS = 4096

LAYOUTS = ("zigzag", "contiguous")


# ---------------- layouts ----------------

def _world(group):
    return dist.get_world_size(group), dist.get_rank(group)


def _nchunks(layout, world):
    return 2 * world if layout == "zigzag" else world


def _owned(layout, rank, world):
    """Global chunk indices rank holds, in its local order."""
    return [rank, 2 * world - 1 - rank] if layout == "zigzag" else [rank]


def shard(x, group=None, layout="zigzag", dim=2):
    """This rank's shard of the whole-sequence tensor x (sequence along dim)."""
    world, rank = _world(group)
    n = _nchunks(layout, world)
    if x.shape[dim] % n:
        raise ValueError(f"shard: sequence length {x.shape[dim]} is no multiple of {n} ({layout}, {world} ranks)")
    chunks = x.chunk(n, dim)
    return torch.cat([chunks[c] for c in _owned(layout, rank, world)], dim).contiguous()


def unshard(x, group=None, layout="zigzag", dim=2):
    """The whole-sequence tensor from every rank's shard x (all_gather; not differentiable)."""
    world, _ = _world(group)
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    return _reorder(parts, layout, world, dim)


def _reorder(parts, layout, world, dim):
    """Rank-ordered shards -> the tensor in sequence order."""
    per = len(_owned(layout, 0, world))
    chunks = [None] * _nchunks(layout, world)
    for r, p in enumerate(parts):
        for c, piece in zip(_owned(layout, r, world), p.chunk(per, dim)):
            chunks[c] = piece
    return torch.cat(chunks, dim)


# ---------------- the plan of one step ----------------

def _chunks(layout, rank, world, s_local):
    """(local start, length, global position) of each chunk rank holds."""
    own = _owned(layout, rank, world)
    c = s_local // len(own)
    return [(i * c, c, g * c) for i, g in enumerate(own)]


def _pair(qc, kc, causal):
    """'hidden', 'full' or 'partial' for causal attention of query chunk qc to key chunk kc."""
    if not causal:
        return "full"
    q0, ql, qp = qc
    k0, kl, kp = kc
    if kp > qp + ql - 1:
        return "hidden"
    return "full" if kp + kl - 1 <= qp else "partial"


def _plan(qcs, kcs, causal, has_variant, same):
    """The attention calls of one step: (q_lo, q_hi, k_lo, k_hi, causal, positions). Without a
    variant, calls that see every key merge (positions then change nothing), and a rank's own
    shard runs as one causal call (its local order is increasing in positions and its query and
    key lengths agree, so the local diagonal is the global one)."""
    sq = sum(c[1] for c in qcs)
    sk = sum(c[1] for c in kcs)
    cls = [[_pair(qc, kc, causal) for kc in kcs] for qc in qcs]
    if not has_variant:
        if all(c == "full" for row in cls for c in row):
            return [(0, sq, 0, sk, False, [])]
        if same and causal:
            return [(0, sq, 0, sk, True, [])]
    calls = []
    for qc, row in zip(qcs, cls):
        vis = [(kc, c) for kc, c in zip(kcs, row) if c != "hidden"]
        if not vis:
            continue
        contiguous = all(a[0][0] + a[0][1] == b[0][0] for a, b in zip(vis, vis[1:]))
        if not has_variant and contiguous and all(c == "full" for _, c in vis):
            calls.append((qc[0], qc[0] + qc[1], vis[0][0][0], vis[-1][0][0] + vis[-1][0][1], False, []))
            continue
        for kc, c in vis:
            pos = [qc[2], kc[2]] if has_variant or c == "partial" else []
            calls.append((qc[0], qc[0] + qc[1], kc[0], kc[0] + kc[1], causal and c == "partial", pos))
    merged = []   # full calls of one key range over adjacent query ranges: one call
    for c in calls:
        m = merged[-1] if merged else None
        if m and not c[4] and not c[5] and not m[4] and not m[5] and m[2:4] == c[2:4] and m[1] == c[0]:
            merged[-1] = (m[0], c[1], m[2], m[3], False, [])
        else:
            merged.append(c)
    return merged


# ---------------- the kernels of a step ----------------

def _fwd_call(q, k, v, call, scale, var):
    q_lo, q_hi, k_lo, k_hi, causal, pos = call
    vid, vts = var
    out, lse = _A._fwd_impl(q[:, :, q_lo:q_hi], k[:, :, k_lo:k_hi], v[:, :, k_lo:k_hi], None, None, 0, 0, causal,
                            scale, False, vid, vts, None, [], pos)
    return out, lse


def _bwd_call(dout, q, k, v, out, lse, call, scale, var, deterministic):
    q_lo, q_hi, k_lo, k_hi, causal, pos = call
    vid, vts = var
    sl, kl = slice(q_lo, q_hi), slice(k_lo, k_hi)
    return _A._bwd_impl(dout[:, :, sl], q[:, :, sl], k[:, :, kl], v[:, :, kl], out[:, :, sl],
                        lse[:, :, sl], None, None, 0, 0, causal, scale, deterministic, vid, vts, None, [], pos)


def _merge(acc, acc_lse, lo, hi, out, lse):
    """acc[lo:hi], acc_lse[lo:hi] <- the LSE-weighted merge with a partial result (fp32)."""
    a = acc_lse[:, :, lo:hi]
    new = torch.logaddexp(a, lse)
    safe = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
    wa, wb = torch.exp(a - safe), torch.exp(lse - safe)
    acc[:, :, lo:hi] = acc[:, :, lo:hi] * wa[..., None] + out.float() * wb[..., None]
    acc_lse[:, :, lo:hi] = new


# ---------------- communication ----------------

_streams = {}


class _Ring:
    """P2P sends to the next rank and receives from the previous one, on a side stream on CUDA."""

    def __init__(self, group, device):
        self.group = group
        self.world, self.rank = _world(group)
        g = (lambda r: dist.get_global_rank(group, r)) if group is not None else (lambda r: r)
        self.next, self.prev = g((self.rank + 1) % self.world), g((self.rank - 1) % self.world)
        self.cuda = device.type == "cuda"
        if self.cuda:
            if device not in _streams:
                _streams[device] = torch.cuda.Stream(device)
            self.stream = _streams[device]

    def start(self, send):
        """Send `send` on, receive a tensor like it: (handle, received)."""
        recv = torch.empty_like(send)
        ops = [dist.P2POp(dist.isend, send, self.next, self.group), dist.P2POp(dist.irecv, recv, self.prev, self.group)]
        if self.cuda:
            self.stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.stream):
                reqs = dist.batch_isend_irecv(ops)
            send.record_stream(self.stream)
            recv.record_stream(self.stream)
        else:
            reqs = dist.batch_isend_irecv(ops)
        return reqs, recv

    def finish(self, handle):
        reqs, recv = handle
        for r in reqs:
            r.wait()
        if self.cuda:
            torch.cuda.current_stream().wait_stream(self.stream)
        return recv


# ---------------- ring attention ----------------

def _ring_fwd(q, k, v, causal, scale, var, group, layout):
    ring = _Ring(group, q.device)
    world, rank = ring.world, ring.rank
    qcs = _chunks(layout, rank, world, q.shape[2])
    b, h, s, d = q.shape
    acc = torch.zeros(b, h, s, d, dtype=torch.float32, device=q.device)
    acc_lse = torch.full((b, h, s), float("-inf"), dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v])
    for t in range(world):
        handle = ring.start(kv) if t + 1 < world else None
        src = (rank - t) % world
        kcs = _chunks(layout, src, world, k.shape[2])
        for call in _plan(qcs, kcs, causal, var[0] != 0, src == rank):
            o, l = _fwd_call(q, kv[0], kv[1], call, scale, var)
            _merge(acc, acc_lse, call[0], call[1], o, l)
        if handle is not None:
            kv = ring.finish(handle)
    return acc.to(q.dtype), acc_lse


def _ring_bwd(dout, q, k, v, out, lse, causal, scale, var, group, layout, deterministic):
    ring = _Ring(group, q.device)
    world, rank = ring.world, ring.rank
    qcs = _chunks(layout, rank, world, q.shape[2])
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v])
    dkv_handle = None
    for t in range(world):
        handle = ring.start(kv) if t + 1 < world else None
        src = (rank - t) % world
        kcs = _chunks(layout, src, world, k.shape[2])
        dkv = torch.zeros(kv.shape, dtype=torch.float32, device=q.device)
        for call in _plan(qcs, kcs, causal, var[0] != 0, src == rank):
            gq, gk, gv = _bwd_call(dout, q, kv[0], kv[1], out, lse, call, scale, var, deterministic)
            dq[:, :, call[0]:call[1]] += gq
            dkv[0, :, :, call[2]:call[3]] += gk
            dkv[1, :, :, call[2]:call[3]] += gv
        if dkv_handle is not None:   # the partials of the previous ranks for this K/V shard
            dkv += ring.finish(dkv_handle)
        if world > 1:
            dkv_handle = ring.start(dkv)
        if handle is not None:
            kv = ring.finish(handle)
    if dkv_handle is not None:   # after a full turn: this rank's own shard's gradients
        dkv = ring.finish(dkv_handle)
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


# ---------------- all-gather attention ----------------

def _gather_kv(k, v, group, layout):
    world, _ = _world(group)
    kv = torch.stack([k, v]).contiguous()
    parts = [torch.empty_like(kv) for _ in range(world)]
    dist.all_gather(parts, kv, group=group)
    return _reorder(parts, layout, world, 3)


def _ag_calls(qcs, sk, causal):
    """One call per query chunk against the keys it may see (causal: up to its last position,
    so the diagonal is the kernel's own)."""
    return [(q0, q0 + ql, 0, min(sk, qp + ql) if causal else sk, causal, [qp, 0]) for q0, ql, qp in qcs]


def _ag_fwd(q, k, v, causal, scale, var, group, layout):
    world, rank = _world(group)
    kv = _gather_kv(k, v, group, layout)
    qcs = _chunks(layout, rank, world, q.shape[2])
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    for call in _ag_calls(qcs, kv.shape[3], causal):
        o, l = _fwd_call(q, kv[0], kv[1], call, scale, var)
        out[:, :, call[0]:call[1]] = o
        lse[:, :, call[0]:call[1]] = l
    return out, lse


def _ag_bwd(dout, q, k, v, out, lse, causal, scale, var, group, layout, deterministic):
    world, rank = _world(group)
    kv = _gather_kv(k, v, group, layout)
    qcs = _chunks(layout, rank, world, q.shape[2])
    dq = torch.empty_like(q)
    dkv = torch.zeros(kv.shape, dtype=torch.float32, device=q.device)
    for call in _ag_calls(qcs, kv.shape[3], causal):
        gq, gk, gv = _bwd_call(dout, q, kv[0], kv[1], out, lse, call, scale, var, deterministic)
        dq[:, :, call[0]:call[1]] = gq
        dkv[0, :, :, :call[3]] += gk
        dkv[1, :, :, :call[3]] += gv
    # back to sequence-ordered shards per rank: rank r's chunks, in its local order
    n = _nchunks(layout, world)
    chunks = dkv.chunk(n, 3)
    per_rank = [torch.cat([chunks[c] for c in _owned(layout, r, world)], 3) for r in range(world)]
    if dist.get_backend(group) == "nccl":
        mine = torch.empty_like(per_rank[rank])
        dist.reduce_scatter_tensor(mine, torch.stack(per_rank).contiguous(), group=group)
    else:   # gloo has no reduce_scatter
        full = torch.stack(per_rank).contiguous()
        dist.all_reduce(full, group=group)
        mine = full[rank]
    return dq, mine[0].to(k.dtype), mine[1].to(v.dtype)


# ---------------- the autograd Function and the public call ----------------

class _ContextParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, scale, variant, group, layout, use_ring, deterministic):
        var = _A._variant_args(variant, q.device)
        fwd = _ring_fwd if use_ring else _ag_fwd
        out, lse = fwd(q, k, v, causal, scale, var, group, layout)
        ctx.save_for_backward(q, k, v, out, lse, *var[1])
        ctx.args = (causal, scale, variant, group, layout, use_ring, deterministic, var[0])
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, *vts = ctx.saved_tensors
        causal, scale, variant, group, layout, use_ring, deterministic, vid = ctx.args
        bwd = _ring_bwd if use_ring else _ag_bwd
        dq, dk, dv = bwd(dout.contiguous(), q, k, v, out, lse, causal, scale, (vid, vts), group, layout,
                         deterministic)
        return dq, dk, dv, None, None, None, None, None, None, None


def use_ring(seqlen_local, mode="auto"):
    """Whether a call with seqlen_local tokens per rank runs the ring (else all-gather): mode
    "ring" / "allgather" force one, "auto" is the documented rule (ALLGATHER_MAX_TOKENS)."""
    if mode not in ("auto", "ring", "allgather"):
        raise ValueError(f"mode: want 'auto', 'ring' or 'allgather', got {mode!r}")
    return mode == "ring" or (mode == "auto" and seqlen_local >= ALLGATHER_MAX_TOKENS)


def attention(q, k, v, causal=False, scale=None, variant=None, group=None, layout="zigzag", mode="auto",
              return_lse=False, deterministic=False):
    """Context-parallel softmax(scale * q k^T) v over `group` (None: the default group): q, k, v
    are this rank's shards ([batch, heads, seq_local, head_dim], made by shard() with `layout`),
    the result is this rank's shard of the output (and with return_lse its log-sum-exp [b, h,
    seq_local], fp32, not differentiated). causal: in whole-sequence positions (top-left, the
    whole problem being self-attention); variant: a kiln.Variant whose hooks see whole-sequence
    positions. mode: 'auto' (use_ring's rule), 'ring' or 'allgather'. Differentiable in q, k, v."""
    _A._check_qkv(q, k, v, 4, "[batch, heads, seq_local, head_dim]")
    if layout not in LAYOUTS:
        raise ValueError(f"layout: want one of {LAYOUTS}, got {layout!r}")
    if k.shape != v.shape or k.shape[2] != q.shape[2] or k.shape[0] != q.shape[0]:
        raise ValueError(f"k, v: want [{q.shape[0]}, heads_kv, {q.shape[2]}, d] each, got {tuple(k.shape)}, "
                         f"{tuple(v.shape)}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"k: {k.shape[1]} heads do not divide q's {q.shape[1]}")
    per = len(_owned(layout, 0, 1))
    if q.shape[2] % per:
        raise ValueError(f"q: {q.shape[2]} tokens per rank do not split into the {layout} layout's {per} chunks")
    ring = use_ring(q.shape[2], mode)
    q, k, v = (t.contiguous() for t in (q, k, v))
    out, lse = _ContextParallel.apply(q, k, v, bool(causal), _A._scale(scale, q.shape[-1]), variant, group,
                                      layout, ring, bool(deterministic))
    return (out, lse) if return_lse else out
