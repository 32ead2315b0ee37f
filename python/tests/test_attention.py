"""kiln.attention and the flash-attn drop-ins against float64 references, on the CPU interpreter
(and the GPU when there is one): forward, backward (against float64 autograd), packed varlen
batches, decoding against contiguous and paged caches, variants with tensor and scalar
params, block masks, the errors, torch.library.opcheck on every op, torch.compile(fullgraph=True)
against eager, and CUDA-graph capture (GPU only).

Inputs are random (never zeros), lengths are not multiples of the 64-row tiles, outputs come
from fresh allocations that the ops fill (a missed element would be uninitialised memory).
"""
import math

import pytest
import torch

import kiln
from conftest import DEVICES, close, cuda_only, rand, ref_attention

TOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def grad_tol(ref, dtype):
    return (1e-2 if dtype == torch.float16 else 5e-2) * ref.abs().max().item() + 1e-3


def qkv(b, hq, hkv, sq, sk, d, dtype, device, seed=0):
    return (rand(b, hq, sq, d, dtype=dtype, device=device, seed=seed),
            rand(b, hkv, sk, d, dtype=dtype, device=device, seed=seed + 1),
            rand(b, hkv, sk, d, dtype=dtype, device=device, seed=seed + 2))


# ---------------- forward ----------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 2, 70, 93, 64), (1, 2, 2, 33, 17, 32), (1, 3, 1, 65, 130, 128)])
def test_forward_matches_float64(device, dtype, causal, shape):
    b, hq, hkv, sq, sk, d = shape
    q, k, v = qkv(b, hq, hkv, sq, sk, d, dtype, device)
    out, lse = kiln.attention(q, k, v, causal=causal, return_lse=True)
    assert out.shape == q.shape and out.dtype == dtype and lse.shape == (b, hq, sq)
    close(out, ref_attention(q, k, v, causal=causal), TOL[dtype])


def test_forward_any_strides(device):
    """[b, s, h, d] memory seen as [b, h, s, d] (no copy) and a padded head dim row."""
    base = rand(2, 50, 4, 72, device=device, seed=3)
    q = base[..., :64].transpose(1, 2)       # strides (50*4*72, 72, 4*72, 1): padded rows
    k = rand(2, 61, 2, 64, device=device, seed=4).transpose(1, 2)
    v = rand(2, 61, 2, 64, device=device, seed=5).transpose(1, 2)
    out = kiln.attention(q, k, v, scale=0.3)
    close(out, ref_attention(q, k, v, scale=0.3), TOL[torch.float16])


def test_flash_attn_func_layout(device):
    q = rand(2, 45, 4, 64, device=device, seed=6)
    k = rand(2, 77, 2, 64, device=device, seed=7)
    v = rand(2, 77, 2, 64, device=device, seed=8)
    out, lse, _ = kiln.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (2, 4, 45)
    ref = ref_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True).transpose(1, 2)
    close(out, ref, TOL[torch.float16])


# ---------------- backward ----------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_backward_matches_float64_autograd(device, causal, deterministic, dtype):
    b, hq, hkv, sq, sk, d = 2, 4, 2, 70, 93, 64
    q, k, v = (t.requires_grad_() for t in qkv(b, hq, hkv, sq, sk, d, dtype, device, seed=10))
    dout = rand(b, hq, sq, d, dtype=dtype, device=device, seed=20)
    kiln.attention(q, k, v, causal=causal, deterministic=deterministic).backward(dout)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref_attention(q64, k64, v64, causal=causal).backward(dout.double())
    for name, got, ref in (("dq", q.grad, q64.grad), ("dk", k.grad, k64.grad), ("dv", v.grad, v64.grad)):
        assert got.shape == ref.shape, name
        close(got, ref, grad_tol(ref, dtype))


def test_backward_deterministic_is_bitwise_repeatable(device):
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 2, 50, 70, 64, torch.float16, device, seed=30))
    dout = rand(1, 2, 50, 64, device=device, seed=31)
    grads = []
    for _ in range(2):
        q.grad = k.grad = v.grad = None
        kiln.attention(q, k, v, causal=True, deterministic=True).backward(dout)
        grads.append((q.grad.clone(), k.grad.clone(), v.grad.clone()))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


# ---------------- packed varlen ----------------

