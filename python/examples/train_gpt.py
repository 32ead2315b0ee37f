"""train_gpt.py — a small GPT trained on synthetic data with each attention implementation in
turn: kiln.attention, torch's SDPA and (when torch has it) FlexAttention; the same seed, data and
initial weights for each, so their loss curves should agree within bf16 noise. Prints the loss
every --log steps side by side, and tokens/s of each (after --warmup steps, synchronised).

The data: each sequence repeats a random block of --period tokens, so a model that learns to
attend back one period (an induction head) drives the loss towards 0; a model whose attention is
wrong stays near log(vocab) for the repeated part.

  python python/examples/train_gpt.py --steps 300                  # GPU: all three
  python python/examples/train_gpt.py --steps 300 --window 128     # + a shipped variant
                                                                   #   (sliding_window)
  python python/examples/train_gpt.py --device cpu --steps 3 --layers 1 --seq 64 --dim 64 \
         --batch 2 --impl kiln sdpa                                # the interpreter: a smoke run
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))   # a source checkout
import kiln  # noqa: E402


def attention_fn(impl, seq, window, device):
    """(q, k, v) [b, h, s, d] -> [b, h, s, d], causal, optionally a sliding window of `window` keys."""
    if impl == "kiln":
        var = kiln.Variant("sliding_window", window_left=window, window_right=0) if window else None
        return lambda q, k, v: kiln.attention(q, k, v, causal=True, variant=var)
    if impl == "sdpa":
        if not window:
            return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
        i = torch.arange(seq, device=device)
        mask = (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - window)
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if impl == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def mask_mod(b, h, qi, ki):
            ok = ki <= qi
            return ok & (ki >= qi - window) if window else ok
        bm = create_block_mask(mask_mod, None, None, seq, seq, device=device)
        flex = torch.compile(flex_attention)
        return lambda q, k, v: flex(q, k, v, block_mask=bm)
    raise ValueError(f"--impl: {impl}")


class Block(nn.Module):
    def __init__(self, dim, heads, attn):
        super().__init__()
        self.heads, self.attn = heads, attn
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
        y = self.attn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))   # [b, s, h, d] seen as [b, h, s, d]
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, dim))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, seq, dim, heads, layers, attn):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, attn) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batches(args, device):
    g = torch.Generator().manual_seed(1234)
    while True:
        base = torch.randint(0, args.vocab, (args.batch, args.period), generator=g)
        seq = base.repeat(1, math.ceil((args.seq + 1) / args.period))[:, :args.seq + 1]
        yield seq[:, :-1].to(device), seq[:, 1:].to(device)


def train(impl, args, device):
    torch.manual_seed(0)
    model = GPT(args.vocab, args.seq, args.dim, args.heads, args.layers,
                attention_fn(impl, args.seq, args.window, device)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    data = batches(args, device)
    losses, t0, sync = [], None, (torch.cuda.synchronize if device.type == "cuda" else (lambda: None))
    for step in range(args.steps):
        if step == args.warmup:
            sync()
            t0 = time.perf_counter()
        x, y = next(data)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item() if (step % args.log == 0 or step == args.steps - 1) else None)
    sync()
    timed = args.steps - args.warmup
    tps = timed * args.batch * args.seq / (time.perf_counter() - t0) if t0 is not None and timed > 0 else float("nan")
    return losses, tps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=10, help="steps before the tokens/s clock starts")
    ap.add_argument("--log", type=int, default=25, help="print the loss every this many steps")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--period", type=int, default=64, help="tokens before the data repeats")
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--heads", type=int, default=4, help="head dim = dim / heads (32, 64, 96, 128 or 256)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--window", type=int, default=0, help="sliding-window attention (kiln: the shipped variant)")
    ap.add_argument("--impl", nargs="+", default=["kiln", "sdpa", "flex"], choices=["kiln", "sdpa", "flex"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    impls = [i for i in args.impl if i != "flex" or (device.type == "cuda" and _has_flex())]
    results = {impl: train(impl, args, device) for impl in impls}
    print(f"GPT: {args.layers} layers, dim {args.dim}, {args.heads} heads, seq {args.seq}, batch {args.batch}, "
          f"bf16 autocast, {device}" + (f", window {args.window}" if args.window else ""))
    print("step  " + "".join(f"{i:>12}" for i in impls))
    for step in range(args.steps):
        row = [results[i][0][step] for i in impls]
        if row[0] is not None:
            print(f"{step:4d}  " + "".join(f"{x:12.4f}" for x in row))
    print("tok/s " + "".join(f"{results[i][1]:12.0f}" for i in impls))
    finals = [results[i][0][-1] for i in impls]
    print(f"final-loss spread: {max(finals) - min(finals):.4f}")


def _has_flex():
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    main()
