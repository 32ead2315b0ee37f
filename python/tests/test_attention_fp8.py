"""kiln.attention_fp8: the FP8 forward (torch.float8_e4m3fn Q, K, V with descales) against a
float64 reference on the dequantised values, on the CPU interpreter (and the GPU when there is
one, sm_89+): per-tensor and per-head descales, GQA, causal with seqlen_q != seqlen_k, bf16 out,
a variant (soft-capping, which must matter); the errors. The rule: relative RMSE within 0.03
(P is quantised to e4m3: 3 mantissa bits) and the LSE within 1e-4."""
import math

import pytest
import torch

import kiln
from conftest import DEVICES, rand, ref_attention

FP8 = getattr(torch, "float8_e4m3fn", None)
pytestmark = pytest.mark.skipif(FP8 is None, reason="torch without float8_e4m3fn")


def quantise(x, per_head):
    """codes (float8_e4m3fn) and float32 descales: amax / 448 per tensor or per (batch, head)."""
    amax = x.abs().amax(dim=(2, 3)) if per_head else x.abs().amax().reshape(1)
    ds = (amax / 448).float()
    scale = ds[:, :, None, None] if per_head else ds
    return (x / scale).to(FP8), ds


def dequant(q8, ds, per_head):
    return q8.double() * (ds[:, :, None, None] if per_head else ds).double()


def devices_fp8():
    out = ["cpu"]
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        out.append("cuda")
    return out


@pytest.mark.parametrize("device", devices_fp8())
@pytest.mark.parametrize("per_head,causal,out_dtype,shape", [
    (False, False, torch.float16, (1, 4, 2, 50, 70, 64)),
    (True, True, torch.bfloat16, (2, 2, 2, 37, 61, 32)),
    (True, False, torch.float16, (1, 2, 1, 33, 40, 128)),
])
def test_fp8_forward_matches_float64(device, per_head, causal, out_dtype, shape):
    b, hq, hkv, sq, sk, d = shape
    x = [rand(b, h, s, d, dtype=torch.float64, seed=i, scale=3.0) for i, (h, s) in
         enumerate(((hq, sq), (hkv, sk), (hkv, sk)))]
    (q8, qd), (k8, kd), (v8, vd) = (quantise(t, per_head) for t in x)
    o, lse = kiln.attention_fp8(q8.to(device), k8.to(device), v8.to(device), qd.to(device), kd.to(device),
                                vd.to(device), causal=causal, out_dtype=out_dtype, return_lse=True)
    assert o.dtype == out_dtype and o.shape == (b, hq, sq, d)
    qr, kr, vr = dequant(q8, qd, per_head), dequant(k8, kd, per_head), dequant(v8, vd, per_head)
    ref = ref_attention(qr, kr, vr, causal=causal)
    err = (o.cpu().double() - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()
    assert err < 0.03, f"relative RMSE {err:.3g}"
    g = hq // hkv
    s = qr @ kr.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(sq, sk, dtype=torch.bool).tril(sk - sq), float("-inf"))
    lse_ref = torch.logsumexp(s, dim=-1)
    seen = torch.isfinite(lse_ref)
    assert torch.allclose(lse.cpu().double()[seen], lse_ref[seen], rtol=1e-4, atol=1e-4)


def test_fp8_variant_softcap():
    b, hq, hkv, sq, sk, d = 1, 2, 2, 45, 45, 64
    x = [rand(b, hq, s, d, dtype=torch.float64, seed=10 + i, scale=3.0) for i, s in enumerate((sq, sk, sk))]
    (q8, qd), (k8, kd), (v8, vd) = (quantise(t, True) for t in x)
    cap = 2.0
    o = kiln.attention_fp8(q8, k8, v8, qd, kd, vd, variant=kiln.Variant("softcap", softcap=cap))
    qr, kr, vr = dequant(q8, qd, True), dequant(k8, kd, True), dequant(v8, vd, True)
    ref = ref_attention(qr, kr, vr, score_mod=lambda s: cap * torch.tanh(s / cap))
    plain = ref_attention(qr, kr, vr)
    rel = lambda a: ((a - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()   # noqa: E731
    assert rel(o.double()) < 0.03 and rel(plain) > 3 * rel(o.double())


def test_fp8_errors():
    q = rand(1, 2, 20, 32, dtype=torch.float32).to(FP8)
    one = torch.ones(1)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        kiln.attention_fp8(q.float(), q, q, one, one, one)
    with pytest.raises(TypeError, match="out_dtype"):
        kiln.attention_fp8(q, q, q, one, one, one, out_dtype=torch.float32)
    with pytest.raises(ValueError, match="per head"):
        kiln.attention_fp8(q, q, q, torch.ones(2), one, one)
