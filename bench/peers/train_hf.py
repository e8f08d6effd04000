#!/usr/bin/env python3
"""Hugging Face transformers' model of the same family, the peer of bench_train_gpu, trained on exactly its batches.

bench_train_gpu --dump-batches FILE writes the model config (HF format) and the flatten batches of each
configuration (input_ids, labels, position_ids restarting per example). The config's architecture says the
objective: a causal LM (AutoModelForCausalLM; labels -100 at every example's first token) or, for the
encoder preset bert-base, a masked LM (BertForMaskedLM; input ids already masked, labels the original token
at each chosen position and -100 elsewhere, unshifted). This script rebuilds the same examples and trains
the same model shape on them in each HF layout:

  padded     one row per example, padded to the batch's longest, attention_mask (what HF does by default)
  flattened  one row, position_ids restarting per example: DataCollatorWithFlattening's layout

Causal LM: attn_implementation sdpa or flex_attention, each eagerly and under torch.compile(dynamic=True);
HF keeps the flattened examples apart itself, from the position_ids.

Masked LM (BERT): padded sdpa, and each packed path transformers has for BERT. transformers 5.17 (the GPU
machine's) builds an encoder's mask without looking at position_ids, so a flattened row would attend across
its examples (5.25 derives the sdpa and flex_attention masks below from them). So the flattened BERT row
gets the mask that keeps its examples apart, built every step from each token's example and passed as a 4D
attention_mask, which BERT takes as it is:
  flex_attention     a BlockMask: the blocks outside every example are skipped, so attention costs about
                     what varlen attention does (at 128-token block granularity)
  sdpa               a block-diagonal T x T bool mask over the row of T tokens: SDPA has no varlen entry, so
                     it computes all T^2 query-key pairs and holds the T^2 mask (and its bias form): more
                     attention work than padding once the row holds more than a few examples
  flash_attention_2  no mask: varlen FlashAttention-2 from the position_ids (cu_seqlens), the path
                     DataCollatorWithFlattening was made for; it needs the flash-attn package, and reports
                     "unavailable" without it
Before its first step, each flattened BERT configuration checks that it keeps the examples apart: logits and
loss of the first batch's first examples flattened, against the same examples padded, through the same
model (fp32; bf16 autocast for flash_attention_2, which has no fp32 kernel). A mismatch is reported as
"wrong" and the configuration is not timed. Dropout is off, as packtrain's BERT has none.

Every configuration: bf16 autocast, fp32 master weights, fused AdamW, gradient clipping at 1.0, the same
initial weights. Each runs in a forked child with a time limit, so an out-of-memory error, a compile failure
or a hang is reported as such and the next configuration still runs; the whole script keeps to --budget
seconds (configurations that no longer fit are reported as skipped).

Figures per configuration: median step time after --warmup steps, real (non-pad) tokens/s of the median
step and of all timed steps, peak torch.cuda.max_memory_allocated / max_memory_reserved, and the first
step's loss. Every HF configuration starts from the same weights on the same batch, so their first losses
agree up to bf16 rounding; packtrain's initial weights are its own draw (normal, std 0.02, as HF initializes
BERT and the Llama-like families), so its first loss agrees with theirs in expectation only. Ratios:
packtrain flatten against HF's best configuration, its best padded one and its best flattened one.
Without CUDA it runs on the CPU: a smoke test of this script only (bench/peers/train_hf_smoke.py).
Usage: train_hf.py --batches FILE [--preset 110m] [--packtrain train_gpu.jsonl] [--json FILE] [--steps 8]
                   [--budget 240]
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

# (layout, attention, compiled, seconds allowed, round) per objective. plan() runs them round by round, and
# within a round size by size, as the budget cuts from the end.
CONFIGS = {
    # HF's best (compiled flex_attention) at every size first, as the comparison that matters; then per size
    # the eager configurations; the compiled sdpa layouts last.
    "causal": [
        ("flattened", "flex_attention", False, 90, 1),
        ("flattened", "sdpa", False, 60, 1),
        ("padded", "sdpa", False, 60, 1),
        ("flattened", "flex_attention", True, 300, 0),  # its compile alone took over 150 s on the H200
        ("flattened", "sdpa", True, 120, 2),
        ("padded", "sdpa", True, 120, 2),
    ],
    # The two peers issue #27 names first: HF padded (sdpa) and its likely best packed path (compiled
    # flex_attention); then the other packed paths; compiled padding last.
    "masked": [
        ("padded", "sdpa", False, 60, 0),
        ("flattened", "flex_attention", True, 300, 0),
        ("flattened", "flash_attention_2", False, 60, 1),
        ("flattened", "flex_attention", False, 90, 1),
        ("flattened", "sdpa", False, 90, 1),
        ("padded", "sdpa", True, 120, 2),
    ],
}

# Examples of the first batch that a flattened masked-LM configuration checks against padding, and how far
# their logits may differ (max abs). bert-base at initialization on 8 examples (CPU): 3e-6 apart in fp32,
# 2e-2 in bf16; 1.6 when the mask lets the examples see each other.
CHECK_EXAMPLES = 8
CHECK_TOLERANCE = {"fp32": 1e-3, "bf16": 0.2}


def plan(sizes, objective):
    """(examples, (layout, attn, compiled, allowed)) in the order to run."""
    configs = CONFIGS[objective]
    order = sorted((c[4], n, i) for n in sizes for i, c in enumerate(configs))
    return [(n, configs[i][:4]) for _, n, i in order]


def objective_of(entry):
    """"masked" when the dumped config names a masked-LM head (BertForMaskedLM), else "causal"."""
    return "masked" if entry["config"].get("architectures", [""])[0].endswith("ForMaskedLM") else "causal"


def config_name(layout, attn, compiled):
    return f"{layout} {attn}{' compiled' if compiled else ''}"


def examples_of(batch, objective):
    """The examples of a flatten batch: (input_ids, labels) per segment of position_ids restarting at 0."""
    ids, labels, pos = batch["input_ids"], batch["labels"], batch["position_ids"]
    starts = [i for i, p in enumerate(pos) if p == 0] + [len(ids)]
    out = []
    for s, e in zip(starts, starts[1:]):
        if objective == "causal" and labels[s] != -100:
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


def example_ids(torch, examples, device):
    """The example of each token of the flattened row."""
    return torch.tensor([k for k, (ex, _) in enumerate(examples) for _ in ex], dtype=torch.long, device=device)


def packed_mask(torch, attn, doc):
    """Model arguments that keep a flattened masked-LM row's examples apart (doc: each token's example), as
    the module docstring says: a 4D attention_mask for sdpa and flex_attention. Nothing for flash_attention_2,
    nor where doc is None (padded rows, causal LMs)."""
    if doc is None or attn == "flash_attention_2":
        return {}
    if attn == "sdpa":
        return {"attention_mask": (doc[:, None] == doc[None, :])[None, None]}
    from torch.nn.attention.flex_attention import create_block_mask
    n = doc.numel()
    # Compiled as transformers compiles its own BlockMasks (torch >= 2.6).
    return {"attention_mask": create_block_mask(lambda b, h, q, kv: doc[q] == doc[kv], 1, None, n, n,
                                                device=doc.device, _compile=True)}


def check_packed(torch, model, examples, attn, device):
    """(max |logit difference|, relative loss difference, precision) of `examples` flattened with their
    packed_mask against the same examples padded, through the same model."""
    precision = "bf16" if attn == "flash_attention_2" else "fp32"  # FlashAttention has no fp32 kernel
    flat = model_inputs(torch, examples, "flattened", device)
    padded = model_inputs(torch, examples, "padded", device)
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
        a = model(**flat, **packed_mask(torch, attn, example_ids(torch, examples, device)), use_cache=False)
        b = model(**padded, use_cache=False)
    logits = b.logits[padded["attention_mask"].bool()]  # the real tokens, in the flattened row's order
    return ((a.logits[0].float() - logits.float()).abs().max().item(),
            abs(a.loss.item() / b.loss.item() - 1), precision)


class Unavailable(Exception):
    """This transformers or torch lacks what the configuration needs."""


class Wrong(Exception):
    """The configuration computes something else than padding does."""


def run_config(entry, layout, attn, compiled, warmup, steps):
    """One configuration in this process: returns the result dict (status ok) or raises."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers.utils import is_flash_attn_2_available

    if attn == "flash_attention_2" and not is_flash_attn_2_available():
        raise Unavailable("flash_attention_2 needs the flash-attn package (and CUDA), which is not installed")
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a smoke test of this script only
    objective = objective_of(entry)
    config = AutoConfig.for_model(**entry["config"])  # the family packtrain's config.json names
    model_class = AutoModelForCausalLM
    if objective == "masked":
        model_class = AutoModelForMaskedLM
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0  # packtrain's BERT has none
    torch.manual_seed(0)
    with torch.device(device):
        model = model_class.from_config(config, attn_implementation=attn, dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=device == "cuda")
    forward = torch.compile(model, dynamic=True) if compiled else model

    batches = [examples_of(b, objective) for b in entry["batches"]]
    first_timed = min(entry.get("warmup_batches", 1), len(batches) - 1)
    inputs = [model_inputs(torch, ex, layout, device) for ex in batches]
    real = [sum(len(ex) for ex, _ in b) for b in batches]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    checked = {}
    # Causal LMs: HF keeps flattened examples apart from the position_ids. Masked LM: the mask, built in the
    # step (as transformers builds its own in the forward) and checked against padding first.
    packed = objective == "masked" and layout == "flattened"
    docs = [example_ids(torch, ex, device) if packed else None for ex in batches]
    if packed:
        logit_diff, loss_diff, precision = check_packed(torch, model, batches[0][:CHECK_EXAMPLES], attn, device)
        checked = {"check_logit_max_diff": logit_diff, "check_loss_rel_diff": loss_diff, "check_precision": precision}
        if not logit_diff <= CHECK_TOLERANCE[precision]:
            raise Wrong(f"flattened logits differ from padded ones by up to {logit_diff:.3g} ({precision}; "
                        f"loss {loss_diff:.2e} relative): the examples are not kept apart")

    def step(i):
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = forward(**inputs[i], **packed_mask(torch, attn, docs[i]), use_cache=False).loss
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
            "peak_reserved_gib": gib(torch.cuda.max_memory_reserved()) if device == "cuda" else None, **checked}


