#!/usr/bin/env python3
"""bench_param_grads.py — learnable biases (issue 28, section 1): the backward with the gradient
of a T5 bucketed bias table and of ALiBi's per-head slopes, Kiln against FlexAttention, on one GPU.

Kiln: kiln.attention with the shipped variant (relative_bias: rel_bias [H, 32]; alibi:
alibi_slopes [H]) whose tensor requires grad (`param X: *f32 differentiable;`): its backward
returns the gradient, reduced in a fixed order. Flex: torch.compile(flex_attention) with the same
bias as a score_mod that captures the tensor (requires_grad: Flex's backward adds its gradient
with atomics), causal through create_block_mask.

  t5     relative_bias.tile, table random in [-1, 1], not causal
  alibi  alibi.tile, slopes 2^(-8 (h + 1) / H), causal

Per case: the check on a small ragged shape (B 2, H 4, N 1000): the tensor's gradient (and dQ)
of each provider against float64 autograd through the materialised scores, enforced for Kiln
(max |g - ref| <= 8 eps max |ref| + 1e-4, eps the dtype's), reported for Flex; whether two
backward runs give the same bits (each provider); then the backward's median time (CUDA events,
one recorded forward, torch.autograd.grad of q, k, v and the tensor) at the timing shape
(default B 2, H 16, N 4096, d 128, f16), Kiln's plain backward (the tensor not requiring grad)
for the gradient's cost, Kiln with the gradient by atomics (Variant.param_grads_atomic: Flex's
way, not deterministic), and the ratio Flex / Kiln (> 1: Kiln faster). A provider that fails
(Flex's T5 gradient ran out of shared memory on the H200 in issue 28) is reported, not fatal.

Output under --out ($OUT, else ./bench_out): param_grads_bench.{json,md}; the table is printed.
  python3 tools/bench/bench_param_grads.py --lib build/libkiln.so [--n 8192] [--cases t5,alibi]
On the GPU machine: bash tools/device_bench_param_grads.sh (after tools/device_pack.sh).
"""
import argparse
import json
import math
import os
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
import common  # noqa: E402
from common import log  # noqa: E402

NB, EXACT, MAXDIST = 32, 8, 128   # relative_bias.tile's consts


def t5_bucket(q, kv):
    import torch
    half = NB // 2
    rel = kv - q
    n = rel.abs()
    big = EXACT + (torch.log2(torch.clamp(n, min=1).to(torch.float32) / EXACT) *
                   ((half - EXACT) / math.log2(MAXDIST / EXACT))).to(torch.int64)
    return (rel > 0).to(torch.int64) * half + torch.where(n < EXACT, n.to(torch.int64), torch.clamp(big, max=half - 1))


def theta_for(case, heads):
    import torch
    if case == "t5":
        g = torch.Generator(device="cuda").manual_seed(7)
        return torch.rand(heads, NB, device="cuda", generator=g) * 2 - 1
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], device="cuda")


def score_mod(case, theta):
    if case == "t5":
        return lambda score, b, h, q, kv: score + theta[h, t5_bucket(q, kv)]
    return lambda score, b, h, q, kv: score - theta[h] * (q - kv).abs()


