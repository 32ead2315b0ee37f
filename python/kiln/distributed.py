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
runs (query chunk, key chunk) pairs that causality hides. A kiln.BlockMask made for the whole
sequence is sliced per call (_BlockMaskSlicer): pairs it hides are never run, and a ring step
whose pairs are all hidden launches nothing (STATS counts the steps skipped).

Layouts: "zigzag" (default; load balance for causal: rank r holds chunks r and 2W-1-r of 2W
equal chunks, FlashAttention ring implementations' head-tail split) or "contiguous" (rank r holds
chunk r of W). shard() / unshard() convert. Shapes [batch, heads, seq_local, head_dim] as
kiln.attention (any strides, GQA). The sequence must split into equal chunks. Packed batches
(varlen, cu_seqlens): attention_varlen, shard_varlen / unshard_varlen (zigzag per sequence, ring).

Invariants: every rank runs the same schedule (the same calls, sends and receives in the same
order: P2P messages match by order); partial results and gradients are summed in fp32 and
rounded to the input dtype once, at the end; the kernels see the same shapes on every rank (equal
chunks), so each compiles once.

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


def _pair(qc, kc, causal, window=None):
    """'hidden', 'full' or 'partial' for attention of query chunk qc to key chunk kc (causal, and
    a sliding window (left, right) that hides whole pairs too; < 0: unlimited)."""
    q0, ql, qp = qc
    k0, kl, kp = kc
    if window is not None:
        left, right = window
        if (left >= 0 and kp + kl - 1 < qp - left) or (right >= 0 and kp > qp + ql - 1 + right):
            return "hidden"
    if not causal:
        return "full"
    if kp > qp + ql - 1:
        return "hidden"
    return "full" if kp + kl - 1 <= qp else "partial"


_WINDOW_VARIANTS = ("variants/sliding_window.tile", "variants/gemma2.tile")


def _window_of(variant):
    """(window_left, window_right) of a shipped windowed variant (its pairs outside the window are
    never run), else None."""
    if variant is None or variant.source is not None or not variant.path.endswith(_WINDOW_VARIANTS):
        return None   # (a shipped variant: source None, its text the library's)
    sc = variant.scalars
    return int(sc["window_left"]), int(sc["window_right"])