def classify(exc):
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, (Unavailable, Wrong)):
        return type(exc).__name__.lower(), str(exc)
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
    fastest = lambda rs: max(rs, key=lambda r: r["median_real_tokens_per_s"]) if rs else None
    best = fastest(ok)
    flat = ours.get((preset, examples, "flatten"))
    summary = {"examples": examples, "hf_best": best["name"] if best else None}
    lines.append("")
    if best and flat:
        summary["speedup"] = flat["median_real_tokens_per_s"] / best["median_real_tokens_per_s"]
        lines.append(f"- packtrain flatten / HF's best ({best['name']}): **{summary['speedup']:.2f}x** real tokens/s")
        for layout in ("padded", "flattened"):
            r = fastest([r for r in ok if r["layout"] == layout])
            if r:
                summary[f"speedup_{layout}"] = flat["median_real_tokens_per_s"] / r["median_real_tokens_per_s"]
                lines.append(f"- packtrain flatten / HF's best {layout} ({r['name']}): "
                             f"{summary[f'speedup_{layout}']:.2f}x real tokens/s")
        if best.get("peak_allocated_gib"):
            summary["memory_ratio"] = best["peak_allocated_gib"] / flat["arena_gib"]
            lines.append(f"- peak memory, HF's best (max allocated) / packtrain flatten (arenas): "
                         f"{summary['memory_ratio']:.2f}x")
        apart = max(abs(r["first_loss"] / flat["first_loss"] - 1) for r in ok)
        lines.append(f"- first-step loss: packtrain flatten {flat['first_loss']:.4f}, HF "
                     f"{min(r['first_loss'] for r in ok):.4f} to {max(r['first_loss'] for r in ok):.4f}: up to "
                     f"{apart:.2%} apart (different initial draws of the same distribution"
                     + ("; over 2%: check that the two models match)" if apart > 0.02 else ")"))
    elif not ok:
        lines.append("- no HF configuration ran at this size: no ratio")
    best_config = config_name("flattened", "flex_attention", True)
    if preset == "110m" and examples in EARLIER_HF_BEST and \
            not any(r["name"] == best_config and r["status"] == "ok" for r in theirs):
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
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM  # noqa: F401
    out = open(args.json, "a") if args.json else None
    results = []
    by_size = {e["examples"]: e for e in entries}
    for examples, (layout, attn, compiled, allowed) in plan(sorted(by_size), objective_of(entries[0])):
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
               f"peak {fmt_num(record.get('peak_allocated_gib'), '.1f')} GiB  loss {record['first_loss']:.4f}"
               if record["status"] == "ok" else f"{record['status']}: {record.get('error', '')}")
        if "check_logit_max_diff" in record:
            msg += (f"  (vs padding: logits {record['check_logit_max_diff']:.1e}, "
                    f"loss {record['check_loss_rel_diff']:.1e} rel., {record['check_precision']})")
        print(f"HF {entry['examples']:>3} ex  {name:<32} {msg}", flush=True)
        if out:
            out.write(json.dumps(record) + "\n")
            out.flush()
    packtrain = read_jsonl(args.packtrain)
    print()
    for examples in sorted({e["examples"] for e in entries}):
        print("\n".join(comparison(packtrain, results, examples, args.preset)[0]))
        print()
    if args.preset == "110m":
        print(llmc_line(packtrain))
    print(f"\ntrain_hf.py took {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
