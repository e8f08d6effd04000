#!/usr/bin/env python3
"""The memory modes of the optimizer against fp32 state (#24): real `packtrain train` runs from the same seed
on the same prepared dataset, same steps and tokens, one per mode:

  f32                fp32 masters and AdamW moments (16 bytes a parameter with the f32 gradients)
  bf16 moments       --optimizer-state bf16
  8bit moments       --optimizer-state 8bit (block-wise dynamic quantization)
  bf16 weights       --master-weights bf16 (no fp32 masters: stochastic rounding)
  bf16 weights 8bit  both: 8 bytes a parameter, what fits an 8B model on one 80 GB GPU
  f32 no clip        --clip 0: the reference of the optimizer in the backward, which cannot clip
  in backward        --optimizer-in-backward --clip 0 (AdamW per layer during the backward: no buffer of
                     every gradient, no clipping)
  in backward compact  the three together: about 4.5 bytes a parameter

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

import train_runs

RUNS = [
    ("f32", []),
    ("bf16 moments", ["--optimizer-state", "bf16"]),
    ("8bit moments", ["--optimizer-state", "8bit"]),
    ("bf16 weights", ["--master-weights", "bf16"]),
    ("bf16 weights 8bit", ["--master-weights", "bf16", "--optimizer-state", "8bit"]),
    ("f32 no clip", ["--clip", "0"]),
    ("in backward", ["--optimizer-in-backward", "--clip", "0"]),
    ("in backward compact",
     ["--optimizer-in-backward", "--clip", "0", "--master-weights", "bf16", "--optimizer-state", "8bit"]),
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
    train_runs.add_arguments(ap, RUNS, model="llama3.2-1b", steps=300, lr="3e-4", eval_every=100)
    args = ap.parse_args()
    runs = train_runs.pick_runs(args, RUNS)
    epochs = train_runs.train_epochs(args.data, args.steps, args.tokens)
    print(f"{args.steps} steps x {args.tokens} tokens = {epochs:.2f} epochs of the train split", flush=True)
    results = train_runs.run_all(args, runs, "modes",
                                 lambda name, records: summarize(name, records, args.out) | {"epochs": epochs})
    base = next((r for r in results if r["run"] == "f32" and r["final_val_loss"]), None)
    print(f"\n{'mode':<20} {'final val loss':>14} {'vs f32':>8} {'real tok/s':>11} {'vs f32':>7} {'MFU %':>6} "
          f"{'peak GiB':>8} {'state MiB':>10}")
    with open(os.path.join(args.out, "optimizer_modes.jsonl"), "w") as f:
        for r in results:
            r["loss_vs_f32"] = r["final_val_loss"] / base["final_val_loss"] if base and r["final_val_loss"] else None
            r["speed_vs_f32"] = (r["median_real_tokens_per_s"] / base["median_real_tokens_per_s"]
                                 if base and base["median_real_tokens_per_s"] else None)
            f.write(json.dumps(r) + "\n")
            fmt = lambda v, spec: format(v, spec) if v is not None else "-"
            print(f"{r['run']:<20} {fmt(r['final_val_loss'], '14.4f')} {fmt(r['loss_vs_f32'], '7.4f')}x "
                  f"{r['median_real_tokens_per_s']:>11.0f} {fmt(r['speed_vs_f32'], '6.2f')}x "
                  f"{r['median_mfu_pct']:>6.1f} {r['peak_memory_gib']:>8.2f} {fmt(r['optimizer_state_mib'], '10.1f')}")


if __name__ == "__main__":
    main()