def _plan(qcs, kcs, causal, has_variant, same, window=None, bm_vis=None):
    """The attention calls of one step: (q_lo, q_hi, k_lo, k_hi, causal, positions). Without a
    variant, calls that see every key merge (positions then change nothing), and a rank's own
    shard runs as one causal call (its local order is increasing in positions and its query and
    key lengths agree, so the local diagonal is the global one). bm_vis: a block mask's
    visibility of (query chunk, key chunk) pairs by global chunk index (_BlockMaskSlicer.vis);
    a pair it hides is never run, and every visible pair is its own call (its slice of the mask
    needs one position offset)."""
    sq = sum(c[1] for c in qcs)
    sk = sum(c[1] for c in kcs)
    cls = [[_pair(qc, kc, causal, window) for kc in kcs] for qc in qcs]
    if bm_vis is not None:
        has_variant = True
        cls = [[c if bm_vis[qc[2] // qc[1]][kc[2] // kc[1]] else "hidden" for kc, c in zip(kcs, row)]
               for qc, row in zip(qcs, cls)]
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


def _plan_packed(qch, kch, half, causal):
    """The calls of one step of a packed (varlen) zigzag shard: the shard is [A, B], A holding
    chunk qch[0] of every sequence and B chunk qch[1], each region `half` tokens with the same
    per-sequence prefix sums; a pair of regions is hidden, full or (same chunk) causal for every
    sequence alike (the chunks of one sequence have equal lengths)."""
    calls = []
    for x, qc in enumerate(qch):
        for y, kc in enumerate(kch):
            if not (causal and kc > qc):
                calls.append((slice(x * half, (x + 1) * half), slice(y * half, (y + 1) * half), causal and kc == qc,
                              []))
    return calls


def _plan_packed_var(qch, kch, half, lens, causal, window=None):
    """The calls of one step of a packed zigzag shard with a variant: one fixed-length call per
    sequence and region pair, at the sequence's own positions (its chunk qc of length L_b / 2W
    starts at qc * L_b / 2W; a call takes one offset, and the sequences' chunks differ in
    length), as (q slice, k slice, causal, positions) over the packed tokens; pairs that causality
    or a shipped variant's window hides are never run."""
    calls = []
    for x, qc in enumerate(qch):
        for y, kc in enumerate(kch):
            start = 0
            for n in lens:
                a, b = (x * half + start, n, qc * n), (y * half + start, n, kc * n)
                start += n
                cls = _pair(a, b, causal, window) if n else "hidden"
                if cls != "hidden":
                    calls.append((slice(a[0], a[0] + n), slice(b[0], b[0] + n), causal and cls == "partial",
                                  [a[2], b[2]]))
    return calls


def _slices(call):
    """_plan's (q_lo, q_hi, k_lo, k_hi, causal, positions) as (q slice, k slice, causal, positions)."""
    return slice(call[0], call[1]), slice(call[2], call[3]), call[4], call[5]


# ---------------- block masks of the whole sequence ----------------

def _bm_offsets(g, nq, nk):
    """Byte offsets of the nine arrays of a mask of g rows of nq x nk blocks, and its bytes:
    jit/attention_block_mask.c's layout (each array 16-byte aligned, KilnBlockMaskArray order)."""
    elems = (g * nq, g * nq * nk, g * nq, g * nq * nk, g * nk, g * nq * nk, g * nk, g * nq * nk, g * nq * nk)
    offs, at = [], 0
    for e in elems:
        offs.append(at * 4)
        at += (e + 3) // 4 * 4
    return offs, at * 4


def _bm_lists(cls, want):
    """(counts [G, R], indices [G, R, C] ascending, the rest unspecified) of the blocks of class
    `want` in each row of cls [G, R, C]."""
    hit = cls == want
    col = torch.arange(cls.shape[-1], dtype=torch.int32, device=cls.device)
    key = torch.where(hit, col, col + cls.shape[-1])   # distinct keys: hits first, in order
    return hit.sum(-1, dtype=torch.int32), torch.argsort(key, dim=-1).to(torch.int32)


class _BlockMaskSlicer:
    """A kiln.BlockMask made for the whole sequence (seqlen_q = seqlen_k = the whole length, the
    call's causal flag), cut into the masks of the calls of a schedule. Every chunk must be a
    multiple of the mask's blocks, so a call's (query chunk, key range) is a block-aligned
    rectangle of the mask: its classes sliced, its lists rebuilt (_bm_lists). vis[qc][kc]:
    whether global query chunk qc sees any key of chunk kc (one host read per call)."""

    def __init__(self, bm, q, world, nchunks, causal):
        n = q.shape[2] * world
        if (bm.seqlen_q, bm.seqlen_k) != (n, n):
            raise ValueError(f"block_mask: made for {bm.seqlen_q} x {bm.seqlen_k}; the whole sequence is {n} tokens "
                             f"({q.shape[2]} per rank x {world} ranks)")
        if bool(bm.causal) != causal:
            raise ValueError(f"block_mask: made with causal={bool(bm.causal)}, the call is causal={causal}")
        if bm.data.device != q.device:
            raise ValueError(f"block_mask: on {bm.data.device}, the call on {q.device}")
        if bm.batch not in (1, q.shape[0]) or bm.heads not in (1, q.shape[1]):
            raise ValueError(f"block_mask: made for batch {bm.batch}, heads {bm.heads}; the call has {q.shape[0]}, "
                             f"{q.shape[1]} (1 broadcasts)")
        c = n // nchunks
        if c % bm.block_q or c % bm.block_kv:
            raise ValueError(f"block_mask: its blocks ({bm.block_q} x {bm.block_kv}) must divide the chunks of "
                             f"{c} tokens (whole sequence {n} in {nchunks} chunks)")
        self.bm, self.g = bm, bm.batch * bm.heads
        off = bm.meta[len(_A._BM_META) + 8]
        nq, nk = bm.num_q_blocks, bm.num_kv_blocks
        self.cls = bm.data[off:off + self.g * nq * nk * 4].view(torch.int32).view(self.g, nq, nk)
        cq, ck = c // bm.block_q, c // bm.block_kv
        self.vis = self.cls.view(self.g, nchunks, cq, nchunks, ck).ne(0).any(4).any(2).any(0).tolist()
        self._memo = {}

    def sub(self, qpos, ql, kpos, kl, causal):
        """(data, meta) of the call of ql queries at qpos against kl keys at kpos (causal: the
        call's flag, which the mask must carry; the whole mask's classes include causal)."""
        key = (qpos, ql, kpos, kl, causal)
        if key not in self._memo:
            bm = self.bm
            cls = self.cls[:, qpos // bm.block_q:(qpos + ql) // bm.block_q, kpos // bm.block_kv:(kpos + kl) // bm.block_kv]
            nq, nk = cls.shape[1], cls.shape[2]
            offs, total = _bm_offsets(self.g, nq, nk)
            data = torch.zeros(total, dtype=torch.uint8, device=cls.device)
            clsT = cls.transpose(1, 2)
            arrays = (*_bm_lists(cls, 1), *_bm_lists(cls, 2), *_bm_lists(clsT, 1), *_bm_lists(clsT, 2), cls)
            for o, a in zip(offs, arrays):
                data[o:o + a.numel() * 4].view(torch.int32).copy_(a.reshape(-1))
            meta = [bm.block_q, bm.block_kv, bm.batch, bm.heads, ql, kl, int(causal), nq, nk] + offs
            self._memo[key] = (data, meta)
        return self._memo[key]


# ---------------- the kernels of a step ----------------

class _Geom:
    """Where the sequence axis is: [b, h, s, d] tensors with LSE [b, h, s], or packed [t, h, d]
    ones with LSE [h, t] and the prefix sums every call of the shard's regions takes (cu, the
    int32 prefix sums of one chunk per sequence on the device, and their max length)."""

    def __init__(self, cu=None, max_len=0, lens=()):
        self.cu, self.max_len, self.lens = cu, max_len, list(lens)   # lens: each sequence's chunk
        self.ax, self.lax = (0, 1) if cu is not None else (2, 2)

    def sl(self, t, s):
        return t[(slice(None),) * self.ax + (s,)]

    def lsl(self, t, s):
        return t[(slice(None),) * self.lax + (s,)]

    def w(self, x):
        """A per-row weight (LSE-shaped) broadcast over the head dim of an output slice."""
        return x.t()[..., None] if self.cu is not None else x[..., None]

    def lse_shape(self, q):
        return (q.shape[1], q.shape[0]) if self.cu is not None else q.shape[:3]

    def seqs(self):
        return (self.cu, self.cu, self.max_len, self.max_len) if self.cu is not None else (None, None, 0, 0)


def _call_mask(call, bms):
    """(data, meta) of the call's slice of the whole-sequence mask (None, [] without one): its
    positions are its chunks' (_plan gives every call positions when there is a mask)."""
    qs, ks, causal, pos = call
    if bms is None:
        return None, []
    return bms.sub(pos[0], qs.stop - qs.start, pos[1], ks.stop - ks.start, causal)


def _seq(x):
    """A packed [c, h, d] run of one sequence as a fixed-length [1, h, c, d] view."""
    return x.transpose(0, 1)[None]


def _unseq(x):
    return x[0].transpose(0, 1)


def _fwd_call(q, k, v, call, scale, var, g, bms=None):
    qs, ks, causal, pos = call
    vid, vts = var
    if g.cu is not None and pos:   # one sequence of a packed batch at its positions (_plan_packed_var)
        o, l = _A._fwd_impl(_seq(q[qs]), _seq(k[ks]), _seq(v[ks]), None, None, 0, 0, causal, scale, False, vid, vts,
                            None, [], pos)
        return _unseq(o), l[0]
    return _A._fwd_impl(g.sl(q, qs), g.sl(k, ks), g.sl(v, ks), *g.seqs(), causal, scale, False, vid, vts,
                        *_call_mask(call, bms), pos)


def _bwd_call(dout, q, k, v, out, lse, call, scale, var, deterministic, g, bms=None):
    qs, ks, causal, pos = call
    vid, vts = var
    if g.cu is not None and pos:
        grads = _A._bwd_impl(_seq(dout[qs]), _seq(q[qs]), _seq(k[ks]), _seq(v[ks]), _seq(out[qs]), lse[None, :, qs],
                             None, None, 0, 0, causal, scale, deterministic, vid, vts, None, [], pos)
        return tuple(_unseq(t) for t in grads)
    return _A._bwd_impl(g.sl(dout, qs), g.sl(q, qs), g.sl(k, ks), g.sl(v, ks), g.sl(out, qs), g.lsl(lse, qs),
                        *g.seqs(), causal, scale, deterministic, vid, vts, *_call_mask(call, bms), pos)


def _merge(acc, acc_lse, qs, out, lse, g):
    """acc[qs], acc_lse[qs] <- the LSE-weighted merge with a partial result (fp32)."""
    a = g.lsl(acc_lse, qs)
    new = torch.logaddexp(a, lse)
    safe = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
    wa, wb = torch.exp(a - safe), torch.exp(lse - safe)
    part = g.sl(acc, qs)
    part.mul_(g.w(wa)).add_(out.float() * g.w(wb))
    a.copy_(new)


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

# What the schedules did in this process (tests and benchmarks read it; reset_stats() clears
# it): ring steps run and skipped (a step whose every call a causal mask, a window or a block
# mask hides), forward and backward, and the attention calls launched.
STATS = {"fwd_steps": 0, "fwd_skipped": 0, "bwd_steps": 0, "bwd_skipped": 0, "calls": 0}


def reset_stats():
    for key in STATS:
        STATS[key] = 0


def _step_calls(layout, rank, src, world, q, k, causal, var, g, bms=None):
    """The calls of the ring step that holds rank src's K/V, as slices."""
    window = _window_of(_A._variants.get(var[0])) if var[0] else None
    if g.cu is not None:
        qch, kch = _owned("zigzag", rank, world), _owned("zigzag", src, world)
        if var[0]:
            return _plan_packed_var(qch, kch, q.shape[0] // 2, g.lens, causal, window)
        return _plan_packed(qch, kch, q.shape[0] // 2, causal)
    qcs = _chunks(layout, rank, world, q.shape[2])
    kcs = _chunks(layout, src, world, k.shape[2])
    return [_slices(c) for c in _plan(qcs, kcs, causal, var[0] != 0, src == rank, window,
                                      bms.vis if bms is not None else None)]


def _counted_step_calls(kind, layout, rank, src, world, q, k, causal, var, g, bms):
    """_step_calls, counted in STATS under kind ("fwd" or "bwd"): the step, whether the mask hid
    it (no call), and its calls."""
    calls = _step_calls(layout, rank, src, world, q, k, causal, var, g, bms)
    STATS[kind + "_steps"] += 1
    STATS[kind + "_skipped"] += not calls
    STATS["calls"] += len(calls)
    return calls


def _ring_fwd(q, k, v, causal, scale, var, group, layout, g, bms=None):
    ring = _Ring(group, q.device)
    world, rank = ring.world, ring.rank
    acc = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    acc_lse = torch.full(g.lse_shape(q), float("-inf"), dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v])
    for t in range(world):
        handle = ring.start(kv) if t + 1 < world else None
        src = (rank - t) % world
        calls = _counted_step_calls("fwd", layout, rank, src, world, q, k, causal, var, g, bms)
        for call in calls:   # a hidden step: no kernel, nothing merged
            o, l = _fwd_call(q, kv[0], kv[1], call, scale, var, g, bms)
            _merge(acc, acc_lse, call[0], o, l, g)
        if handle is not None:
            kv = ring.finish(handle)
    return acc.to(q.dtype), acc_lse


def _ring_bwd(dout, q, k, v, out, lse, causal, scale, var, group, layout, deterministic, g, bms=None):
    ring = _Ring(group, q.device)
    world, rank = ring.world, ring.rank
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = torch.stack([k, v])
    dkv_handle = None
    for t in range(world):
        handle = ring.start(kv) if t + 1 < world else None
        src = (rank - t) % world
        calls = _counted_step_calls("bwd", layout, rank, src, world, q, k, causal, var, g, bms)
        dkv = torch.zeros(kv.shape, dtype=torch.float32, device=q.device) if calls else None
        for call in calls:
            gq, gk, gv = _bwd_call(dout, q, kv[0], kv[1], out, lse, call, scale, var, deterministic, g, bms)
            g.sl(dq, call[0]).add_(gq)
            g.sl(dkv[0], call[1]).add_(gk)
            g.sl(dkv[1], call[1]).add_(gv)
        if dkv_handle is not None:   # the partials of the previous ranks for this K/V shard
            recv = ring.finish(dkv_handle)
            dkv = recv if dkv is None else dkv.add_(recv)   # a hidden step passes them on as they came
        if dkv is None:   # a hidden first step: this shard's partials start at zero
            dkv = torch.zeros(kv.shape, dtype=torch.float32, device=q.device)
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


def _ag_calls(qcs, sk, causal, bm_vis=None):
    """One call per query chunk against the keys it may see (causal: up to its last position,
    so the diagonal is the kernel's own); with a block mask, from its first to its last visible
    key chunk, and none where it sees no key."""
    calls = []
    for q0, ql, qp in qcs:
        k0, k1 = 0, min(sk, qp + ql) if causal else sk
        if bm_vis is not None:
            seen = [i for i, v in enumerate(bm_vis[qp // ql]) if v and i * ql < k1]
            if not seen:
                continue
            k0, k1 = seen[0] * ql, min(k1, (seen[-1] + 1) * ql)
        calls.append((q0, q0 + ql, k0, k1, causal, [qp, k0]))
    return calls


def _ag_fwd(q, k, v, causal, scale, var, group, layout, g, bms=None):
    world, rank = _world(group)
    kv = _gather_kv(k, v, group, layout)
    qcs = _chunks(layout, rank, world, q.shape[2])
    out = torch.zeros_like(q)   # rows of a chunk a block mask hides entirely: 0, LSE -inf
    lse = torch.full(q.shape[:3], float("-inf"), dtype=torch.float32, device=q.device)
    calls = _ag_calls(qcs, kv.shape[3], causal, bms.vis if bms is not None else None)
    STATS["calls"] += len(calls)
    for call in calls:
        o, l = _fwd_call(q, kv[0], kv[1], _slices(call), scale, var, g, bms)
        out[:, :, call[0]:call[1]] = o
        lse[:, :, call[0]:call[1]] = l
    return out, lse


def _ag_bwd(dout, q, k, v, out, lse, causal, scale, var, group, layout, deterministic, g, bms=None):
    world, rank = _world(group)
    kv = _gather_kv(k, v, group, layout)
    qcs = _chunks(layout, rank, world, q.shape[2])
    dq = torch.zeros_like(q)
    dkv = torch.zeros(kv.shape, dtype=torch.float32, device=q.device)
    calls = _ag_calls(qcs, kv.shape[3], causal, bms.vis if bms is not None else None)
    STATS["calls"] += len(calls)
    for call in calls:
        gq, gk, gv = _bwd_call(dout, q, kv[0], kv[1], out, lse, _slices(call), scale, var, deterministic, g, bms)
        dq[:, :, call[0]:call[1]] = gq
        dkv[0, :, :, call[2]:call[3]] += gk
        dkv[1, :, :, call[2]:call[3]] += gv
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
    def forward(ctx, q, k, v, causal, scale, variant, group, layout, use_ring, deterministic, g, bms):
        var = _A._variant_args(variant, q.device)
        fwd = _ring_fwd if use_ring else _ag_fwd
        out, lse = fwd(q, k, v, causal, scale, var, group, layout, g, bms)
        ctx.save_for_backward(q, k, v, out, lse, *var[1])
        # bms: the mask's slices, made in the forward, reused by the backward's same calls
        ctx.args = (causal, scale, variant, group, layout, use_ring, deterministic, var[0], g, bms)
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse, *vts = ctx.saved_tensors
        causal, scale, variant, group, layout, use_ring, deterministic, vid, g, bms = ctx.args
        bwd = _ring_bwd if use_ring else _ag_bwd
        dq, dk, dv = bwd(dout.contiguous(), q, k, v, out, lse, causal, scale, (vid, vts), group, layout,
                         deterministic, g, bms)
        return dq, dk, dv, None, None, None, None, None, None, None, None, None


def use_ring(seqlen_local, mode="auto"):
    """Whether a call with seqlen_local tokens per rank runs the ring (else all-gather): mode
    "ring" / "allgather" force one, "auto" is the documented rule (ALLGATHER_MAX_TOKENS)."""
    if mode not in ("auto", "ring", "allgather"):
        raise ValueError(f"mode: want 'auto', 'ring' or 'allgather', got {mode!r}")
    return mode == "ring" or (mode == "auto" and seqlen_local >= ALLGATHER_MAX_TOKENS)


def attention(q, k, v, causal=False, scale=None, variant=None, group=None, layout="zigzag", mode="auto",
              return_lse=False, deterministic=False, block_mask=None):
    """Context-parallel softmax(scale * q k^T) v over `group` (None: the default group): q, k, v
    are this rank's shards ([batch, heads, seq_local, head_dim], made by shard() with `layout`),
    the result is this rank's shard of the output (and with return_lse its log-sum-exp [b, h,
    seq_local], fp32, not differentiated). causal: in whole-sequence positions (top-left, the
    whole problem being self-attention); variant: a kiln.Variant whose hooks see whole-sequence
    positions. block_mask: a kiln.BlockMask of the WHOLE sequence (kiln.create_block_mask with
    Q_LEN = KV_LEN = the whole length, this call's causal flag, normally from `variant`; on q's
    device, every rank the same; its blocks dividing the layout's chunks): each call runs with
    its slice, and ring steps (all-gather chunks) it hides entirely are skipped. mode: 'auto'
    (use_ring's rule), 'ring' or 'allgather'. Differentiable in q, k, v."""
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
    bms = None
    if block_mask is not None:
        if not isinstance(block_mask, _A.BlockMask):
            raise TypeError(f"block_mask: want a kiln.BlockMask or None, got {type(block_mask).__name__}")
        world, _ = _world(group)
        bms = _BlockMaskSlicer(block_mask, q, world, _nchunks(layout, world), bool(causal))
    q, k, v = (t.contiguous() for t in (q, k, v))
    out, lse = _ContextParallel.apply(q, k, v, bool(causal), _A._scale(scale, q.shape[-1]), variant, group,
                                      layout, ring, bool(deterministic), _Geom(), bms)
    return (out, lse) if return_lse else out


# ---------------- packed variable-length batches ----------------
#
# The sequences of a packed batch (cu_seqlens: their int32 prefix sums, the whole batch's) are
# each cut into 2W equal chunks; rank r's shard is [A, B]: A the chunks r of every sequence, one
# after another, B the chunks 2W-1-r. Every region of every rank then has the same per-sequence
# lengths (L_b / 2W), so each ring step is a few varlen calls over whole regions (_plan_packed).

def _half_lengths(cu_seqlens, world):
    lens = [b - a for a, b in zip(cu_seqlens.tolist(), cu_seqlens.tolist()[1:])]
    bad = [n for n in lens if n % (2 * world)]
    if bad:
        raise ValueError(f"cu_seqlens: sequence lengths {bad[:4]} are no multiples of {2 * world} (2 x ranks)")
    return [n // (2 * world) for n in lens]


def shard_varlen(x, cu_seqlens, group=None):
    """This rank's shard [A, B] of a packed [total, ...] tensor (see above)."""
    world, rank = _world(group)
    c = _half_lengths(cu_seqlens, world)
    starts = cu_seqlens.tolist()
    own = _owned("zigzag", rank, world)
    return torch.cat([x[s + i * n:s + (i + 1) * n] for i in own for s, n in zip(starts, c)]).contiguous()


def unshard_varlen(x, cu_seqlens, group=None):
    """The packed tensor from every rank's shard (all_gather; not differentiable)."""
    world, _ = _world(group)
    c = _half_lengths(cu_seqlens, world)
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous(), group=group)
    pieces = [[None] * (2 * world) for _ in c]
    for r, p in enumerate(parts):
        regions = p.chunk(2)
        for region, chunk in zip(regions, _owned("zigzag", r, world)):
            for b, piece in enumerate(region.split(c)):
                pieces[b][chunk] = piece
    return torch.cat([t for seq in pieces for t in seq])


def attention_varlen(q, k, v, cu_seqlens, causal=False, scale=None, group=None, return_lse=False,
                     deterministic=False, variant=None):
    """Context-parallel attention of a packed batch: q [t_local, h_q, d], k, v [t_local, h_kv, d]
    this rank's shards (shard_varlen), cu_seqlens the WHOLE batch's int32 prefix sums (every
    length a multiple of 2 x ranks; read on the host once per call). Each sequence attends to
    itself only; causal within it. The ring schedule, zigzag. variant: a kiln.Variant whose hooks
    see each token's position in its own sequence (q_idx, kv_idx) and b = 0: with a variant every
    sequence runs its own calls (_plan_packed_var). Returns this rank's output shard (and its LSE
    [h_q, t_local])."""
    _A._check_qkv(q, k, v, 3, "[tokens_local, heads, head_dim]")
    world, _ = _world(group)
    c = _half_lengths(cu_seqlens, world)
    if q.shape[0] != 2 * sum(c) or k.shape[0] != q.shape[0] or v.shape != k.shape:
        raise ValueError(f"q, k, v: want {2 * sum(c)} tokens each (the shard of cu_seqlens' batch), got "
                         f"{q.shape[0]}, {k.shape[0]}, {v.shape[0]}")
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"k: {k.shape[1]} heads do not divide q's {q.shape[1]}")
    cu = torch.tensor([0] + list(_cumsum(c)), dtype=torch.int32, device=q.device)
    q, k, v = (t.contiguous() for t in (q, k, v))
    out, lse = _ContextParallel.apply(q, k, v, bool(causal), _A._scale(scale, q.shape[-1]), variant, group,
                                      "zigzag", True, bool(deterministic), _Geom(cu, max(c, default=0), c), None)
    return (out, lse) if return_lse else out


def _cumsum(xs):
    t = 0
    for x in xs:
        t += x
        yield t
