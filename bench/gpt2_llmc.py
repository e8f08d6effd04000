#!/usr/bin/env python3
"""GPT-2 124M: packtrain against llm.c on the same tokens, in one run (issue #22's head-to-head).

Both train GPT-2 (d12, vocab 50257) from random init on rows of 1024 tokens, 32 rows a step, attention over
whole rows as llm.c trains (packtrain `--strategy concat`), no dropout, bf16, AdamW. The tokens are a prepared
packtrain dataset's train split; llm.c reads them from its own .bin format, written here. Each side's step
time is the median over the timed steps (the first WARMUP steps excluded): llm.c's from the milliseconds it
prints per step, packtrain's from metrics.jsonl. Then packtrain alone trains the same model packed (`flatten`)
on the dataset's own examples, its real tokens/s beside.

  bench/gpt2_llmc.py --packtrain build/packtrain --data DATA_DIR --llmc .peers/llmc.sh --out OUT [--steps 40]

DATA_DIR must hold no example longer than GPT-2's 1024 positions for the packed run (`packtrain prepare
--max-len 1024 --long split`). llm.c builds with cuDNN attention when CUDNN_INCLUDE, CUDNN_LIB (the torch
wheel's nvidia/cudnn include and lib) and CUDNN_FRONTEND_INCLUDE (PyPI nvidia-cudnn-frontend) are set.

Without --llmc (or on a machine without a GPU, where llm.c cannot run) only the packtrain side runs: CI uses
that with a small --model config on the CPU as a smoke test of this script.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

LLMC_MAGIC, LLMC_VERSION = 20240520, 1


def write_llmc_tokens(tokens_bin, out_path, limit):
    """packtrain's uint32 token file -> llm.c's: a 256-int32 header (magic, version, count), uint16 tokens."""
    with open(tokens_bin, "rb") as f:
        data = f.read(4 * limit) if limit else f.read()
    count = len(data) // 4
    ids = struct.unpack(f"<{count}I", data)
    if max(ids) >= 1 << 16:
        sys.exit(f"{tokens_bin}: token id {max(ids)} does not fit llm.c's uint16 tokens")
    header = [LLMC_MAGIC, LLMC_VERSION, count] + [0] * 253
    with open(out_path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{count}H", *ids))
    return count


def llmc_cudnn_env(work):
    """llm.c's Makefile accepts cuDNN only where it finds ~/cudnn-frontend/include, and links -lcudnn, which the
    torch wheel ships as libcudnn.so.9 only: link both into place from CUDNN_FRONTEND_INCLUDE and CUDNN_LIB."""
    env = dict(os.environ)
    frontend, lib = env.get("CUDNN_FRONTEND_INCLUDE"), env.get("CUDNN_LIB")
    if not frontend or not lib:
        return env
    home_frontend = os.path.expanduser("~/cudnn-frontend")
    if not os.path.isdir(os.path.join(home_frontend, "include")):
        os.makedirs(home_frontend, exist_ok=True)
        os.symlink(os.path.abspath(frontend), os.path.join(home_frontend, "include"))
    links = os.path.join(work, "lib")
    os.makedirs(links, exist_ok=True)
    for name in os.listdir(lib):
        if name.startswith("libcudnn.so."):
            os.symlink(os.path.join(lib, name), os.path.join(links, "libcudnn.so"))
            break
    env["CUDNN_LIB"] = links if os.listdir(links) else lib
    # -lnvidia-ml and -lcuda link against the toolkit's stubs where the driver's libraries lack the bare name.
    env["LIBRARY_PATH"] = ":".join(
        p for p in (links, "/usr/local/cuda/lib64", "/usr/local/cuda/lib64/stubs", env.get("LIBRARY_PATH")) if p)
    return env


def run(cmd, log_path, env=None):
    print("+", " ".join(cmd), flush=True)
    with open(log_path, "w") as log:
        p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if p.returncode != 0:
        with open(log_path) as log:
            sys.stderr.write(log.read()[-3000:])
        sys.exit(f"{cmd[0]} failed (exit {p.returncode}); log: {log_path}")


def llmc_tokens_per_s(log_path, tokens_per_step, warmup):
    """Median over the timed steps of tokens per step / the step's milliseconds (llm.c prints `| X ms |`)."""
    times = [float(m.group(1)) for m in re.finditer(r"^step\s+\d+/\d+ \|.*?\| ([\d.]+) ms \|", open(log_path).read(), re.M)]
    if len(times) <= warmup:
        sys.exit(f"{log_path}: {len(times)} llm.c steps; need more than the {warmup} warm-up steps")
    return tokens_per_step / (statistics.median(times[warmup:]) / 1e3)


