#!/usr/bin/env python3
"""The packing paper's Table 2 on packtrain: real `packtrain train` runs, one per packing strategy, compared.

Each strategy (padding, concat, concat-posid, flatten, bfd) trains the same model from the same seed on the
same prepared dataset for the same number of steps at the same --examples per step, once per --seeds seed (padding and flatten take
exactly N examples; the fixed-row strategies take the rows that hold about N examples: see
src/data/packing/packer.h). From each run's metrics.jsonl:

  real tokens/s   median over the steps after the first --skip (cuBLASLt plans and the like warm up there)
  memory          the largest peak_memory_gib logged: on a GPU the device memory in use (cudaMemGetInfo), i.e.
                  packtrain's arenas, which are sized once for the run's largest batch, plus the CUDA context
                  and library workspaces (the same for every strategy)
  val loss        the validation loss at the end (the whole validation split); the start is printed too.
                  With several seeds, each strategy's loss is also compared with padding's of the same seed
                  (same data order): the mean of those paired differences and its standard error, so that
                  "equal within noise" can be read off instead of one run against another

Runs go to a scratch directory (checkpoints are large); OUT_DIR keeps each run's metrics.jsonl and log, and
packing.jsonl (one summary per strategy and seed) for bench/report.py.
Usage: packing_gpu.py --packtrain BUILD/packtrain --data data/prepared/default --out OUT_DIR [--model 110m]
       [--examples 72] [--steps 300] [--device cuda] [--seeds 1,2]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STRATEGIES = ["padding", "concat", "concat-posid", "flatten", "bfd"]


def summarize(strategy, metrics_path, skip):
    steps, vals = [], []
    for line in open(metrics_path):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        (steps if r.get("type") == "train" else vals if r.get("type") == "val" else []).append(r)
    if not steps:
        return {"status": "error", "error": "no training step in metrics.jsonl"}
    timed = [r for r in steps if r["step"] > skip] or steps
    return {"status": "ok", "steps": steps[-1]["step"],
            "median_real_tokens_per_s": statistics.median(r["real_tokens_per_s"] for r in timed),
            "peak_memory_gib": max(r["peak_memory_gib"] for r in steps),
            "padding_pct": statistics.mean(r["padding_pct"] for r in timed),
            "mfu_pct": statistics.median(r["mfu_pct"] for r in timed),
            "tokens_seen": steps[-1]["tokens_seen"], "final_train_loss": steps[-1]["loss"],
            "first_val_loss": vals[0]["loss"] if vals else None,
            "final_val_loss": vals[-1]["loss"] if len(vals) > 1 else None}


def table(records):
    """Markdown lines: one row per strategy and seed, ratios to padding of the same seed, and with several
    seeds the paired loss differences to padding (bench/report.py uses this too)."""
    seeds = sorted({r.get("seed", 1) for r in records})
    base = {seed: next((r for r in records if r["strategy"] == "padding" and r.get("seed", 1) == seed
                        and r["status"] == "ok"), None) for seed in seeds}
    fmt = lambda v, spec: "-" if v is None else format(v, spec)
    lines = ["| strategy | seed | real tokens/s (median step) | x padding | memory GiB | x padding | pad % | MFU % | "
             "real tokens seen | val loss start -> end | status |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        seed = r.get("seed", 1)
        if r["status"] != "ok":
            lines.append(f"| {r['strategy']} | {seed} | - | - | - | - | - | - | - | - | {r['status']}: "
                         f"{r.get('error', '')} |".replace("\n", " "))
            continue
        b = base[seed]
        ratio = lambda k: f"{r[k] / b[k]:.2f}x" if b else "-"
        lines.append(f"| {r['strategy']} | {seed} | {r['median_real_tokens_per_s']:,.0f} | "
                     f"{ratio('median_real_tokens_per_s')} | {r['peak_memory_gib']:.2f} | {ratio('peak_memory_gib')} | "
                     f"{r['padding_pct']:.1f} | {r['mfu_pct']:.1f} | {r['tokens_seen']:,} | "
                     f"{fmt(r['first_val_loss'], '.4f')} -> {fmt(r['final_val_loss'], '.4f')} | ok |")
    if len(seeds) < 2:
        return lines
    lines += ["", "| strategy | final val loss, mean over seeds | minus padding's (paired by seed) | standard error | seeds |",
              "|---|---|---|---|---|"]
    for strategy in dict.fromkeys(r["strategy"] for r in records):
        pairs = [(r["final_val_loss"], base[r.get("seed", 1)]["final_val_loss"]) for r in records
                 if r["strategy"] == strategy and r["status"] == "ok" and r.get("final_val_loss") is not None
                 and base[r.get("seed", 1)] and base[r.get("seed", 1)].get("final_val_loss") is not None]
        if not pairs:
            continue
        diffs = [a - b for a, b in pairs]
        stderr = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else None
        lines.append(f"| {strategy} | {statistics.mean(a for a, _ in pairs):.4f} | {statistics.mean(diffs):+.4f} | "
                     f"{fmt(stderr, '.4f')} | {len(pairs)} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packtrain", required=True, help="the packtrain binary")
    ap.add_argument("--data", required=True, help="prepared dataset directory (packtrain prepare)")
    ap.add_argument("--out", required=True, help="results directory")
    ap.add_argument("--model", default="110m")
    ap.add_argument("--examples", type=int, default=72,
                    help="examples per step, every strategy (72 on the default corpus: the fixed-row strategies get 2 rows of 2048)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", default="6e-4")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--eval-batches", default="0", help="validation batches (0: the whole split)")
    ap.add_argument("--skip", type=int, default=5, help="first steps left out of the median")
    ap.add_argument("--timeout", type=float, default=90, help="seconds per run")
    ap.add_argument("--budget", type=float, default=400, help="seconds for all runs (later runs are skipped)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES))
    ap.add_argument("--seeds", default="1", help="comma-separated seeds; every strategy runs once per seed")
    args = ap.parse_args()
    if not os.path.isfile(os.path.join(args.data, "metadata.json")):
        sys.exit(f"--data {args.data}: no prepared dataset there (metadata.json missing); make one with "
                 "`packtrain prepare` as scripts/main.sh does")
    if not os.access(args.packtrain, os.X_OK):
        sys.exit(f"--packtrain {args.packtrain}: not an executable; build the packtrain target")
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        sys.exit(f"--seeds {args.seeds}: expected comma-separated integers, e.g. 1,2,3")
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        sys.exit(f"--strategies: unknown {unknown}; choose from {STRATEGIES}")
    run_root = os.path.join(args.out, "packing")
    os.makedirs(run_root, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="packing_gpu_")
    summary_path = os.path.join(args.out, "packing.jsonl")
    open(summary_path, "w").close()
    print(f"packtrain train --model {args.model} --examples {args.examples} --steps {args.steps} "
          f"--device {args.device} on {args.data}, seeds {seeds}", flush=True)
    records = []
    started = time.perf_counter()
    try:
        for seed, strategy in ((seed, strategy) for seed in seeds for strategy in strategies):
            name = strategy if len(seeds) == 1 else f"{strategy}_s{seed}"
            run_dir = os.path.join(scratch, name)
            log_path = os.path.join(run_root, f"{name}.log")
            cmd = [args.packtrain, "train", "--data", args.data, "--out", run_dir, "--model", args.model,
                   "--strategy", strategy, "--examples", str(args.examples), "--steps", str(args.steps),
                   "--lr", args.lr, "--min-lr", str(float(args.lr) / 10), "--warmup", str(max(1, args.steps // 10)),
                   "--eval-every", "0", "--eval-batches", args.eval_batches, "--save-every", "0",
                   "--log-every", "1", "--seed", str(seed), "--device", args.device, "--no-resume"]
            record = {"bench": "packing", "strategy": strategy, "model": args.model, "examples": args.examples,
                      "seed": seed,
                      "device": args.device, "data": args.data}
            t0 = time.perf_counter()
            limit = min(args.timeout, args.budget - (t0 - started))
            try:
                if limit < 5:
                    raise TimeoutError
                with open(log_path, "w") as log:
                    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=limit)
                status = "ok" if proc.returncode == 0 else "error"
                error = "" if status == "ok" else f"exit code {proc.returncode}: {last_line(log_path)}"
            except subprocess.TimeoutExpired:
                status, error = "timeout", f"stopped after {limit:.0f} s"
            except TimeoutError:
                status, error = "skipped", f"time budget ({args.budget:.0f} s) spent"
            record["wall_s"] = time.perf_counter() - t0
            metrics = os.path.join(run_dir, "metrics.jsonl")
            if os.path.exists(metrics):
                shutil.copy(metrics, os.path.join(run_root, f"{name}.metrics.jsonl"))
                record.update(summarize(strategy, metrics, args.skip))
            if status != "ok" or not os.path.exists(metrics):
                record.update(status=status if status != "ok" else "error", error=error or "no metrics.jsonl")
            shutil.rmtree(run_dir, ignore_errors=True)
            records.append(record)
            with open(summary_path, "a") as f:
                f.write(json.dumps(record) + "\n")
            done = (f"{record['median_real_tokens_per_s']:,.0f} real tok/s, {record['peak_memory_gib']:.2f} GiB, "
                    f"val loss {record['final_val_loss']}" if record["status"] == "ok"
                    else f"{record['status']}: {record.get('error')}")
            print(f"{name:<16} {record['wall_s']:6.1f} s  {done}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print("\n".join(table(records)))
    if any(r["status"] != "ok" for r in records):
        sys.exit(1)


def last_line(path):
    lines = [l.strip() for l in open(path, errors="replace") if l.strip()]
    return lines[-1][:300] if lines else "(no output)"


if __name__ == "__main__":
    main()