def test_varlen_forward_and_backward(device):
    lens_q, lens_k = [37, 1, 70], [50, 20, 70]
    hq, hkv, d = 4, 2, 64
    cu_q = torch.tensor([0] + list(torch.tensor(lens_q).cumsum(0)), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(torch.tensor(lens_k).cumsum(0)), dtype=torch.int32, device=device)
    q = rand(sum(lens_q), hq, d, device=device, seed=40).requires_grad_()
    k = rand(sum(lens_k), hkv, d, device=device, seed=41).requires_grad_()
    v = rand(sum(lens_k), hkv, d, device=device, seed=42).requires_grad_()
    out = kiln.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True)
    dout = rand(*out.shape, device=device, seed=43)
    out.backward(dout)
    for i in range(3):
        a, e = int(cu_q[i]), int(cu_q[i + 1])
        ka, ke = int(cu_k[i]), int(cu_k[i + 1])
        qs, ks, vs = (t.detach()[x:y].transpose(0, 1)[None].double().requires_grad_()
                      for t, x, y in ((q, a, e), (k, ka, ke), (v, ka, ke)))
        ref = ref_attention(qs, ks, vs, causal=True)
        close(out[a:e].transpose(0, 1)[None], ref, TOL[torch.float16])
        ref.backward(dout[a:e].transpose(0, 1)[None].double())
        close(q.grad[a:e].transpose(0, 1)[None], qs.grad, grad_tol(qs.grad, torch.float16))
        close(k.grad[ka:ke].transpose(0, 1)[None], ks.grad, grad_tol(ks.grad, torch.float16))
        close(v.grad[ka:ke].transpose(0, 1)[None], vs.grad, grad_tol(vs.grad, torch.float16))


# ---------------- decoding ----------------

def _decode_ref(q, kc, vc, lens, causal):
    outs = []
    for b, n in enumerate(lens):
        outs.append(ref_attention(q[b:b + 1].transpose(1, 2), kc[b:b + 1, :n].transpose(1, 2),
                                  vc[b:b + 1, :n].transpose(1, 2), causal=causal).transpose(1, 2))
    return torch.cat(outs)


@pytest.mark.parametrize("paged", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_decode_with_append(device, paged, causal):
    bsz, cap, hq, hkv, d, new = 3, 130, 4, 2, 64, 2
    lens = [100, 30, 5]                        # keys before the new tokens
    kc = rand(bsz, cap, hkv, d, device=device, seed=50)
    vc = rand(bsz, cap, hkv, d, device=device, seed=51)
    knew, vnew = rand(bsz, new, hkv, d, device=device, seed=52), rand(bsz, new, hkv, d, device=device, seed=53)
    q = rand(bsz, new, hq, d, device=device, seed=54)
    seqlens = torch.tensor(lens, dtype=torch.int32, device=device)
    full_k, full_v = kc.clone(), vc.clone()
    for b, n in enumerate(lens):
        full_k[b, n:n + new], full_v[b, n:n + new] = knew[b], vnew[b]
    if paged:
        page = 32
        pages_per = math.ceil(cap / page)
        perm = torch.randperm(bsz * pages_per, generator=torch.Generator().manual_seed(5))
        table = perm.view(bsz, pages_per).to(torch.int32).to(device)
        kp = torch.empty(bsz * pages_per, page, hkv, d, dtype=kc.dtype, device=device)
        vp = torch.empty_like(kp)
        padded = torch.zeros(bsz, pages_per * page, hkv, d, dtype=kc.dtype, device=device)
        for src, dst in ((kc, kp), (vc, vp)):
            padded.zero_()
            padded[:, :cap] = src
            dst[table.long().flatten()] = padded.view(bsz * pages_per, page, hkv, d)
        out, lse = kiln.flash_attn_with_kvcache(q, kp, vp, k=knew, v=vnew, cache_seqlens=seqlens, block_table=table,
                                                causal=causal, return_softmax_lse=True)
        got_k = kp[table.long()].view(bsz, pages_per * page, hkv, d)[:, :cap]
        assert torch.equal(got_k, full_k), "the new keys were not appended to the paged cache"
    else:
        out, lse = kiln.flash_attn_with_kvcache(q, kc, vc, k=knew, v=vnew, cache_seqlens=seqlens, causal=causal,
                                                return_softmax_lse=True)
        assert torch.equal(kc, full_k) and torch.equal(vc, full_v), "the new keys were not appended"
    assert out.shape == q.shape and lse.shape == (bsz, hq, new)
    close(out, _decode_ref(q, full_k, full_v, [n + new for n in lens], causal), TOL[torch.float16])


# ---------------- variants and block masks ----------------

def test_variant_with_a_tensor_param(device):
    """ALiBi: a [heads] f32 tensor param, forward and backward."""
    b, hq, sq, sk, d = 1, 4, 40, 57, 64
    q, k, v = (t.requires_grad_() for t in qkv(b, hq, hq, sq, sk, d, torch.float16, device, seed=60))
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / hq) for h in range(hq)], device=device)
    var = kiln.Variant("alibi", alibi_slopes=slopes)
    out = kiln.attention(q, k, v, variant=var)
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    bias = -slopes.double()[:, None, None] * (i - j).abs().double()

    def mod(s):
        return s + bias
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = ref_attention(q64, k64, v64, score_mod=mod)
    close(out, ref, TOL[torch.float16])
    plain = ref_attention(q64, k64, v64)
    assert (out.double() - plain).abs().max() > 10 * TOL[torch.float16], "the variant changed nothing"
    dout = rand(*out.shape, device=device, seed=61)
    out.backward(dout)
    ref.backward(dout.double())
    close(q.grad, q64.grad, grad_tol(q64.grad, torch.float16))
    close(k.grad, k64.grad, grad_tol(k64.grad, torch.float16))


