#!/usr/bin/env python3
"""Draws training runs' metrics.jsonl into one PNG with matplotlib: the loss (train as a line, validation as
markers), the learning rate, the gradient norm, real tokens/s, peak memory and MFU, against the step (or the
tokens seen), one colour per run, so that several runs compare in one chart. Steps whose optimizer update was
skipped for a non-finite loss or gradient norm are marked on the loss panel.

usage: scripts/plot_run.py RUN [RUN ...] [-o OUT.png] [--x step|tokens] [--smooth N] [--labels A,B,...]

RUN is a run directory (`packtrain train --out RUN`) or a metrics.jsonl. A run resumed after a crash logged
the steps since its last checkpoint twice; the later records (the ones its weights continued from) are drawn.
The PNG goes to RUN/metrics.png for one run, else to runs.png, unless -o names it. Needs matplotlib (Debian:
python3-matplotlib, which scripts/setup.sh installs).
"""
import argparse
import json
import math
import pathlib
import sys


def metrics_file(run):
    path = pathlib.Path(run)
    return path / "metrics.jsonl" if path.is_dir() else path


def read_run(path):
    """(train, val): step -> record, the last record of each step winning."""
    train, val = {}, {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{number}: not JSON ({e}); is this a packtrain metrics.jsonl?")
            if record.get("type") == "train":
                train[record["step"]] = record
            elif record.get("type") == "val":
                val[record["step"]] = record
    return train, val


def value(record, key):
    """The record's number, NaN where it is missing or was not finite (null)."""
    v = record.get(key)
    return math.nan if v is None else float(v)


def smoothed(values, window):
    """Trailing mean over `window` finite values (NaN stays NaN)."""
    if window <= 1:
        return values
    out, recent = [], []
    for v in values:
        if not math.isnan(v):
            recent = (recent + [v])[-window:]
        out.append(sum(recent) / len(recent) if recent and not math.isnan(v) else math.nan)
    return out


PANELS = [  # (record key, title, log scale)
    ("loss", "loss (train; validation: markers)", False),
    ("lr", "learning rate", False),
    ("grad_norm", "gradient norm (before clipping)", True),
    ("real_tokens_per_s", "real tokens/s (all ranks)", False),
    ("peak_memory_gib", "peak memory (GiB)", False),
    ("mfu_pct", "MFU (%)", False),
]


def plot(runs, labels, out, x_key, window):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    axes = axes.ravel()
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, ((train, val), label) in enumerate(zip(runs, labels)):
        colour = colours[i % len(colours)]
        steps = sorted(train)
        tokens = {s: train[s].get("tokens_seen", s) for s in steps}
        xs = [tokens[s] if x_key == "tokens" else s for s in steps]
        for ax, (key, _, _) in zip(axes, PANELS):
            ys = [value(train[s], key) for s in steps]
            if key == "loss" and window > 1:
                ax.plot(xs, ys, color=colour, alpha=0.25, linewidth=0.8)
                ax.plot(xs, smoothed(ys, window), color=colour, label=label)
            else:
                ax.plot(xs, ys, color=colour, label=label, linewidth=1.2)
        loss_ax = axes[0]
        if val:
            # Validation at step 0 (before training) sits at x = 0 on either axis.
            vx = [0 if s == 0 else (tokens.get(s, s) if x_key == "tokens" else s) for s in sorted(val)]
            loss_ax.plot(vx, [value(val[s], "loss") for s in sorted(val)], "o--", color=colour, markersize=5,
                         linewidth=0.8, label=f"{label} (validation)")
        skipped = [x for x, s in zip(xs, steps) if train[s].get("skipped")]
        for j, x in enumerate(skipped):
            loss_ax.axvline(x, color=colour, linestyle=":", alpha=0.6,
                            label=f"{label}: {len(skipped)} skipped (non-finite)" if j == 0 else None)
    for ax, (key, title, log) in zip(axes, PANELS):
        ax.set_title(title)
        ax.set_xlabel("tokens seen" if x_key == "tokens" else "step")
        ax.grid(True, alpha=0.3)
        if log:
            ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    if len(runs) > 1:
        axes[3].legend(fontsize=8)
    fig.suptitle(", ".join(labels))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory or metrics.jsonl")
    p.add_argument("-o", "--out", help="PNG to write (default: RUN/metrics.png for one run, else runs.png)")
    p.add_argument("--x", choices=["step", "tokens"], default="step", help="x axis (default: step)")
    p.add_argument("--smooth", type=int, default=1, metavar="N",
                   help="also draw the train loss as a trailing mean over N steps")
    p.add_argument("--labels", help="comma-separated names of the runs (default: their directories)")
    args = p.parse_args()

    files = [metrics_file(r) for r in args.runs]
    for f in files:
        if not f.is_file():
            sys.exit(f"{f}: no such file; give a run directory (train --out) or its metrics.jsonl")
    labels = args.labels.split(",") if args.labels else [f.resolve().parent.name for f in files]
    if len(labels) != len(files):
        sys.exit(f"--labels names {len(labels)} runs, but {len(files)} were given")
    runs = [read_run(f) for f in files]
    for f, (train, _) in zip(files, runs):
        if not train:
            sys.exit(f"{f}: no train records yet")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("plot_run.py needs matplotlib: apt-get install python3-matplotlib (or pip install matplotlib)")
    out = pathlib.Path(args.out) if args.out else (files[0].parent / "metrics.png" if len(files) == 1
                                                   else pathlib.Path("runs.png"))
    plot(runs, labels, out, args.x, args.smooth)
    print(out)


if __name__ == "__main__":
    main()
