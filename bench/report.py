#!/usr/bin/env python3
"""Writes OUT_DIR/REPORT.md (tables) and OUT_DIR/*.png (charts) from what the GPU benchmarks left in OUT_DIR.

Reads, each optional (a missing or failed section is reported as such, the others still are):
  attention.jsonl   bench/peers/attention_torch.py --json: TFLOP/s per (batch, shape, kernel)
  train_gpu.jsonl   bench_train_gpu --json: packtrain training steps, padding and flatten
  train_hf.jsonl    bench/peers/train_hf.py --json: Hugging Face on the same batches
  packing.jsonl     bench/packing_gpu.py: `packtrain train` per packing strategy
  train_sparse.jsonl        bench_train_gpu --sparse24 --json: dense vs 2:4 sparse FFN training steps
  sparse_convergence.jsonl  bench/sparse_convergence.py: validation loss of dense, 2:4 and the ablations
  sparse_ffn.jsonl  bench_sparse_ffn --json: per GEMM ("part": "gemm") and per FFN block ("part": "block"),
                    dense_ms and "<mode>_speedup" per sparse mode; other records are shown field by field
  optimizer_modes/optimizer_modes.jsonl  bench/optimizer_modes.py: each optimizer memory mode's run
  logs/llama8b*.log, logs/qwen7b.log, logs/mistral7b.log, logs/llama8b_hf.log  the 7-8B full fine-tunes and
                    HF's attempt
  status.tsv, env.txt  bench/gpu.sh: each section's exit code and seconds; the machine and versions
Usage: report.py OUT_DIR
"""
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peers"))
from packing_gpu import table as packing_table  # noqa: E402
from train_hf import LLMC_QUOTE, comparison, fmt_num, llmc_line, read_jsonl  # noqa: E402

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # tables only
    plt = None


class Report:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.lines = []

    def add(self, *lines):
        self.lines.extend(lines)

    def chart(self, fig, name, alt):
        path = os.path.join(self.out_dir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        self.add(f"![{alt}]({name})", "")


def num(v):
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def attention_section(rep, records):
    rep.add("## Attention kernels (causal, bf16)", "")
    if not records:
        rep.add("_No attention results (attention.jsonl missing): see logs/attention.log._", "")
        return
    kernels = list(dict.fromkeys(r["kernel"] for r in records))
    keys = list(dict.fromkeys((r["batch"], r["H"], r["Hkv"], r["D"]) for r in records))
    by = {(r["batch"], r["H"], r["Hkv"], r["D"], r["kernel"]): r for r in records}
    rep.add("TFLOP/s on real tokens, forward / forward+backward (backward counted 2.5x forward). torch FA2 runs "
            "the packed tokens with cu_seqlens like packtrain; cuDNN (torch SDPA, cuDNN backend) and flash "
            "padded run the SFT-like batch padded to its longest example (torch has no varlen entry for "
            "cuDNN), and the 32 rows of 1024 and the 8k and 32k sequences as they are.", "")
    rep.add("| batch | H/Hkv/D | " + " | ".join(kernels) + " | packtrain / FA2 | packtrain / cuDNN |",
            "|---|---|" + "---|" * (len(kernels) + 2))
    for key in keys:
        cell = lambda k: by.get(key + (k,), {})
        pair = lambda k: f"{fmt_num(cell(k).get('fwd_tflops'), '.1f')} / {fmt_num(cell(k).get('fwdbwd_tflops'), '.1f')}"
        def ratio(peer):
            a, b = cell("packtrain varlen"), cell(peer)
            parts = [a.get(f) / b.get(f) if num(a.get(f)) and num(b.get(f)) and b.get(f) else None
                     for f in ("fwd_tflops", "fwdbwd_tflops")]
            return " / ".join(fmt_num(p, ".2f") + ("x" if p is not None else "") for p in parts)
        rep.add(f"| {key[0]} | {key[1]}/{key[2]}/{key[3]} | " + " | ".join(pair(k) for k in kernels) +
                f" | {ratio('torch FA2 varlen')} | {ratio('cuDNN SDPA')} |")
    rep.add("")
    if plt:
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), sharey=True)
        width = 0.8 / len(kernels)
        for ax, field, title in zip(axes, ("fwd_tflops", "fwdbwd_tflops"), ("forward", "forward + backward")):
            for i, k in enumerate(kernels):
                vals = [by.get(key + (k,), {}).get(field) for key in keys]
                vals = [v if num(v) else 0 for v in vals]
                ax.bar([x + i * width for x in range(len(keys))], vals, width, label=k)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))])
            ax.set_xticklabels([f"{b}\n{h}/{hk}/{d}" for b, h, hk, d in keys], fontsize=8)
            ax.set_title(f"attention {title}, TFLOP/s on real tokens")
            ax.grid(axis="y", alpha=0.3)
        axes[0].legend(fontsize=8)
        rep.chart(fig, "attention.png", "attention TFLOP/s")


