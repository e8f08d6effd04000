#!/usr/bin/env python3
"""torch's FlashAttention-2 varlen (the peer of bench_attention) on the same batches, bf16, causal.

Reads the SFT-like lengths bench_attention wrote (--lengths FILE) and, optionally, bench_attention's output
(--packtrain FILE) to print packtrain/torch ratios. FLOPs as bench_attention counts them: forward
4*D*H*sum L(L+1)/2, backward 2.5x forward.
"""
import argparse
import re
import time

import torch

SHAPES = [(12, 12, 64), (16, 16, 128), (16, 4, 128)]


def flash_varlen(q, k, v, cu, max_len):
    out = torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, max_len, max_len, 0.0, True, False)
    return out[0]


def seconds(fn, reps):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps


def measure(lengths, H, Hkv, D, reps):
    T = sum(lengths)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
    q = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(T, Hkv, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(T, Hkv, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dout = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16)
    max_len = max(lengths)
    fwd = seconds(lambda: flash_varlen(q, k, v, cu, max_len), reps)
    def fwd_bwd():
        out = flash_varlen(q, k, v, cu, max_len)
        torch.autograd.grad(out, (q, k, v), dout)
    both = seconds(fwd_bwd, reps)
    pairs = sum(L * (L + 1) / 2 for L in lengths)
    flops = 4.0 * D * H * pairs
    return flops / fwd / 1e12, 3.5 * flops / both / 1e12


def packtrain_figures(path):
    """{(batch, H, Hkv, D): (fwd TFLOP/s, fwd+bwd TFLOP/s)} from bench_attention's table."""
    figures = {}
    for line in open(path):
        m = re.match(r"(sft-like|one 8k)\s+T=\d+ S=\d+ H=(\d+) Hkv=(\d+) D=(\d+)\s+\S+\s+(\S+)\s+\S+\s+\S+\s+(\S+)", line)
        if m:
            figures[(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))] = (float(m.group(5)), float(m.group(6)))
    return figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--packtrain")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()
    sft = [int(x) for x in open(args.lengths).read().split()]
    ours = packtrain_figures(args.packtrain) if args.packtrain else {}
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: aten._flash_attention_forward (FA2 varlen)")
    print(f"{'batch':<9} {'H/Hkv/D':<10} {'torch fwd':>9} {'torch f+b':>9} {'ours fwd':>9} {'ours f+b':>9} {'fwd x':>6} {'f+b x':>6}")
    for name, lengths in (("sft-like", sft), ("one 8k", [8192])):
        for H, Hkv, D in SHAPES:
            tf, tb = measure(lengths, H, Hkv, D, args.reps)
            of, ob = ours.get((name, H, Hkv, D), (float("nan"), float("nan")))
            print(f"{name:<9} {f'{H}/{Hkv}/{D}':<10} {tf:9.1f} {tb:9.1f} {of:9.1f} {ob:9.1f} {of / tf:6.2f} {ob / tb:6.2f}")


if __name__ == "__main__":
    main()