COMPOSED = """
import "attention";
import "variants/softcap" as cap;
import "variants/alibi" as alibi;
import "variants/sliding_window" as win;
import "variants/prefix_lm" as pre;
fn score_mod(s, b, h, q_idx, kv_idx) { return compose_scores(cap_score_mod, alibi_score_mod, s, b, h, q_idx, kv_idx); }
fn mask_mod(b, h, q_idx, kv_idx) { return or_masks(win_mask_mod, pre_mask_mod, b, h, q_idx, kv_idx); }
fn kv_start(start_m, block_m, seqlen_q, seqlen_k) {
    return or_kv_starts(win_kv_start, kv_start_all, start_m, block_m, seqlen_q, seqlen_k);
}
"""


def test_composed_variants(device):
    """Two shipped score_mods applied in order (soft-cap, then ALiBi) and two masks under or
    (a sliding window, a prefix-LM), each variant imported under an alias: forward and
    backward against float64 autograd on the materialised scores."""
    b, hq, n, d, cap, left, right, prefix = 1, 4, 70, 64, 1.5, 9, 2, 11
    q, k, v = (t.requires_grad_() for t in qkv(b, hq, 2, n, n, d, torch.float16, device, seed=80))
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / hq) for h in range(hq)], device=device)
    var = kiln.Variant(COMPOSED, softcap=cap, alibi_slopes=slopes, window_left=left, window_right=right,
                       prefix_len=prefix)
    out = kiln.attention(q, k, v, variant=var)
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    bias = -slopes.double()[:, None, None] * (i - j).abs().double()
    mask = ((j >= i - left) & (j <= i + right)) | (j <= i) | (j < prefix)

    def mod(s):
        return cap * torch.tanh(s / cap) + bias
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = ref_attention(q64, k64, v64, score_mod=mod, mask=mask)
    close(out, ref, TOL[torch.float16])
    swapped = ref_attention(q64, k64, v64, score_mod=lambda s: cap * torch.tanh((s + bias) / cap), mask=mask)
    assert (out.double() - swapped).abs().max() > 10 * TOL[torch.float16], "the score_mods ran in the other order"
    dout = rand(*out.shape, device=device, seed=81)
    out.backward(dout)
    ref.backward(dout.double())
    close(q.grad, q64.grad, grad_tol(q64.grad, torch.float16))
    close(k.grad, k64.grad, grad_tol(k64.grad, torch.float16))
    close(v.grad, v64.grad, grad_tol(v64.grad, torch.float16))