def training_section(rep, packtrain, hf):
    rep.add("## Training step: packtrain vs Hugging Face transformers on the same batches", "")
    if not packtrain and not hf:
        rep.add("_No training results (train_gpu.jsonl, train_hf.jsonl missing): see logs/train_gpu.log, "
                "logs/train_hf.log._", "")
        return
    rep.add("Llama 110m (hidden 768, 12 layers, 12 heads, intermediate 2048, vocab 32000), synthetic SFT-like "
            "batches (lognormal lengths, median ~330, max 2048), bf16 compute with fp32 master weights, AdamW, "
            "clipping at 1.0. HF runs exactly packtrain's examples (bench_train_gpu --dump-batches). Real "
            "tokens/s of the median timed step; memory: packtrain's arenas (weights, optimizer, activations) "
            "and the device memory in use, HF's torch.cuda max allocated / reserved.", "")
    summaries = []
    sizes = sorted({r["examples"] for r in packtrain + hf if r.get("preset", "110m") == "110m"})
    for examples in sizes:
        lines, summary = comparison(packtrain, hf, examples)
        rep.add(*lines, "")
        summaries.append(summary)
    rep.add(llmc_line(packtrain) + ".", "")
    others = [r for r in packtrain if r.get("preset") != "110m"]
    if others:
        rep.add("packtrain on other presets (no peer run):", "",
                "| preset | examples | strategy | real tokens/s (median step) | MFU % | arenas GiB |", "|---|---|---|---|---|---|")
        for r in others:
            rep.add(f"| {r['preset']} | {r['examples']} | {r['strategy']} | {fmt_num(r.get('median_real_tokens_per_s'), ',.0f')} "
                    f"| {fmt_num(r.get('mfu_pct'), '.1f')} | {fmt_num(r.get('arena_gib'), '.1f')} |")
        rep.add("")
    if plt and sizes:
        fig, axes = plt.subplots(1, len(sizes), figsize=(6.5 * len(sizes), 0.5 + 0.42 * 10), squeeze=False)
        for ax, examples in zip(axes[0], sizes):
            names, vals, colors = [], [], []
            for r in packtrain:
                if r.get("preset") == "110m" and r["examples"] == examples:
                    names.append(f"packtrain {r['strategy']}"), vals.append(r["median_real_tokens_per_s"])
                    colors.append("tab:blue")
            for r in hf:
                if r["examples"] == examples:
                    ok = r["status"] == "ok"
                    names.append(f"HF {r['name']}" + ("" if ok else f" ({r['status']})"))
                    vals.append(r["median_real_tokens_per_s"] if ok else 0), colors.append("tab:orange")
            names.append("llm.c GPT-2 124M (quoted)"), vals.append(LLMC_QUOTE["tokens_per_s"]), colors.append("lightgray")
            bars = ax.barh(range(len(names)), vals, color=colors)
            bars[-1].set_hatch("//")
            ax.set_yticks(range(len(names)))
            ax.set_yticklabels(names, fontsize=8)
            ax.invert_yaxis()
            for b, v in zip(bars, vals):
                ax.text(v, b.get_y() + b.get_height() / 2, f" {v:,.0f}" if v else " did not run",
                        va="center", fontsize=7)
            ax.set_title(f"110m, {examples} examples/step: real tokens/s")
            ax.grid(axis="x", alpha=0.3)
        rep.chart(fig, "training.png", "training tokens/s")


