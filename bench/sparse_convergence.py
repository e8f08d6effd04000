#!/usr/bin/env python3
"""Convergence of 2:4 sparse FFN training against dense, with the paper's ablations (Hu et al., ICML 2024).

Real `packtrain train` runs from the same seed on the same prepared dataset, same steps and tokens:

  dense            no sparsity
  2:4              --sparse24: transposable masks, masked decay, dense fine-tuning; weight gradients by
                   --sparse-dw auto (MVUE where the dW GEMM runs on sparse tensor cores, else exact)
  2:4 MVUE dW      --sparse24 --sparse-dw mvue: the paper's estimator whatever the GEMMs
  2:4 no decay     --sparse24 --masked-decay 0
  2:4 no finetune  --sparse24 --dense-finetune 0 (sparse to the end)

From each run's metrics.jsonl: the validation loss curve, the final validation loss and its ratio to dense,
the median real tokens/s, and the mean mask flip rate. Writes OUT/sparse_convergence.jsonl (one summary per
run), OUT/sparse_convergence.png (validation loss curves) and each run's metrics and log.
Usage: sparse_convergence.py --packtrain BUILD/packtrain --data data/prepared/default --out OUT_DIR
       [--model 110m] [--steps 600] [--tokens 16384] [--device cuda] [--eval-every 50] [--eval-batches 0]
       [--runs dense,2:4,...] [--decays 2e-4,6e-4] [--seed 1] [--train-args "..."]
--runs picks some of these runs; --decays adds a "2:4 decay L" run per masked-decay lambda L (the
default lambda is the paper's GPT-2 124M value, 6e-5; its 350M/1.5B scripts use 2e-4). --train-args go to
every run's `packtrain train`, e.g. BERT's masked LM: --model bert-base --train-args "--objective mlm".
Keep steps x tokens within one epoch of the dataset's train split: past it the dense model overfits first
and the comparison says nothing about 2:4 (scripts/setup_pretrain_corpus.sh makes a corpus large enough).
"""
import argparse
import json
import os
import statistics

import train_runs

RUNS = [
    ("dense", []),
    ("2:4", ["--sparse24"]),
    ("2:4 MVUE dW", ["--sparse24", "--sparse-dw", "mvue"]),
    ("2:4 no decay", ["--sparse24", "--masked-decay", "0"]),
    ("2:4 no finetune", ["--sparse24", "--dense-finetune", "0"]),
]


def summarize(name, records):
    train = [r for r in records if r.get("type") == "train"]
    val = [r for r in records if r.get("type") == "val"]
    masks = [r for r in records if r.get("type") == "masks" and "flip_rate" in r]
    return {
        "bench": "sparse_convergence",
        "run": name,
        "val_curve": [[r["step"], r["loss"]] for r in val],
        "final_val_loss": val[-1]["loss"] if val else None,
        "median_real_tokens_per_s": train_runs.steady(records, "real_tokens_per_s"),
        "mean_flip_rate": statistics.mean(m["flip_rate"] for m in masks[1:]) if len(masks) > 1 else None,
        "tokens_seen": train[-1]["tokens_seen"] if train else 0,
    }


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for r in results:
        if r["val_curve"]:
            steps, losses = zip(*r["val_curve"])
            ax.plot(steps, losses, marker="o", markersize=3, label=r["run"])
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation loss")
    ax.set_title("2:4 sparse FFN training vs dense (same data, seed and tokens)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    train_runs.add_arguments(ap, RUNS, model="110m", steps=600, lr="1e-3", eval_every=50)
    ap.add_argument("--decays", default="", help="extra 2:4 runs, one per masked-decay lambda")
    args = ap.parse_args()
    runs = train_runs.pick_runs(args, RUNS)
    runs += [(f"2:4 decay {d}", ["--sparse24", "--masked-decay", d]) for d in args.decays.split(",") if d]
    epochs = train_runs.train_epochs(args.data, args.steps, args.tokens)
    print(f"{args.steps} steps x {args.tokens} tokens = {epochs:.2f} epochs of the train split", flush=True)
    if epochs > 1:
        print("warning: more than one epoch: the dense model overfits first, so the final losses do not compare "
              "2:4 with dense; use a larger dataset (scripts/setup_pretrain_corpus.sh) or fewer steps", flush=True)
    results = train_runs.run_all(args, runs, "convergence",
                                 lambda name, records: summarize(name, records) | {"epochs": epochs})
    dense = next((r for r in results if r["run"] == "dense" and r["final_val_loss"]), None)
    print(f"\n{'run':<18} {'final val loss':>14} {'vs dense':>9} {'real tok/s':>11} {'vs dense':>9} "
          f"{'flip rate':>9}")
    with open(os.path.join(args.out, "sparse_convergence.jsonl"), "w") as f:
        for r in results:
            loss_ratio = r["final_val_loss"] / dense["final_val_loss"] if dense and r["final_val_loss"] else None
            speed_ratio = (r["median_real_tokens_per_s"] / dense["median_real_tokens_per_s"]
                           if dense and dense["median_real_tokens_per_s"] else None)
            r["loss_vs_dense"], r["speed_vs_dense"] = loss_ratio, speed_ratio
            f.write(json.dumps(r) + "\n")
            fmt = lambda v, spec: format(v, spec) if v is not None else "-"
            print(f"{r['run']:<18} {fmt(r['final_val_loss'], '14.4f')} {fmt(loss_ratio, '8.4f')}x "
                  f"{r['median_real_tokens_per_s']:>11.0f} {fmt(speed_ratio, '8.2f')}x "
                  f"{fmt(r['mean_flip_rate'], '9.5f')}")
    plot(results, os.path.join(args.out, "sparse_convergence.png"))


if __name__ == "__main__":
    main()