def test_flash_attn_softcap_and_window(device):
    q = rand(1, 50, 2, 64, device=device, seed=70, scale=3.0)
    k = rand(1, 50, 2, 64, device=device, seed=71, scale=3.0)
    v = rand(1, 50, 2, 64, device=device, seed=72)
    t = (lambda x: x.transpose(1, 2))
    out = kiln.flash_attn_func(q, k, v, softcap=2.0)
    close(out, t(ref_attention(t(q), t(k), t(v), score_mod=lambda s: 2.0 * torch.tanh(s / 2.0))), TOL[torch.float16])
    out = kiln.flash_attn_func(q, k, v, window_size=(5, 0))
    i = torch.arange(50, device=device)[:, None]
    j = torch.arange(50, device=device)[None, :]
    close(out, t(ref_attention(t(q), t(k), t(v), mask=(j <= i) & (j >= i - 5))), TOL[torch.float16])


def test_block_mask(device):
    q, k, v = qkv(2, 2, 2, 150, 150, 64, torch.float16, device, seed=80)
    var = kiln.Variant("sliding_window", window_left=40, window_right=0)
    bm = kiln.create_block_mask(var, None, None, 150, 150, device=device, BLOCK_SIZE=32)
    assert bm.seqlen_q == 150 and bm.block_q == 32
    out = kiln.attention(q, k, v, variant=var, block_mask=bm)
    i = torch.arange(150, device=device)[:, None]
    j = torch.arange(150, device=device)[None, :]
    close(out, ref_attention(q, k, v, mask=(j <= i) & (j >= i - 40)), TOL[torch.float16])
    # the backward through autograd takes the mask too (the op's block-mask inputs get no gradient)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    dout = rand(*q.shape, device=device, seed=81)
    kiln.attention(qg, kg, vg, variant=var, block_mask=bm).backward(dout)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref_attention(q64, k64, v64, mask=(j <= i) & (j >= i - 40)).backward(dout.double())
    for got, want in ((qg.grad, q64.grad), (kg.grad, k64.grad), (vg.grad, v64.grad)):
        assert (got.double() - want).abs().max().item() <= 1e-2 * want.abs().max().item() + 1e-3
    with pytest.raises(ValueError, match="block_mask"):
        kiln.attention(q[:, :, :100], k, v, variant=var, block_mask=bm)


# ---------------- errors ----------------

def test_errors_name_the_argument():
    q, k, v = qkv(1, 2, 2, 16, 16, 64, torch.float16, "cpu")
    with pytest.raises(TypeError, match="q: dtype"):
        kiln.attention(q.float(), k, v)
    with pytest.raises(ValueError, match="k: 3 heads"):
        kiln.attention(torch.cat([q, q], 1), torch.cat([k, k[:, :1]], 1), torch.cat([v, v[:, :1]], 1))
    with pytest.raises(ValueError, match="q: want a 4-D"):
        kiln.attention(q[0], k, v)
    with pytest.raises(NotImplementedError, match="head dim 48"):
        kiln.attention(q[..., :48], k[..., :48], v[..., :48])
    with pytest.raises(NotImplementedError, match="dropout"):
        kiln.flash_attn_func(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match="'slopes' is not a param"):
        kiln.Variant("alibi", slopes=torch.ones(2))
    with pytest.raises(TypeError, match="alibi_slopes"):
        kiln.Variant("alibi", alibi_slopes=torch.ones(2, dtype=torch.float16))


def test_compile_error_carries_the_diagnostics():
    bad = kiln.Variant('import "attention";\nfn score_mod(s, b, h, q_idx, kv_idx) { return s + nope; }\n')
    q, k, v = qkv(1, 1, 1, 16, 16, 64, torch.float16, "cpu")
    with pytest.raises(kiln.CompileError) as e:
        kiln.attention(q, k, v, variant=bad)
    assert "<variant>:2:" in str(e.value) and "nope" in str(e.value) and "^" in str(e.value)


# ---------------- torch.library and torch.compile ----------------

def _opcheck(op, args):
    torch.library.opcheck(op, args, test_utils=("test_schema", "test_autograd_registration", "test_faketensor",
                                                "test_aot_dispatch_dynamic"))