def packing_section(rep, records):
    rep.add("## Packing strategies on packtrain (the paper's Table 2)", "")
    if not records:
        rep.add("_No packing results (packing.jsonl missing): see logs/packing.log (it needs a prepared dataset)._", "")
        return
    r0 = records[0]
    rep.add(f"`packtrain train --device {r0.get('device')}`, model {r0.get('model')}, {r0.get('examples')} examples "
            f"per step for every strategy (the fixed-row strategies take the rows that hold about that many), "
            f"same seeds and steps, dataset {r0.get('data')}. Memory: the largest peak_memory_gib of metrics.jsonl, "
            "i.e. device memory in use (arenas sized for the run's largest batch, plus the CUDA context).", "")
    rep.add(*packing_table(records), "")
    ok = [r for r in records if r["status"] == "ok"]
    if plt and ok:
        fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
        several = len({r.get("seed", 1) for r in ok}) > 1
        names = [f"{r['strategy']} s{r.get('seed', 1)}" if several else r["strategy"] for r in ok]
        for ax, field, title, spec in zip(axes, ("median_real_tokens_per_s", "peak_memory_gib", "final_val_loss"),
                                          ("real tokens/s (median step)", "device memory GiB", "final validation loss"),
                                          (",.0f", ".2f", ".4f")):
            vals = [r.get(field) if num(r.get(field)) else 0 for r in ok]
            bars = ax.bar(names, vals, color=["tab:gray" if r["strategy"] == "padding" else "tab:blue" for r in ok])
            for b, v in zip(bars, vals):
                ax.text(b.get_x() + b.get_width() / 2, v, format(v, spec), ha="center", va="bottom", fontsize=7)
            if field == "final_val_loss" and any(vals):
                lo = min(v for v in vals if v)
                ax.set_ylim(lo * 0.97, max(vals) * 1.01)
            ax.set_title(title)
            ax.tick_params(axis="x", labelsize=8)
            ax.grid(axis="y", alpha=0.3)
        rep.chart(fig, "packing.png", "packing strategies")


def speedup_modes(records):
    """The sparse modes of bench_sparse_ffn's records: keys "<mode>_speedup", in first-seen order."""
    return list(dict.fromkeys(k[:-len("_speedup")] for r in records for k in r if k.endswith("_speedup")))


def speedup_cell(r, mode):
    v = r.get(mode + "_speedup")
    if not num(v):
        return "-"
    return f"{v:.2f}x" + (" (ran dense)" if r.get(mode + "_ran_sparse") is False else "")


