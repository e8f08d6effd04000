#!/usr/bin/env python3
"""CPU smoke test of bench/peers/train_hf.py: runs it end to end on a hand-made dump in bench_train_gpu's
--dump-batches format (a tiny BertForMaskedLM on masked-LM batches with a 1-token example, and a tiny Llama on
causal batches), and checks that every configuration that can run on a CPU runs, that each flattened BERT
configuration keeps its examples apart (its check against padding passes, and a mask that lets them see each
other fails it), and that the HF configurations' first losses agree (same weights, same batch). The packtrain
records it hands to --packtrain are made up, to exercise the comparison table: the ratios printed are not
measurements. Run it with a Python that has torch and transformers (a CPU wheel will do); train_hf.py runs
under the same one.
Usage: PYTHON bench/peers/train_hf_smoke.py [--compiled]   (--compiled adds the torch.compile configurations)
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 96
MASK_ID, SPECIAL = 4, 5  # as bench_train_gpu: ids 0-4 special, 4 the mask token

BERT = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": VOCAB, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 64,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute",
        "tie_word_embeddings": True, "pad_token_id": 0, "torch_dtype": "float32"}
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": 32,
         "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
         "head_dim": 16, "hidden_act": "silu", "rms_norm_eps": 1e-5, "max_position_embeddings": 64,
         "tie_word_embeddings": False, "torch_dtype": "float32"}


def masked_example(rng, n):
    """(input ids, labels) as packtrain masks: 15% of tokens chosen, 80% become the mask token, 10% a random
    token, 10% stay; labels the original token where chosen, -100 elsewhere."""
    ids = [rng.randrange(SPECIAL, VOCAB) for _ in range(n)]
    inputs, labels = list(ids), [-100] * n
    for i in range(n):
        if rng.random() < 0.15:
            labels[i] = ids[i]
            r = rng.random()
            inputs[i] = MASK_ID if r < 0.8 else rng.randrange(SPECIAL, VOCAB) if r < 0.9 else ids[i]
    labels[0] = labels[0] if labels[0] != -100 else ids[0]  # a target on an example's first token too
    return inputs, labels


def causal_example(rng, n):
    ids = [rng.randrange(SPECIAL, VOCAB) for _ in range(n)]
    return ids, [-100] + ids[1:]


def dump_entry(preset, config, make, rng, examples, batches):
    out = []
    for b in range(batches):
        lengths = [1] + [rng.randint(2, 40) for _ in range(examples - 1)]  # a 1-token example first
        rng.shuffle(lengths)
        ids, labels, pos = [], [], []
        for n in lengths:
            i, lab = make(rng, n)
            ids += i
            labels += lab
            pos += range(n)
        out.append({"input_ids": ids, "labels": labels, "position_ids": pos})
    return {"preset": preset, "examples": examples, "config": config, "warmup_batches": 1, "batches": out}


def made_up_packtrain(preset, examples):
    """Records in bench_train_gpu --json's shape, with first_loss at ln(vocab) (the loss of uniform logits)."""
    return [{"bench": "train_gpu", "engine": "packtrain", "device": "smoke test: made up, not measured",
             "preset": preset, "examples": examples, "strategy": s, "median_real_tokens_per_s": 1000.0,
             "real_tokens_per_s": 1000.0, "median_step_ms": 1.0, "arena_gib": 1.0, "device_used_gib": 1.0,
             "first_loss": math.log(VOCAB)} for s in ("padding", "flatten")]


def run_peer(tmp, preset, only, steps=2):
    out = os.path.join(tmp, f"{preset}.jsonl")
    cmd = [sys.executable, os.path.join(HERE, "train_hf.py"), "--batches", os.path.join(tmp, "batches.json"),
           "--packtrain", os.path.join(tmp, "packtrain.jsonl"), "--json", out, "--preset", preset,
           "--warmup", "2", "--steps", str(steps), "--budget", "900", "--only", ",".join(only)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return [json.loads(line) for line in open(out)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compiled", action="store_true")
    args = ap.parse_args()
    rng = random.Random(7)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        entries = [dump_entry("bert-smoke", BERT, masked_example, rng, 6, 4),
                   dump_entry("llama-smoke", LLAMA, causal_example, rng, 6, 4)]
        json.dump({"configs": entries}, open(os.path.join(tmp, "batches.json"), "w"))
        with open(os.path.join(tmp, "packtrain.jsonl"), "w") as f:
            for e in entries:
                f.writelines(json.dumps(r) + "\n" for r in made_up_packtrain(e["preset"], e["examples"]))

        sys.path.insert(0, HERE)
        import train_hf
        names = lambda objective: [train_hf.config_name(*c[:3]) for c in train_hf.CONFIGS[objective]
                                   if args.compiled or not c[2]]
        for preset, objective in (("bert-smoke", "masked"), ("llama-smoke", "causal")):
            records = run_peer(tmp, preset, names(objective))
            for r in records:
                # What a CPU cannot run: flash_attention_2 (CUDA only), and flex_attention's backward
                cpu_only = (r["attn"] == "flash_attention_2" and r["status"] == "unavailable") or \
                    (r["attn"] == "flex_attention" and "backward on CPU" in r.get("error", ""))
                if r["status"] != "ok" and not cpu_only:
                    failures.append(f"{preset} {r['name']}: {r['status']}: {r.get('error')}")
            losses = [r["first_loss"] for r in records if r["status"] == "ok"]
            if losses and max(losses) / min(losses) - 1 > 1e-2:
                failures.append(f"{preset}: the HF configurations' first losses differ: {losses}")
            if objective == "masked" and not any(r["status"] == "ok" and r["layout"] == "flattened" for r in records):
                failures.append(f"{preset}: no flattened configuration ran")

        # Each packed mask keeps the examples apart (flex_attention's forward runs on a CPU, its backward
        # does not), and one that lets them see each other fails the check (here, in this process).
        import torch
        from transformers import AutoConfig, AutoModelForMaskedLM
        entry = entries[0]
        examples = train_hf.examples_of(entry["batches"][0], "masked")
        config = AutoConfig.for_model(**BERT)
        config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
        for attn in ("sdpa", "flex_attention"):
            torch.manual_seed(0)
            model = AutoModelForMaskedLM.from_config(config, attn_implementation=attn)
            diff, loss_diff, precision = train_hf.check_packed(torch, model, examples, attn, "cpu")
            print(f"flattened {attn} against padding: logits {diff:.1e} apart, loss {loss_diff:.1e} relative")
            if not diff <= train_hf.CHECK_TOLERANCE[precision]:
                failures.append(f"flattened {attn} differs from padding: logits {diff:.3g} apart")
        train_hf.packed_mask = lambda torch, attn, doc: {
            "attention_mask": torch.ones(1, 1, doc.numel(), doc.numel(), dtype=torch.bool)}
        try:
            train_hf.run_config(entry, "flattened", "sdpa", False, 1, 1)
            failures.append("a mask across examples passed the check against padding")
        except train_hf.Wrong as e:
            print(f"a mask across examples is caught: {e}")
    print("\n".join(["FAILED:"] + failures) if failures else "train_hf smoke test: ok")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