def test_opcheck_every_op(device):
    q, k, v = (t.requires_grad_() for t in qkv(1, 4, 2, 20, 30, 64, torch.float16, device, seed=90))
    _opcheck(torch.ops.kiln.fwd.default, (q, k, v, None, None, 0, 0, True, 0.125, False, 0, [], None, [], []))
    out, lse = torch.ops.kiln.fwd(q, k, v, None, None, 0, 0, True, 0.125, False, 0, [], None, [], [])
    dout = rand(*out.shape, device=device, seed=91)
    _opcheck(torch.ops.kiln.bwd.default, (dout, q.detach(), k.detach(), v.detach(), out.detach(), lse.detach(),
                                          None, None, 0, 0, True, 0.125, True, 0, [], None, [], []))
    qd = rand(2, 1, 4, 64, device=device, seed=92)
    kc, vc = rand(2, 40, 2, 64, device=device, seed=93), rand(2, 40, 2, 64, device=device, seed=94)
    lens = torch.tensor([40, 7], dtype=torch.int32, device=device)
    _opcheck(torch.ops.kiln.decode.default, (qd, kc, vc, lens, None, False, 0.125, 0, 0, []))
    slopes = torch.rand(4, device=device) + 0.1
    var = kiln.Variant("alibi", alibi_slopes=slopes)
    _opcheck(torch.ops.kiln.fwd.default,
             (q, k, v, None, None, 0, 0, False, 0.125, False, var.id, [slopes], None, [], []))
    # whole-sequence positions: a shard of queries at 30 against keys at 10
    _opcheck(torch.ops.kiln.fwd.default, (q, k, v, None, None, 0, 0, True, 0.125, False, 0, [], None, [], [30, 10]))


class Block(torch.nn.Module):
    def __init__(self, dim=128, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim, dtype=torch.float16)
        self.proj = torch.nn.Linear(dim, dim, dtype=torch.float16)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        y = kiln.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, s, dim))


def test_torch_compile_fullgraph_matches_eager():
    torch.manual_seed(0)
    block = Block()
    x = rand(2, 37, 128, seed=100).requires_grad_()
    eager = block(x)
    eager.float().square().sum().backward()
    g_eager = x.grad.clone()
    x.grad = None
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    got.float().square().sum().backward()
    assert torch.equal(got, eager)
    close(x.grad, g_eager, 1e-3 * g_eager.abs().max().item() + 1e-4)


# ---------------- CUDA graphs (GPU only) ----------------

@cuda_only
def test_cuda_graph_capture_forward_backward_decode():
    q, k, v = (t.requires_grad_() for t in qkv(2, 4, 2, 200, 300, 64, torch.float16, "cuda", seed=110))
    dout = rand(2, 4, 200, 64, device="cuda", seed=111)
    qd = rand(2, 1, 4, 64, device="cuda", seed=112)
    kc, vc = rand(2, 4000, 2, 64, device="cuda", seed=113), rand(2, 4000, 2, 64, device="cuda", seed=114)
    lens = torch.tensor([4000, 1234], dtype=torch.int32, device="cuda")

    def step():
        q.grad = k.grad = v.grad = None
        out = kiln.attention(q, k, v, causal=True)
        out.backward(dout)
        dec = kiln.flash_attn_with_kvcache(qd, kc, vc, cache_seqlens=lens)
        return out, dec

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            want = [t.detach().clone() for t in step()] + [q.grad.clone(), k.grad.clone()]
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, dec = step()          # out, dec, q.grad, k.grad: the graph's static outputs
    for t in (out, dec, q.grad, k.grad):
        t.fill_(float("nan"))      # poisoned: only the replay can fill them again
    g.replay()
    torch.cuda.synchronize()
    close(out, want[0], 0)
    close(dec, want[1], 0)
    close(q.grad, want[2], 1e-3 * want[2].abs().max().item())   # the dQ's atomics may reorder
    close(k.grad, want[3], 0)
    ref = ref_attention(q.detach(), k.detach(), v.detach(), causal=True)
    close(out, ref, TOL[torch.float16])


@cuda_only
def test_torch_compile_reduce_overhead_matches_eager():
    """torch.compile's CUDA graphs (mode="reduce-overhead") around the ops."""
    torch.manual_seed(0)
    block = Block().cuda()
    x = rand(2, 300, 128, device="cuda", seed=120)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):            # warm-up runs, then graph replays
            got = compiled(x)
    torch.cuda.synchronize()
    close(got, eager, 1e-3)
