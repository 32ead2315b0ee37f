"""bench_host.py — the host cost of one eager call from Python: kiln.attention (forward),
kiln.flash_attn_with_kvcache (decode) and torch's SDPA on the same small tensors, in
microseconds per call (the best of --reps rounds of --calls calls, timed on the CPU clock with
the GPU kept busy far less than the host, so the host path is what is measured); and the same
forward replayed from a CUDA graph (the host cost per step is then the replay's, whatever the
op count).

  python python/examples/bench_host.py                 # CUDA when there is one
  python python/examples/bench_host.py --device cpu    # the CPU path: no rows, so no interpreter run
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kiln  # noqa: E402


def per_call_us(fn, calls, reps, sync):
    for _ in range(20):
        fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls * 1e6)
        sync()
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    s = 128 if cuda else 0        # on the CPU, no rows: the host path without an interpreter run
    q = torch.randn(1, 8, s, 128, dtype=torch.float16, device=dev)
    k = torch.randn(1, 8, max(s, 64), 128, dtype=torch.float16, device=dev)
    qd = torch.randn(1, 1, 8, 128, dtype=torch.float16, device=dev)
    kc = torch.randn(1, 256, 8, 128, dtype=torch.float16, device=dev)
    rows = [
        ("kiln.attention (forward)", lambda: kiln.attention(q, k, k)),
        ("torch SDPA (forward)", lambda: F.scaled_dot_product_attention(q, k, k)),
    ]
    if cuda:   # on the CPU a decode always runs the interpreter: not a host cost
        rows.append(("kiln.flash_attn_with_kvcache (decode)",
                     lambda: kiln.flash_attn_with_kvcache(qd, kc, kc, cache_seqlens=200)))
    with torch.no_grad():
        for name, fn in rows:
            print(f"{name:42s} {per_call_us(fn, args.calls, args.reps, sync):8.1f} us/call")
        if cuda:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(10):
                    kiln.attention(q, k, k)
            print(f"{'kiln.attention x10 in one CUDA graph':42s} "
                  f"{per_call_us(g.replay, args.calls // 10, args.reps, sync) / 10:8.1f} us/call")


if __name__ == "__main__":
    main()
