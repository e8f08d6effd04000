#!/usr/bin/env python3
"""Hugging Face transformers' model of the same family (AutoModelForCausalLM), the peer of bench_train_gpu, trained on exactly its batches.

bench_train_gpu --dump-batches FILE writes the model config (HF format) and the flatten batches of each
configuration (input_ids, labels with -100 at every example's first token, position_ids restarting per
example). This script rebuilds the same examples and trains the same model shape on them in each HF layout:

  padded     one row per example, padded to the batch's longest, attention_mask (what HF does by default)
  flattened  one row, position_ids restarting per example: DataCollatorWithFlattening's layout

with attn_implementation sdpa or flex_attention, each eagerly and under torch.compile(dynamic=True): bf16
autocast, fp32 master weights, fused AdamW, gradient clipping at 1.0, the same initial weights in every
configuration. Each configuration runs in a forked child with a time limit, so an out-of-memory error, a
compile failure or a hang is reported as such and the next configuration still runs; the whole script keeps
to --budget seconds (configurations that no longer fit are reported as skipped).

Figures per configuration: median step time after --warmup steps, real (non-pad) tokens/s of the median
step and of all timed steps, peak torch.cuda.max_memory_allocated / max_memory_reserved, and the first
step's loss (every configuration starts from the same weights on the same batch: they agree up to bf16
rounding).
Usage: train_hf.py --batches FILE [--packtrain train_gpu.jsonl] [--json FILE] [--steps 8] [--budget 240]
"""
import argparse
import ctypes
import json
import math
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback

LLMC_QUOTE = {"tokens_per_s": 482e3, "what": "llm.c GPT-2 124M, B=32 x T=1024 (32k tokens/step), cuDNN attention, "
              "no packing: quoted from ANCHORS.md (H200), not measured here"}

# HF's best measured earlier on the H200 (flattened flex_attention under torch.compile, on these batches:
# docs/results/h200-2026-12-02-s4/RESULTS.md; ANCHORS.md's 85k at 64 examples was a run that recompiled),
# per examples/step: quoted when that configuration does not run here.
EARLIER_HF_BEST = {16: 204e3, 64: 403e3}

# (layout, attention, compiled, seconds allowed). See plan() for the order they run in.
CONFIGS = [
    ("flattened", "flex_attention", False, 90),
    ("flattened", "sdpa", False, 60),
    ("padded", "sdpa", False, 60),
    ("flattened", "flex_attention", True, 300),  # its compile alone took over 150 s on the H200
    ("flattened", "sdpa", True, 120),
    ("padded", "sdpa", True, 120),
]


def plan(sizes):
    """(examples, config) in the order to run: HF's best (compiled flex_attention) at every size first, as
    the comparison that matters; then per size the eager configurations; the compiled sdpa layouts last, as
    the budget cuts from the end."""
    best = [(n, CONFIGS[3]) for n in sizes]
    eager = [(n, c) for n in sizes for c in CONFIGS[:3]]
    return best + eager + [(n, c) for n in sizes for c in CONFIGS[4:]]


def config_name(layout, attn, compiled):
    return f"{layout} {attn}{' compiled' if compiled else ''}"


def examples_of(batch):
    """The examples of a flatten batch: (input_ids, labels) per segment of position_ids restarting at 0."""
    ids, labels, pos = batch["input_ids"], batch["labels"], batch["position_ids"]
    starts = [i for i, p in enumerate(pos) if p == 0] + [len(ids)]
    out = []
    for s, e in zip(starts, starts[1:]):
        if labels[s] != -100:
            raise ValueError(f"batch dump: the label of an example's first token (at {s}) is {labels[s]}, "
                             "expected -100 as DataCollatorWithFlattening sets it; regenerate the dump")
        out.append((ids[s:e], labels[s:e]))
    return out