def sparse_section(rep, records):
    if not records:
        return  # optional: bench_sparse_ffn is built only where the sparse branch is merged
    rep.add("## 2:4 sparse FFN: cuSPARSELt vs dense cuBLASLt (bench_sparse_ffn)", "",
            "x = dense time / sparse time (> 1: the sparse path is faster); TFLOP/s count the dense-equivalent "
            "2MNK. \"ran dense\": the sparse call fell back to the dense GEMM.", "")
    gemms = [r for r in records if r.get("part") == "gemm"]
    blocks = [r for r in records if r.get("part") == "block"]
    others = [r for r in records if r.get("part") not in ("gemm", "block")]
    if gemms:
        modes = speedup_modes(gemms)
        rep.add("Single GEMMs of the FFN linears (fwd y = x W^T, dx = dy W, dw = g^T x with g 2:4 along tokens):", "",
                "| d/ff | linear | GEMM | M x N x K | dense ms | dense TFLOP/s | " + " | ".join(modes) + " |",
                "|---|---|---|---|---|---|" + "---|" * len(modes))
        for r in gemms:
            flops = 2.0 * r["M"] * r["N"] * r["K"]
            rep.add(f"| {r['d']}/{r['ff']} | {r['linear']} | {r['gemm']} | {r['M']} x {r['N']} x {r['K']} | "
                    f"{r['dense_ms']:.3f} | {flops / (r['dense_ms'] * 1e9):.0f} | "
                    + " | ".join(speedup_cell(r, m) for m in modes) + " |")
        rep.add("")
    if blocks:
        modes = speedup_modes(blocks)
        rep.add("FFN block, forward + backward (MVUE pruning of the output gradients and weight recompression "
                "included where mvue is true):", "",
                "| d/ff | M | mvue | dense ms | " + " | ".join(modes) + " |", "|---|---|---|---|" + "---|" * len(modes))
        for r in blocks:
            rep.add(f"| {r['d']}/{r['ff']} | {r['M']} | {r.get('mvue')} | {r['dense_ms']:.3f} | "
                    + " | ".join(speedup_cell(r, m) for m in modes) + " |")
        rep.add("")
    if others:
        keys = list(dict.fromkeys(k for r in others for k in r if k != "bench"))
        cell = lambda v: format(v, ".3g") if isinstance(v, float) else str(v)
        rep.add("| " + " | ".join(keys) + " |", "|" + "---|" * len(keys))
        for r in others:
            rep.add("| " + " | ".join(cell(r.get(k, "")) for k in keys) + " |")
        rep.add("")
    if plt and (gemms or blocks):
        panels = [(rows, title) for rows, title in ((gemms, "single GEMMs, best sparse mode"),
                                                    (blocks, "FFN block fwd+bwd")) if rows]
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 0.8 + 0.22 * max(len(r) for r, _ in panels)),
                                 squeeze=False)
        for ax, (rows, title) in zip(axes[0], panels):
            modes = speedup_modes(rows)
            if rows is gemms:
                names = [f"{r['d']}/{r['ff']} {r['linear']} {r['gemm']} M={r['M']}" for r in rows]
                vals = [max([r.get(m + "_speedup") or 0 for m in modes if r.get(m + "_ran_sparse") is not False] or [0])
                        for r in rows]
                ax.barh(range(len(rows)), vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
            else:
                names = [f"{r['d']}/{r['ff']} M={r['M']}" for r in rows]
                height = 0.8 / max(1, len(modes))
                for i, m in enumerate(modes):
                    ax.barh([y + i * height for y in range(len(rows))], [r.get(m + "_speedup") or 0 for r in rows],
                            height, label=m)
                ax.legend(fontsize=7)
            ax.axvline(1.0, color="black", lw=0.8)
            ax.set_yticks([y + (0 if rows is gemms else 0.4 - height / 2) for y in range(len(rows))])
            ax.set_yticklabels(names, fontsize=6)
            ax.invert_yaxis()
            ax.set_title(f"{title}: dense time / sparse time", fontsize=9)
        rep.chart(fig, "sparse_ffn.png", "sparse FFN speedups")


def sparse_training_section(rep, steps, convergence):
    rep.add("## 2:4 sparse FFN training end to end", "")
    if not steps and not convergence:
        rep.add("_No results (train_sparse.jsonl, sparse_convergence.jsonl missing): see logs/train_sparse.log, "
                "logs/sparse_convergence.log._", "")
        return
    if steps:
        rep.add("`bench_train_gpu --sparse24`: one optimizer step per batch, flatten packing, dense FFNs against 2:4 "
                "sparse ones (MVUE weight gradients, masked decay; the GEMM autotuner warmed on every batch).", "",
                "| model | examples/step | FFNs | real tokens/s | MFU % | vs dense |", "|---|---|---|---|---|---|")
        dense = {(r["preset"], r["examples"]): r for r in steps if not r.get("sparse24")}
        for r in steps:
            d = dense.get((r["preset"], r["examples"]))
            ratio = r["real_tokens_per_s"] / d["real_tokens_per_s"] if d else None
            rep.add(f"| {r['preset']} | {r['examples']} | {'2:4' if r.get('sparse24') else 'dense'} | "
                    f"{r['real_tokens_per_s']:,.0f} | {r['mfu_pct']:.1f} | "
                    f"{format(ratio, '.2f') + 'x' if ratio else '-'} |")
        rep.add("")
    if convergence:
        rep.add("`bench/sparse_convergence.py`: real `packtrain train` runs, same seed, data and tokens; the ablations "
                "drop masked decay or dense fine-tuning.", "",
                "| run | final val loss | vs dense | real tokens/s | vs dense | mean mask flip rate |",
                "|---|---|---|---|---|---|")
        for r in convergence:
            cell = lambda v, spec: format(v, spec) if num(v) else "-"
            rep.add(f"| {r['run']} | {cell(r.get('final_val_loss'), '.4f')} | {cell(r.get('loss_vs_dense'), '.4f')} | "
                    f"{r['median_real_tokens_per_s']:,.0f} | {cell(r.get('speed_vs_dense'), '.2f')} | "
                    f"{cell(r.get('mean_flip_rate'), '.5f')} |")
        rep.add("")
        if os.path.exists(os.path.join(rep.out_dir, "sparse_convergence.png")):
            rep.add("![validation loss, dense vs 2:4](sparse_convergence.png)", "")


STEP_LINE = re.compile(r"step +(\d+)/\d+ \|.* ([0-9.]+) tok/s \|.* MFU ([0-9.]+)% \| mem ([0-9.]+) GiB")


def full_finetune_row(name, log):
    """The steady steps of a `packtrain train` log: median real tokens/s and MFU past step 2, peak GiB, and
    the memory plan's total, or None when the log holds no step."""
    text = open(log).read()
    steps = [(int(m[1]), float(m[2]), float(m[3]), float(m[4])) for m in STEP_LINE.finditer(text)]
    steady = [s for s in steps if s[0] > 2] or steps
    if not steady:
        return None
    median = lambda xs: sorted(xs)[len(xs) // 2]
    plan = re.search(r"^  total +([0-9.]+) GiB", text, re.M)
    host = re.search(r"and ([0-9.]+) GiB of masters and moments in pinned host memory", text)
    return (f"| {name} | {median([s[1] for s in steady]):,.0f} | {median([s[2] for s in steady]):.1f} | "
            f"{max(s[3] for s in steps):.1f} | {plan[1] if plan else '-'} | {host[1] if host else '-'} |")


def memory_section(rep, out_dir, modes):
    """#24: each optimizer memory mode on the same steps, and the 7-8B full fine-tunes on one GPU."""
    if modes:
        rep.add("## Optimizer memory modes (llama3.2-1b, the same steps and tokens)", "",
                "| mode | final val loss | vs f32 | real tok/s | vs f32 | MFU % | peak GiB | state MiB |",
                "|---|---|---|---|---|---|---|---|")
        for r in modes:
            rep.add(f"| {r['run']} | {fmt_num(r.get('final_val_loss'), '.4f')} | {fmt_num(r.get('loss_vs_f32'), '.4f')} | "
                    f"{r['median_real_tokens_per_s']:,.0f} | {fmt_num(r.get('speed_vs_f32'), '.2f')} | "
                    f"{r['median_mfu_pct']:.1f} | {r['peak_memory_gib']:.2f} | {fmt_num(r.get('optimizer_state_mib'), '.1f')} |")
        rep.add("")
    rows = []
    for name in ("llama8b", "llama8b_in_backward", "llama8b_offload", "llama8b_fast", "qwen7b", "mistral7b"):
        log = os.path.join(out_dir, "logs", f"{name}.log")
        row = full_finetune_row(name, log) if os.path.exists(log) else None
        if row:
            rows.append(row)
    if rows:
        rep.add("## Full fine-tuning of 7-8B models on one GPU (16k tokens a micro-batch, flatten)", "",
                "| run | real tok/s | MFU % | peak GiB | planned GiB | pinned host GiB |", "|---|---|---|---|---|---|",
                *rows, "")
    hf = os.path.join(out_dir, "logs", "llama8b_hf.log")
    if os.path.exists(hf):
        tail = [line for line in open(hf).read().splitlines() if line.strip()][-4:]
        rep.add("Hugging Face on the 8B shape (logs/llama8b_hf.log, its last lines):", "", "```", *tail, "```", "")


def status_section(rep, out_dir):
    path = os.path.join(out_dir, "status.tsv")
    if not os.path.exists(path):
        return
    rep.add("## Sections run", "", "| section | exit code | seconds | log |", "|---|---|---|---|")
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3:
            name, rc, secs = parts
            rc_text = rc if rc == "0" else f"**{rc}**" + (" (timed out)" if rc == "124" else "")
            log = "-" if rc == "skipped" else f"logs/{name}.log"
            rep.add(f"| {name} | {rc_text} | {secs} | {log} |")
    rep.add("")


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: report.py OUT_DIR (a directory bench/gpu.sh wrote)")
    out_dir = sys.argv[1]
    load = lambda name: read_jsonl(os.path.join(out_dir, name))
    rep = Report(out_dir)
    rep.add("# packtrain GPU benchmarks", "")
    env = os.path.join(out_dir, "env.txt")
    if os.path.exists(env):
        rep.add("```", *open(env).read().rstrip().splitlines(), "```", "")
    rep.add("Every figure below was measured in this one run, packtrain and its peers side by side; ratios are "
            "packtrain / peer unless labelled. Figures quoted from elsewhere say so.", "")
    if plt is None:
        rep.add("_matplotlib is not installed: tables only._", "")
    attention_section(rep, load("attention.jsonl"))
    training_section(rep, load("train_gpu.jsonl"), load("train_hf.jsonl"))
    packing_section(rep, load("packing.jsonl"))
    sparse_section(rep, load("sparse_ffn.jsonl"))
    sparse_training_section(rep, load("train_sparse.jsonl"), load("sparse_convergence.jsonl"))
    memory_section(rep, out_dir, load(os.path.join("optimizer_modes", "optimizer_modes.jsonl")))
    status_section(rep, out_dir)
    path = os.path.join(out_dir, "REPORT.md")
    with open(path, "w") as f:
        f.write("\n".join(rep.lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
