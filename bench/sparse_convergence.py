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
import shlex
import shutil
import statistics
import sys
import tempfile

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
    ap.add_argument("--packtrain", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default="110m")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--tokens", type=int, default=16384, help="token budget per micro-batch (flatten)")
    ap.add_argument("--lr", default="1e-3")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--eval-batches", type=int, default=0, help="validation batches (0: the whole split)")
    ap.add_argument("--runs", default=",".join(name for name, _ in RUNS), help="which of the runs above")
    ap.add_argument("--decays", default="", help="extra 2:4 runs, one per masked-decay lambda")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-args", default="", help="more `packtrain train` arguments for every run")
    args = ap.parse_args()
    known = dict(RUNS)
    wanted = [name for name in args.runs.split(",") if name]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        sys.exit(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    runs = [(name, known[name]) for name in wanted]
    runs += [(f"2:4 decay {d}", ["--sparse24", "--masked-decay", d]) for d in args.decays.split(",") if d]
    if not os.path.isfile(os.path.join(args.data, "metadata.json")):
        sys.exit(f"{args.data}: no prepared dataset (run scripts/main.sh or packtrain prepare first)")
    epochs = train_runs.train_epochs(args.data, args.steps, args.tokens)
    print(f"{args.steps} steps x {args.tokens} tokens = {epochs:.2f} epochs of the train split", flush=True)
    if epochs > 1:
        print("warning: more than one epoch: the dense model overfits first, so the final losses do not compare "
              "2:4 with dense; use a larger dataset (scripts/setup_pretrain_corpus.sh) or fewer steps", flush=True)
    os.makedirs(args.out, exist_ok=True)
    results = []
    scratch = tempfile.mkdtemp(prefix="sparse_convergence_")
    try:
        for name, extra in runs:
            run_dir = os.path.join(scratch, train_runs.run_tag(name))
            cmd = [args.packtrain, "train", "--data", args.data, "--out", run_dir, "--no-resume",
                   "--model", args.model, "--device", args.device, "--strategy", "flatten",
                   "--tokens", str(args.tokens), "--steps", str(args.steps), "--warmup", str(args.steps // 20),
                   "--lr", args.lr, "--min-lr", str(float(args.lr) / 10), "--eval-every", str(args.eval_every),
                   "--eval-batches", str(args.eval_batches),
                   "--save-every", "0", "--log-every", "10", "--seed", str(args.seed)] + shlex.split(
                       args.train_args) + extra
            records = train_runs.train(cmd, name, scratch, args.out, "convergence")
            if records is not None:
                results.append(summarize(name, records) | {"epochs": epochs})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
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
