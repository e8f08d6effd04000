"""Runs of `packtrain train` for the benchmarks that compare training settings on the same data and seed
(bench/sparse_convergence.py, bench/optimizer_modes.py): one run's command, its log, and its metrics.jsonl."""
import json
import os
import shutil
import statistics
import subprocess


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
    """Epochs of the prepared dataset's train split that `steps` micro-batches of `tokens` cover."""
    with open(os.path.join(data, "metadata.json")) as f:
        return steps * tokens / json.load(f)["splits"]["train"]["tokens"]