def inputs(b, h, n, d, dtype, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [(torch.rand(b, h, n, d, device="cuda", generator=g, dtype=torch.float32) * 2 - 1).to(dtype)
            for _ in range(4)]


def kiln_fwd(case, theta, q, k, v, causal, atomic=False):
    import kiln
    var = kiln.Variant("relative_bias", rel_bias=theta) if case == "t5" else kiln.Variant("alibi", alibi_slopes=theta)
    var.param_grads_atomic = atomic   # the gradient by f32 atomics instead of per-program rows
    return kiln.attention(q, k, v, causal=causal, variant=var, deterministic=True)


def flex_fwd(flex, case, theta, q, k, v, causal):
    from torch.nn.attention.flex_attention import create_block_mask
    bm = None
    if causal:
        n = q.shape[2]
        bm = create_block_mask(lambda b, h, qi, kv: qi >= kv, None, None, n, n, device="cuda")
    return flex(q, k, v, score_mod=score_mod(case, theta), block_mask=bm)


def reference(case, theta, q, k, v, dout, causal):
    import torch
    t = theta.detach().double().requires_grad_()
    q64, k64, v64 = (x.detach().double() for x in (q, k, v))
    n, m = q.shape[2], k.shape[2]
    i = torch.arange(n, device="cuda")[:, None]
    j = torch.arange(m, device="cuda")[None, :]
    bias = t[:, t5_bucket(i, j)] if case == "t5" else -t[:, None, None] * (i - j).abs().double()
    s = q64 @ k64.transpose(-1, -2) / math.sqrt(q.shape[-1]) + bias
    if causal:
        s = s.masked_fill(j > i, float("-inf"))
    out = torch.softmax(s, -1) @ v64
    out.backward(dout.double())
    return t.grad


def grads(fwd, theta, q, k, v, dout):
    import torch
    t = theta.detach().clone().requires_grad_()
    qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
    out = fwd(t, qq, kk, vv)
    return torch.autograd.grad(out, (qq, kk, vv, t), dout)


def check(case, flex, dtype, causal):
    """Each provider's gradient against float64 on a ragged shape, and its bits on two runs."""
    q, k, v, dout = inputs(2, 4, 1000, 64, dtype, 11)
    theta = theta_for(case, 4)
    ref = reference(case, theta, q, k, v, dout, causal)
    eps = 2.0 ** -8 if dtype == "bf16" else 2.0 ** -11
    bound = 8 * eps * ref.abs().max().item() + 1e-4
    res = {}
    for name, fwd in (("kiln", lambda t, a, b, c: kiln_fwd(case, t, a, b, c, causal)),
                      ("kiln_atomic", lambda t, a, b, c: kiln_fwd(case, t, a, b, c, causal, True)),
                      ("flex", lambda t, a, b, c: flex_fwd(flex, case, t, a, b, c, causal))):
        try:
            g1 = grads(fwd, theta, q, k, v, dout)[3]
            g2 = grads(fwd, theta, q, k, v, dout)[3]
            err = (g1.double() - ref).abs().max().item()
            res[name] = {"err": err, "bound": bound, "same_bits": bool(g1.equal(g2))}
        except Exception as e:   # noqa: BLE001 (a provider's failure is a result)
            res[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    return res


def timed(case, flex, b, h, n, d, dtype, causal, target_ms):
    import torch
    q, k, v, dout = inputs(b, h, n, d, dtype, 21)
    theta = theta_for(case, h)
    res = {}
    for name, fwd, want in (("kiln", lambda t, a, c, e: kiln_fwd(case, t, a, c, e, causal), True),
                            ("kiln_atomic", lambda t, a, c, e: kiln_fwd(case, t, a, c, e, causal, True), True),
                            ("kiln_plain", lambda t, a, c, e: kiln_fwd(case, t, a, c, e, causal), False),
                            ("flex", lambda t, a, c, e: flex_fwd(flex, case, t, a, c, e, causal), True)):
        try:
            t = theta.detach().clone().requires_grad_(want)
            qq, kk, vv = (x.detach().requires_grad_() for x in (q, k, v))
            out = fwd(t, qq, kk, vv)
            wrt = (qq, kk, vv, t) if want else (qq, kk, vv)
            ms = common.torch_median_ms(lambda: torch.autograd.grad(out, wrt, dout, retain_graph=True), target_ms)
            res[name] = {"ms": ms}
        except Exception as e:   # noqa: BLE001
            res[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="libkiln.so (sets KILN_LIBRARY)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--dtype", default="f16", choices=("f16", "bf16"))
    ap.add_argument("--cases", default="t5,alibi")
    ap.add_argument("--target-ms", type=float, default=200.0)
    args = ap.parse_args(argv)
    if args.lib:
        os.environ["KILN_LIBRARY"] = os.path.abspath(args.lib)
    import torch
    if not torch.cuda.is_available():
        raise SystemExit("no GPU")
    from torch.nn.attention.flex_attention import flex_attention
    flex = torch.compile(flex_attention, dynamic=False)
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    rows, data, failed = [], {"gpu": common.gpu_name(), "args": vars(args), "cases": {}}, False
    for case in args.cases.split(","):
        causal = case == "alibi"
        log(f"{case}: check")
        chk = check(case, flex, dtype, causal)
        log(f"{case}: timing")
        tm = timed(case, flex, args.batch, args.heads, args.n, args.d, dtype, causal, args.target_ms)
        data["cases"][case] = {"check": chk, "time": tm}
        k = chk.get("kiln", {})
        if "error" in k or k.get("err", 1e9) > k.get("bound", 0) or not k.get("same_bits"):
            failed = True
            print(f"FAILED {case}: kiln {k}")
        kms, fms, pms, ams = (tm.get(x, {}).get("ms") for x in ("kiln", "flex", "kiln_plain", "kiln_atomic"))
        fl = chk.get("flex", {})
        rows.append([case, "causal" if causal else "full",
                     f"{k.get('err', float('nan')):.3g} / {k.get('bound', float('nan')):.3g}",
                     "yes" if k.get("same_bits") else "NO",
                     fl.get("error", f"{fl.get('err', float('nan')):.3g}")[:60] if fl else "-",
                     "yes" if fl.get("same_bits") else ("no" if "same_bits" in fl else "-"),
                     f"{kms:.3f}" if kms else tm.get("kiln", {}).get("error", "-"),
                     f"{pms:.3f}" if pms else "-",
                     f"{ams:.3f}" if ams else tm.get("kiln_atomic", {}).get("error", "-")[:60],
                     f"{fms:.3f}" if fms else tm.get("flex", {}).get("error", "-")[:60],
                     f"{fms / kms:.2f}x" if kms and fms else "-"])
    md = (f"GPU: {data['gpu']}; B {args.batch}, H {args.heads}, N {args.n}, d {args.d}, {args.dtype}; backward "
          f"(dQ, dK, dV and the tensor's gradient) median ms\n\n" +
          common.markdown_table(["case", "mask", "kiln err / bound", "kiln same bits", "flex err", "flex same bits",
                                 "kiln ms", "kiln plain ms", "kiln atomic ms", "flex ms", "flex / kiln"], rows))
    out = common.out_dir(args.out, "bench_out")
    common.write_outputs(out, "param_grads_bench", data, md)
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