def model_inputs(torch, examples, layout, device):
    """HF inputs for one step: one flattened row with position_ids, or padded rows with an attention mask."""
    if layout == "flattened":
        ids = [t for ex, _ in examples for t in ex]
        labels = [t for _, lab in examples for t in lab]
        pos = [i for ex, _ in examples for i in range(len(ex))]
        as_row = lambda v: torch.tensor([v], dtype=torch.long, device=device)
        return {"input_ids": as_row(ids), "labels": as_row(labels), "position_ids": as_row(pos)}
    longest = max(len(ex) for ex, _ in examples)
    pad = lambda v, fill: v + [fill] * (longest - len(v))
    rows = lambda vs: torch.tensor(vs, dtype=torch.long, device=device)
    return {"input_ids": rows([pad(ex, 0) for ex, _ in examples]),
            "labels": rows([pad(lab, -100) for _, lab in examples]),
            "attention_mask": rows([pad([1] * len(ex), 0) for ex, _ in examples])}


def run_config(entry, layout, attn, compiled, warmup, steps):
    """One configuration in this process: returns the result dict (status ok) or raises."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test of this script only
    config = AutoConfig.for_model(**entry["config"])  # the family packtrain's config.json names
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=device == "cuda")
    forward = torch.compile(model, dynamic=True) if compiled else model

    batches = [examples_of(b) for b in entry["batches"]]
    first_timed = min(entry.get("warmup_batches", 1), len(batches) - 1)
    inputs = [model_inputs(torch, ex, layout, device) for ex in batches]
    real = [sum(len(ex) for ex, _ in b) for b in batches]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def step(i):
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = forward(**inputs[i], use_cache=False).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.perf_counter()
    first_loss = step(0).item()
    for i in range(1, warmup):
        step(i % len(batches))
    sync()
    warmup_s = time.perf_counter() - t0
    times, rates, timed_real = [], [], 0
    for n in range(steps):  # the batches bench_train_gpu timed, in its order
        i = first_timed + n % (len(batches) - first_timed)
        ts = time.perf_counter()
        step(i)
        sync()
        times.append(time.perf_counter() - ts)
        rates.append(real[i] / times[-1])
        timed_real += real[i]
    med = lambda v: sorted(v)[len(v) // 2] if len(v) % 2 else 0.5 * sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1])
    gib = lambda b: b / 2**30
    return {"status": "ok", "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
            "torch": torch.__version__, "transformers": __import__("transformers").__version__,
            "first_loss": first_loss, "warmup_s": warmup_s, "median_step_ms": 1e3 * med(times),
            "median_real_tokens_per_s": med(rates), "real_tokens_per_s": timed_real / sum(times),
            "real_tokens_per_step": timed_real / steps,
            "processed_tokens_per_step": sum(inputs[first_timed + n % (len(batches) - first_timed)]["input_ids"].numel()
                                             for n in range(steps)) / steps,
            "peak_allocated_gib": gib(torch.cuda.max_memory_allocated()) if device == "cuda" else None,
            "peak_reserved_gib": gib(torch.cuda.max_memory_reserved()) if device == "cuda" else None}


def classify(exc):
    text = f"{type(exc).__name__}: {exc}"
    if "OutOfMemory" in type(exc).__name__ or "out of memory" in str(exc).lower():
        return "oom", text.splitlines()[0][:300]
    if any(k in type(exc).__module__ + type(exc).__name__ for k in ("torch._dynamo", "torch._inductor", "Backend")):
        return "compile-error", text.splitlines()[0][:300]
    return "error", text.splitlines()[0][:300]


def child(conn, entry, layout, attn, compiled, warmup, steps):
    os.setpgid(0, 0)  # its own process group: a timeout ends it with the compile workers it started
    try:  # and it dies with the parent, which a section time limit may kill (Linux: PR_SET_PDEATHSIG)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
    except (AttributeError, OSError):
        pass
    try:
        result = run_config(entry, layout, attn, compiled, warmup, steps)
    except BaseException as exc:  # report every failure to the parent; it decides what to print
        status, message = classify(exc)
        if status == "error":
            traceback.print_exc()
        result = {"status": status, "error": message}
    conn.send(result)
    conn.close()


def run_isolated(entry, layout, attn, compiled, warmup, steps, timeout):
    ctx = mp.get_context("fork")  # the parent never touches CUDA, so each child starts it afresh
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=child, args=(send, entry, layout, attn, compiled, warmup, steps))
    p.start()
    send.close()
    result, timed_out = None, False
    try:
        timed_out = not recv.poll(timeout)
        if not timed_out:
            try:
                result = recv.recv()
            except EOFError:  # the child died without a word
                pass
        p.join(5 if result is not None else 0)
    finally:  # also on SIGTERM: the child, and the compile workers it may have left
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.join()
    if result is None:
        return {"status": "timeout", "error": f"no result after {timeout:.0f} s"} if timed_out else \
            {"status": "crashed", "error": f"the child exited with code {p.exitcode} without a result"}
    return result


# ---- tables (bench/report.py uses these too; they need no torch) ----

def fmt_num(v, spec):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def packtrain_by_key(records):
    return {(r["preset"], r["examples"], r["strategy"]): r for r in records if r.get("bench") == "train_gpu"}


def comparison(packtrain, hf, examples, preset="110m"):
    """Markdown lines comparing packtrain and HF at `examples` per step, and a summary dict of the ratios."""
    ours = packtrain_by_key(packtrain)
    theirs = [r for r in hf if r.get("examples") == examples and r.get("preset", preset) == preset]
    lines = [f"| {preset}, {examples} examples/step | real tokens/s (median step) | all timed steps | "
             "median step ms | peak GiB (alloc / reserved) | first loss | status |", "|---|---|---|---|---|---|---|"]
    for strategy in ("padding", "flatten"):
        r = ours.get((preset, examples, strategy))
        if r:
            lines.append(f"| packtrain {strategy} | {fmt_num(r.get('median_real_tokens_per_s'), ',.0f')} | "
                         f"{fmt_num(r.get('real_tokens_per_s'), ',.0f')} | {fmt_num(r.get('median_step_ms'), '.1f')} | "
                         f"{fmt_num(r.get('arena_gib'), '.1f')} arenas / {fmt_num(r.get('device_used_gib'), '.1f')} "
                         f"device | {fmt_num(r.get('first_loss'), '.3f')} | ok |")
    for r in theirs:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error', '')}".replace("|", "/")
        lines.append(f"| HF {r['name']} | {fmt_num(r.get('median_real_tokens_per_s'), ',.0f')} | "
                     f"{fmt_num(r.get('real_tokens_per_s'), ',.0f')} | {fmt_num(r.get('median_step_ms'), '.1f')} | "
                     f"{fmt_num(r.get('peak_allocated_gib'), '.1f')} / {fmt_num(r.get('peak_reserved_gib'), '.1f')} | "
                     f"{fmt_num(r.get('first_loss'), '.3f')} | {status} |")
    ok = [r for r in theirs if r["status"] == "ok"]
    best = max(ok, key=lambda r: r["median_real_tokens_per_s"]) if ok else None
    flat = ours.get((preset, examples, "flatten"))
    summary = {"examples": examples, "hf_best": best["name"] if best else None}
    lines.append("")
    if best and flat:
        summary["speedup"] = flat["median_real_tokens_per_s"] / best["median_real_tokens_per_s"]
        lines.append(f"- packtrain flatten / HF's best ({best['name']}): **{summary['speedup']:.2f}x** real tokens/s")
        if best.get("peak_allocated_gib"):
            summary["memory_ratio"] = best["peak_allocated_gib"] / flat["arena_gib"]
            lines.append(f"- peak memory, HF's best (max allocated) / packtrain flatten (arenas): "
                         f"{summary['memory_ratio']:.2f}x")
    elif not ok:
        lines.append("- no HF configuration ran at this size: no ratio")
    best_config = config_name("flattened", "flex_attention", True)
    if examples in EARLIER_HF_BEST and not any(r["name"] == best_config and r["status"] == "ok" for r in theirs):
        quoted = EARLIER_HF_BEST[examples]
        vs = f"; packtrain flatten here / that: {flat['median_real_tokens_per_s'] / quoted:.2f}x" if flat else ""
        lines.append(f"- HF {best_config} did not run here; an earlier run measured ~{quoted:,.0f} tokens/s for "
                     f"it at {examples} examples/step (H200, docs/results/h200-2026-12-02-s4: quoted, not "
                     f"measured here){vs}")
    return lines, summary


def llmc_line(packtrain):
    flats = [r for r in packtrain if r.get("bench") == "train_gpu" and r.get("preset") == "110m"
             and r.get("strategy") == "flatten"]
    ratio = ""
    if flats:
        r = max(flats, key=lambda r: r["examples"])
        ratio = (f"; packtrain flatten at {r['examples']} examples/step: {r['median_real_tokens_per_s']:,.0f} "
                 f"real tokens/s = {r['median_real_tokens_per_s'] / LLMC_QUOTE['tokens_per_s']:.2f}x of it "
                 "(different workload: full 1024-token rows, GPT-2 vs Llama 110m of about the same FLOPs/token)")
    return f"{LLMC_QUOTE['what']}: {LLMC_QUOTE['tokens_per_s']:,.0f} tokens/s{ratio}"


def read_jsonl(path):
    out = []
    if path and os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a line cut short by a killed run
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", required=True, help="bench_train_gpu --dump-batches output")
    ap.add_argument("--packtrain", help="bench_train_gpu --json output, for the comparison table")
    ap.add_argument("--json", help="append one JSON object per HF configuration here")
    ap.add_argument("--preset", default="110m")
    ap.add_argument("--examples", type=int, nargs="*", help="configurations to run (default: all in the dump)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (compiles happen here)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per configuration")
    ap.add_argument("--budget", type=float, default=240, help="seconds for the whole script")
    ap.add_argument("--only", help="comma-separated configuration names to run, e.g. 'flattened sdpa'")
    args = ap.parse_args()
    started = time.perf_counter()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup of a running configuration
    try:
        dump = json.load(open(args.batches))
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"--batches {args.batches}: cannot read it ({e}); write it with bench_train_gpu --dump-batches")
    entries = [e for e in dump.get("configs", []) if e["preset"] == args.preset
               and (not args.examples or e["examples"] in args.examples)]
    if not entries:
        sys.exit(f"--batches {args.batches}: no {args.preset} configuration in it")
    for e in entries:
        if len(e["batches"]) < 2:
            sys.exit(f"--batches: {e['examples']} examples/step has {len(e['batches'])} batch; need a warm-up and a timed one")
    only = {s.strip() for s in args.only.split(",")} if args.only else None
    # Imported once here (no CUDA yet): every forked child inherits the modules instead of importing them.
    import torch  # noqa: F401
    from transformers import AutoModelForCausalLM  # noqa: F401
    out = open(args.json, "a") if args.json else None
    results = []
    by_size = {e["examples"]: e for e in entries}
    for examples, (layout, attn, compiled, allowed) in plan(sorted(by_size)):
        entry = by_size[examples]
        name = config_name(layout, attn, compiled)
        if only and name not in only:
            continue
        left = args.budget - (time.perf_counter() - started)
        record = {"bench": "train_hf", "engine": "hf", "preset": args.preset, "examples": entry["examples"],
                  "name": name, "layout": layout, "attn": attn, "compiled": compiled,
                  "warmup": args.warmup, "steps": args.steps}
        if left < min(allowed, 30):
            record.update(status="skipped", error=f"time budget ({args.budget:.0f} s) spent")
        else:
            t0 = time.perf_counter()
            record.update(run_isolated(entry, layout, attn, compiled, args.warmup, args.steps, min(allowed, left)))
            record["wall_s"] = time.perf_counter() - t0
        results.append(record)
        msg = (f"{record['median_real_tokens_per_s']:>10,.0f} real tok/s  {record['median_step_ms']:8.1f} ms  "
               f"peak {fmt_num(record.get('peak_allocated_gib'), '.1f')} GiB  loss {record['first_loss']:.3f}"
               if record["status"] == "ok" else f"{record['status']}: {record.get('error', '')}")
        print(f"HF {entry['examples']:>3} ex  {name:<32} {msg}", flush=True)
        if out:
            out.write(json.dumps(record) + "\n")
            out.flush()
    packtrain = read_jsonl(args.packtrain)
    print()
    for examples in sorted({e["examples"] for e in entries}):
        print("\n".join(comparison(packtrain, results, examples, args.preset)[0]))
        print()
    print(llmc_line(packtrain))
    print(f"\ntrain_hf.py took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
