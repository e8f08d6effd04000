#!/usr/bin/env python3
"""torch's attention kernels (the peers of bench_attention) on the same batches, bf16, causal.

Reads the SFT-like lengths bench_attention wrote (--lengths FILE) and, optionally, bench_attention's output
(--packtrain FILE) to print packtrain/peer ratios. Peers:
  FA2 varlen     torch's FlashAttention-2 on the packed tokens with cu_seqlens (aten._flash_attention_forward)
  cuDNN          torch SDPA restricted to the cuDNN backend; it has no varlen entry in torch, so the SFT-like
                 batch runs padded: one row per example, padded to the longest (is_causal keeps the trailing
                 pads out of every real token's attention); rows of one length (32 x 1k, as llm.c trains GPT-2)
                 and single sequences run as they are
  flash padded   the same padded batch through SDPA's flash backend: what padding costs FA2
FLOPs as bench_attention counts them, on real tokens only (so a padded kernel is charged for its waste):
forward 4*D*H*sum L(L+1)/2, backward 2.5x forward. GQA shapes give SDPA K and V repeated to H heads.
--json FILE appends one JSON object per (batch, shape, kernel) for bench/report.py.
"""
import argparse
import json
import re
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

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


def varlen_tflops(lengths, H, Hkv, D, reps):
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
    flops = causal_flops(lengths, H, D)
    return flops / fwd / 1e12, 3.5 * flops / both / 1e12


def causal_flops(lengths, H, D):
    return 4.0 * D * H * sum(L * (L + 1) / 2 for L in lengths)


def padded_sdpa_tflops(lengths, H, D, reps, backend):
    """SDPA on one row per example padded to the longest, [B, H, L, D]; TFLOP/s on the real tokens' work."""
    B, L = len(lengths), max(lengths)
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel([backend]):
        fwd = seconds(lambda: sdpa(q, k, v, is_causal=True), reps)
        def fwd_bwd():
            torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v), dout)
        both = seconds(fwd_bwd, reps)
    flops = causal_flops(lengths, H, D)
    return flops / fwd / 1e12, 3.5 * flops / both / 1e12


def attempt(fn):
    """(fwd, fwd+bwd) TFLOP/s, or NaNs and the reason when the backend refuses the shape or runs out of memory."""
    try:
        return fn(), None
    except (RuntimeError, torch.OutOfMemoryError) as e:
        torch.cuda.empty_cache()
        return (float("nan"), float("nan")), str(e).splitlines()[0][:200]


def packtrain_figures(path):
    """{(batch, H, Hkv, D): (fwd TFLOP/s, fwd+bwd TFLOP/s)} from bench_attention's table."""
    figures = {}
    for line in open(path):
        m = re.match(r"(sft-like|32 x 1k|one \d+k)\s+T=\d+ S=\d+ H=(\d+) Hkv=(\d+) D=(\d+)\s+\S+\s+(\S+)\s+\S+\s+\S+\s+(\S+)", line)
        if m:
            figures[(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)))] = (float(m.group(5)), float(m.group(6)))
    return figures


PADDED_PEERS = [("cuDNN SDPA", SDPBackend.CUDNN_ATTENTION), ("flash SDPA padded", SDPBackend.FLASH_ATTENTION)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", required=True)
    ap.add_argument("--packtrain")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", help="append one JSON object per (batch, shape, kernel) here")
    args = ap.parse_args()
    sft = [int(x) for x in open(args.lengths).read().split()]
    ours = packtrain_figures(args.packtrain) if args.packtrain else {}
    out = open(args.json, "a") if args.json else None
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print("TFLOP/s on real tokens (fwd / fwd+bwd); cuDNN runs the SFT-like batch padded (torch has no varlen "
          "entry for it), 32 rows of 1024, one 8k and one 32k sequence as they are; x = packtrain / peer")
    print(f"{'batch':<9} {'H/Hkv/D':<10} {'ours':>13} {'FA2 varlen':>13} {'cuDNN':>13} {'flash padded':>13} "
          f"{'x FA2':>11} {'x cuDNN':>11}")
    notes = []
    for name, lengths in (("sft-like", sft), ("32 x 1k", [1024] * 32), ("one 8k", [8192]), ("one 32k", [32768])):
        for H, Hkv, D in SHAPES:
            fig = {"packtrain varlen": ours.get((name, H, Hkv, D), (float("nan"), float("nan"))),
                   "torch FA2 varlen": varlen_tflops(lengths, H, Hkv, D, args.reps)}
            for kernel, backend in PADDED_PEERS:
                if kernel == "flash SDPA padded" and len(set(lengths)) == 1:
                    continue  # rows of one length have no padding: the same kernel as FA2 varlen
                fig[kernel], why = attempt(lambda: padded_sdpa_tflops(lengths, H, D, args.reps, backend))
                if why:
                    notes.append(f"{kernel} {name} {H}/{Hkv}/{D}: {why}")
            pair = lambda k: f"{fig.get(k, (float('nan'),) * 2)[0]:6.1f}/{fig.get(k, (float('nan'),) * 2)[1]:<6.1f}"
            ratio = lambda k: (f"{fig['packtrain varlen'][0] / fig[k][0]:5.2f}/{fig['packtrain varlen'][1] / fig[k][1]:<5.2f}"
                               if k in fig else "-")
            print(f"{name:<9} {f'{H}/{Hkv}/{D}':<10} {pair('packtrain varlen'):>13} {pair('torch FA2 varlen'):>13} "
                  f"{pair('cuDNN SDPA'):>13} {pair('flash SDPA padded'):>13} {ratio('torch FA2 varlen'):>11} "
                  f"{ratio('cuDNN SDPA'):>11}", flush=True)
            if out:
                for kernel, (fwd, both) in fig.items():
                    layout = "varlen" if "varlen" in kernel else ("padded" if len(set(lengths)) > 1 else "equal rows")
                    out.write(json.dumps({"bench": "attention", "batch": name, "H": H, "Hkv": Hkv, "D": D,
                                          "kernel": kernel, "layout": layout, "tokens": sum(lengths),
                                          "fwd_tflops": None if fwd != fwd else fwd,
                                          "fwdbwd_tflops": None if both != both else both}) + "\n")
                out.flush()
    for note in notes:
        print("n/a:", note)


if __name__ == "__main__":
    main()
