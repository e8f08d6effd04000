#!/usr/bin/env python3
"""The memory modes of the optimizer against fp32 state (#24): real `packtrain train` runs from the same seed
on the same prepared dataset, same steps and tokens, one per mode:

  f32                fp32 masters and AdamW moments (16 bytes a parameter with the f32 gradients)
  bf16 moments       --optimizer-state bf16
  8bit moments       --optimizer-state 8bit (block-wise dynamic quantization)
  bf16 weights       --master-weights bf16 (no fp32 masters: stochastic rounding)
  bf16 weights 8bit  both: 8 bytes a parameter, what fits an 8B model on one 80 GB GPU

From each run's metrics.jsonl and log: the final validation loss and its ratio to the f32 run's (the goal:
within 1%), the median real tokens/s and MFU, the peak memory and the optimizer state the run reports.
Writes OUT/optimizer_modes.jsonl (one summary per run) and each run's metrics and log.
Usage: optimizer_modes.py --packtrain BUILD/packtrain --data data/prepared/default --out OUT_DIR
       [--model llama3.2-1b] [--steps 300] [--tokens 16384] [--device cuda] [--eval-every 100]
       [--eval-batches 0] [--lr 3e-4] [--runs f32,8bit moments,...] [--seed 1] [--train-args "..."]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import sys
import tempfile

import train_runs

RUNS = [
    ("f32", []),
    ("bf16 moments", ["--optimizer-state", "bf16"]),
    ("8bit moments", ["--optimizer-state", "8bit"]),
    ("bf16 weights", ["--master-weights", "bf16"]),
    ("bf16 weights 8bit", ["--master-weights", "bf16", "--optimizer-state", "8bit"]),
]


def optimizer_state_mib(out, name):
    """The MiB of master weights and moments the run's log reports, or None."""
    log = os.path.join(out, f"modes_{train_runs.run_tag(name)}.log")
    match = re.search(r"optimizer state: ([0-9.]+) MiB", open(log).read()) if os.path.isfile(log) else None
    return float(match.group(1)) if match else None


def summarize(name, records, out):
    val = [r for r in records if r.get("type") == "val"]
    train = [r for r in records if r.get("type") == "train"]
    return {
        "bench": "optimizer_modes",
        "run": name,
        "final_val_loss": val[-1]["loss"] if val else None,
        "median_real_tokens_per_s": train_runs.steady(records, "real_tokens_per_s"),
        "median_mfu_pct": train_runs.steady(records, "mfu_pct"),
        "peak_memory_gib": max((r.get("peak_memory_gib", 0) for r in train), default=0),
        "optimizer_state_mib": optimizer_state_mib(out, name),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packtrain", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="llama3.2-1b")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--tokens", type=int, default=16384, help="token budget per micro-batch (flatten)")
    ap.add_argument("--lr", default="3e-4")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=0, help="validation batches (0: the whole split)")
    ap.add_argument("--runs", default=",".join(name for name, _ in RUNS), help="which of the runs above")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-args", default="", help="more `packtrain train` arguments for every run")
    args = ap.parse_args()
    known = dict(RUNS)
    wanted = [name for name in args.runs.split(",") if name]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        sys.exit(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    if not os.path.isfile(os.path.join(args.data, "metadata.json")):
        sys.exit(f"{args.data}: no prepared dataset (run scripts/main.sh or packtrain prepare first)")
    epochs = train_runs.train_epochs(args.data, args.steps, args.tokens)
    print(f"{args.steps} steps x {args.tokens} tokens = {epochs:.2f} epochs of the train split", flush=True)
    os.makedirs(args.out, exist_ok=True)
    results = []
    scratch = tempfile.mkdtemp(prefix="optimizer_modes_")
    try:
        for name in wanted:
            cmd = [args.packtrain, "train", "--data", args.data,
                   "--out", os.path.join(scratch, train_runs.run_tag(name)), "--no-resume",
                   "--model", args.model, "--device", args.device, "--strategy", "flatten",
                   "--tokens", str(args.tokens), "--steps", str(args.steps), "--warmup", str(args.steps // 20),
                   "--lr", args.lr, "--min-lr", str(float(args.lr) / 10), "--eval-every", str(args.eval_every),
                   "--eval-batches", str(args.eval_batches), "--no-save", "--log-every", "10",
                   "--seed", str(args.seed)] + shlex.split(args.train_args) + known[name]
            records = train_runs.train(cmd, name, scratch, args.out, "modes")
            if records is not None:
                results.append(summarize(name, records, args.out) | {"epochs": epochs})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = next((r for r in results if r["run"] == "f32" and r["final_val_loss"]), None)
    print(f"\n{'mode':<18} {'final val loss':>14} {'vs f32':>8} {'real tok/s':>11} {'vs f32':>7} {'MFU %':>6} "
          f"{'peak GiB':>8} {'state MiB':>10}")
    with open(os.path.join(args.out, "optimizer_modes.jsonl"), "w") as f:
        for r in results:
            r["loss_vs_f32"] = r["final_val_loss"] / base["final_val_loss"] if base and r["final_val_loss"] else None
            r["speed_vs_f32"] = (r["median_real_tokens_per_s"] / base["median_real_tokens_per_s"]
                                 if base and base["median_real_tokens_per_s"] else None)
            f.write(json.dumps(r) + "\n")
            fmt = lambda v, spec: format(v, spec) if v is not None else "-"
            print(f"{r['run']:<18} {fmt(r['final_val_loss'], '14.4f')} {fmt(r['loss_vs_f32'], '7.4f')}x "
                  f"{r['median_real_tokens_per_s']:>11.0f} {fmt(r['speed_vs_f32'], '6.2f')}x "
                  f"{r['median_mfu_pct']:>6.1f} {r['peak_memory_gib']:>8.2f} {fmt(r['optimizer_state_mib'], '10.1f')}")


if __name__ == "__main__":
    main()