def packtrain_run(args, name, strategy, extra):
    out = os.path.join(args.out, name)
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.packtrain, "train", "--data", args.data, "--out", out, "--model", args.model, "--strategy", strategy,
           "--steps", str(args.steps), "--warmup", "1", "--eval-every", "0", "--save-every", "0", "--no-resume",
           "--device", args.device] + extra
    run(cmd, os.path.join(args.out, name + ".log"))
    steps = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl")) if '"type":"train"' in line]
    timed = steps[args.warmup:]
    if not timed:
        sys.exit(f"{name}: {len(steps)} logged steps; need more than the {args.warmup} warm-up steps")
    return {"real_tokens_per_s": statistics.median(s["real_tokens_per_s"] for s in timed),
            "mfu_pct": statistics.median(s["mfu_pct"] for s in timed),
            "peak_memory_gib": max(s["peak_memory_gib"] for s in steps),
            "padding_pct": statistics.median(s["padding_pct"] for s in timed)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packtrain", required=True)
    ap.add_argument("--data", required=True, help="prepared dataset (packtrain prepare) whose tokens both train on")
    ap.add_argument("--out", required=True)
    ap.add_argument("--llmc", help="llmc.sh of ../shared/peers (carried to the GPU machine); omit to skip llm.c")
    ap.add_argument("--model", default="gpt2", help="packtrain preset or config.json (gpt2 = llm.c's d12)")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of the medians")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--row-len", type=int, default=1024)
    ap.add_argument("--flatten-tokens", type=int, default=32768, help="token budget of the packed run's steps")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tokens_per_step = args.rows * args.row_len
    results = {"rows": args.rows, "row_len": args.row_len, "steps": args.steps, "warmup": args.warmup}

    results["packtrain_concat"] = packtrain_run(
        args, "packtrain_concat", "concat", ["--row-len", str(args.row_len), "--tokens", str(tokens_per_step)])
    results["packtrain_flatten"] = packtrain_run(
        args, "packtrain_flatten", "flatten", ["--tokens", str(args.flatten_tokens)])
    if args.llmc:
        with tempfile.TemporaryDirectory() as tmp:
            train_bin, val_bin = os.path.join(tmp, "train.bin"), os.path.join(tmp, "val.bin")
            # Enough tokens for every step (llm.c wraps around its file otherwise).
            need = tokens_per_step * (args.steps + 1) + 1
            count = write_llmc_tokens(os.path.join(args.data, "train", "tokens.bin"), train_bin, need)
            write_llmc_tokens(os.path.join(args.data, "val", "tokens.bin"), val_bin, tokens_per_step + 1)
            log = os.path.join(args.out, "llmc.log")
            run(["bash", args.llmc, train_bin, val_bin, "d12", str(args.rows), str(args.row_len), str(args.steps)], log,
                env=llmc_cudnn_env(tmp))
        results["llmc_tokens"] = count
        results["llmc_tokens_per_s"] = llmc_tokens_per_s(log, tokens_per_step, args.warmup)

    with open(os.path.join(args.out, "gpt2_llmc.json"), "w") as f:
        json.dump(results, f, indent=2)
    c, fl = results["packtrain_concat"], results["packtrain_flatten"]
    print(f"\n| GPT-2 124M, {args.rows} x {args.row_len} tokens a step | tokens/s | MFU | peak GiB |")
    print("|---|---|---|---|")
    if "llmc_tokens_per_s" in results:
        print(f"| llm.c (cuDNN attention if built with it) | {results['llmc_tokens_per_s']:,.0f} | | |")
    print(f"| packtrain concat | {c['real_tokens_per_s']:,.0f} | {c['mfu_pct']:.1f}% | {c['peak_memory_gib']:.1f} |")
    print(f"| packtrain flatten (the dataset's examples) | {fl['real_tokens_per_s']:,.0f} real | {fl['mfu_pct']:.1f}% | "
          f"{fl['peak_memory_gib']:.1f} |")
    if "llmc_tokens_per_s" in results:
        print(f"\npacktrain concat / llm.c: {c['real_tokens_per_s'] / results['llmc_tokens_per_s']:.2f}x")


if __name__ == "__main__":
    main()
