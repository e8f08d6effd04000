#!/usr/bin/env python3
"""Hugging Face oracle for packtrain's CPU model (run where torch and transformers are installed, e.g. the
GPU machine). Writes tests/fixtures/hf_oracle/, which the C++ test tests/model/hf_oracle_test.cpp replays
without torch:

  hf_model/          a random LlamaForCausalLM (GQA, untied) saved by transformers (config + safetensors)
  hf_tied_model/     the same with tied embeddings
  batch.json         a packed batch: input_ids, position_ids restarting per example, cu_seqlens, labels
  expected.safetensors  HF's logits of the batch and its gradients of the summed loss (float64 reference)
  expected.json      loss sums, and HF's loss on packtrain_model/ (a checkpoint packtrain wrote)

Packed (varlen) attention is reproduced exactly by running each example as its own sequence.
Usage: hf_oracle.py FIXTURE_DIR   (FIXTURE_DIR/packtrain_model must exist: packtrain wrote it)
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

LENGTHS = [1, 6, 13, 2, 9]
VOCAB = 260


def make_model(tied, seed):
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                         rope_theta=10000.0, max_position_embeddings=128, tie_word_embeddings=tied,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger than the 0.02 default so logits are far from uniform
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.3)
            else:
                p.uniform_(0.5, 1.5)
    return model


def packed_batch(seed):
    g = torch.Generator().manual_seed(seed)
    examples = [torch.randint(0, VOCAB, (n,), generator=g) for n in LENGTHS]
    ids = torch.cat(examples)
    positions = torch.cat([torch.arange(n) for n in LENGTHS])
    cu = [0]
    for n in LENGTHS:
        cu.append(cu[-1] + n)
    labels = ids.clone()
    labels[torch.tensor(cu[:-1])] = -100  # HF flattening: no example predicts across a boundary
    labels[3] = -100                       # a masked (prompt) token inside an example
    return examples, {"input_ids": ids.tolist(), "position_ids": positions.tolist(), "cu_seqlens": cu,
                      "labels": labels.tolist()}


def loss_and_logits(model, examples, labels):
    """Sum of token losses over the packed batch, each example run alone (exact varlen semantics)."""
    logits, total, start = [], 0.0, 0
    for ex in examples:
        out = model(input_ids=ex[None, :]).logits[0]
        lab = torch.tensor(labels[start:start + len(ex)])
        if len(ex) > 1:
            total = total + torch.nn.functional.cross_entropy(out[:-1], lab[1:], ignore_index=-100, reduction="sum")
        logits.append(out)
        start += len(ex)
    return total, torch.cat(logits)


def main():
    out_dir = sys.argv[1]
    examples, batch = packed_batch(7)
    with open(os.path.join(out_dir, "batch.json"), "w") as f:
        json.dump(batch, f)
    tensors, expected = {}, {}
    for name, tied in (("hf_model", False), ("hf_tied_model", True)):
        model = make_model(tied, seed=3 if tied else 1)
        model.save_pretrained(os.path.join(out_dir, name), safe_serialization=True)
        model = model.double()
        loss, logits = loss_and_logits(model, examples, batch["labels"])
        loss.backward()
        expected[name + ".loss_sum"] = loss.item()
        tensors[name + ".logits"] = logits.detach().float().contiguous()
        for pname, p in model.named_parameters():
            tensors[name + ".grad." + pname] = p.grad.float().contiguous()
    packtrain_model = LlamaForCausalLM.from_pretrained(os.path.join(out_dir, "packtrain_model"),
                                                       attn_implementation="eager").double()
    with torch.no_grad():
        loss, _ = loss_and_logits(packtrain_model, examples, batch["labels"])
    expected["packtrain_model.loss_sum"] = loss.item()
    save_file(tensors, os.path.join(out_dir, "expected.safetensors"))
    with open(os.path.join(out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
    print(json.dumps(expected, indent=2))


if __name__ == "__main__":
    main()
