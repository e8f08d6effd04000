"""Runs of `packtrain train` for the benchmarks that compare training settings on the same data and seed
(bench/sparse_convergence.py, bench/optimizer_modes.py): one run's command, its log, and its metrics.jsonl."""
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile


def read_metrics(path):
    """The records of a metrics.jsonl; a line cut short by a killed run is skipped."""
    records = []
    for line in open(path):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def run_tag(name):
    """A file-name-safe tag of a run's name ("2:4 decay 2e-4" -> "24_decay_2e-4")."""
    return name.replace(":", "").replace(" ", "_").replace(".", "p")


def train(cmd, name, scratch, out, prefix):
    """Runs `cmd` (a packtrain train command whose --out is scratch/TAG) with its log in
    out/PREFIX_TAG.log; keeps its metrics as out/PREFIX_TAG.jsonl. Returns the metrics' records, or None
    when the run failed."""
    tag = run_tag(name)
    print(f"== {name}: {' '.join(cmd)}", flush=True)
    with open(os.path.join(out, f"{prefix}_{tag}.log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    metrics = os.path.join(scratch, tag, "metrics.jsonl")
    if rc != 0 or not os.path.isfile(metrics):
        print(f"   failed (exit {rc}); see {prefix}_{tag}.log", flush=True)
        return None
    shutil.copy(metrics, os.path.join(out, f"{prefix}_{tag}.jsonl"))
    return read_metrics(metrics)


def steady(records, key):
    """The median of a train-record field past the first tenth of the run (its warm-up), or 0."""
    train_records = [r for r in records if r.get("type") == "train"]
    values = [r[key] for r in train_records[len(train_records) // 10:] if key in r]
    return statistics.median(values) if values else 0


def train_epochs(data, steps, tokens):
    """Epochs of the prepared dataset's train split that `steps` micro-batches of `tokens` cover; exits
    when `data` holds no prepared dataset."""
    if not os.path.isfile(os.path.join(data, "metadata.json")):
        sys.exit(f"{data}: no prepared dataset (run scripts/main.sh or packtrain prepare first)")
    with open(os.path.join(data, "metadata.json")) as f:
        return steps * tokens / json.load(f)["splits"]["train"]["tokens"]


def add_arguments(ap, runs, model, steps, lr, eval_every):
    """The arguments of a comparison of `runs` (name, extra train arguments), with its defaults."""
    ap.add_argument("--packtrain", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", default=model)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--tokens", type=int, default=16384, help="token budget per micro-batch (flatten)")
    ap.add_argument("--lr", default=lr)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--eval-every", type=int, default=eval_every)
    ap.add_argument("--eval-batches", type=int, default=0, help="validation batches (0: the whole split)")
    ap.add_argument("--runs", default=",".join(name for name, _ in runs), help="which of the runs above")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-args", default="", help="more `packtrain train` arguments for every run")


def pick_runs(args, runs):
    """The (name, extra arguments) of the runs --runs names, in its order; exits naming unknown ones."""
    known = dict(runs)
    wanted = [name for name in args.runs.split(",") if name]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        sys.exit(f"--runs: unknown {', '.join(unknown)}; choose from {', '.join(known)}")
    return [(name, known[name]) for name in wanted]


def run_all(args, runs, prefix, summarize):
    """Trains each run from the same seed on the same data (flatten, cosine lr from args.lr to a tenth,
    nothing saved), each with its log and metrics in args.out; returns summarize(name, records) of each run
    that finished."""
    os.makedirs(args.out, exist_ok=True)
    results = []
    scratch = tempfile.mkdtemp(prefix=prefix + "_")
    try:
        for name, extra in runs:
            cmd = [args.packtrain, "train", "--data", args.data, "--out", os.path.join(scratch, run_tag(name)),
                   "--no-resume", "--no-save", "--model", args.model, "--device", args.device,
                   "--strategy", "flatten", "--tokens", str(args.tokens), "--steps", str(args.steps),
                   "--warmup", str(args.steps // 20), "--lr", args.lr, "--min-lr", str(float(args.lr) / 10),
                   "--eval-every", str(args.eval_every), "--eval-batches", str(args.eval_batches),
                   "--log-every", "10", "--seed", str(args.seed)] + shlex.split(args.train_args) + extra
            records = train(cmd, name, scratch, args.out, prefix)
            if records is not None:
                results.append(summarize(name, records))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results
