#!/usr/bin/env python3
"""Hugging Face oracle for packtrain's rotary embeddings (src/model/rope_scaling.h): for a dozen configs of the
rope types default, linear, dynamic, yarn and llama3, the config.json as transformers writes it (or, for
"transformers 4" cases, as such checkpoints ship it: rope_scaling plus rope_theta) and the inverse frequencies
and attention scaling that transformers' LlamaRotaryEmbedding uses for a batch whose largest position id is
given (dynamic NTK depends on it; every other type ignores it). tests/model/rope_scaling_test.cpp replays it.

    rope_oracle.py OUT.json        (tests/fixtures/rope/expected.json)

Per case and max position:
  inv_freq_f32       what transformers computes (float32, the real thing): a fresh rotary module run on a batch
                     whose position ids reach max_position, as a fresh model does for that batch
  inv_freq_f64       the same transformers functions run with torch's float32 mapped to float64 (HF builds its
                     tensors with dtype=torch.float / torch.float32), so that the formulas compare at ~1e-15
  attention_scaling  the factor on cos and sin (python floats in both runs)
"rotation": for one yarn case, HF's apply_rotary_pos_emb of a random float64 q [T, H, D] at packed positions,
with cos and sin from the rotary module (which computes them in float32, then casts to float64).
Run with torch and transformers installed (CPU is enough).
"""
import contextlib
import copy
import json
import os
import sys
import tempfile

import torch
import transformers
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

# (name, style, head_dim, max_position_embeddings, rope fields, max positions). style "v5": LlamaConfig built
# with rope_parameters and saved by transformers; "v4": the config.json fields as transformers 4 checkpoints
# carry them (rope_scaling and rope_theta at the top level), loaded as they are.
CASES = [
    ("default_d64", "v5", 64, 2048, {"rope_type": "default", "rope_theta": 10000.0}, [1000]),
    ("default_qwen2_d128", "v4", 128, 32768, {"rope_theta": 1000000.0, "rope_scaling": None}, [1000]),
    ("linear_default_theta_d128", "v4", 128, 8192, {"rope_scaling": {"type": "linear", "factor": 4.0}}, [1000]),
    ("linear_d64", "v5", 64, 2048, {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.5}, [1000]),
    ("llama3_llama31_8b_d128", "v4", 128, 131072,
     {"rope_theta": 500000.0, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
     [1000]),
    ("llama3_llama32_1b_d64", "v5", 64, 131072,
     {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, [1000]),
    ("yarn_qwen_d128", "v4", 128, 131072,
     {"rope_theta": 1000000.0,
      "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}, [1000]),
    ("yarn_attention_factor_d64", "v5", 64, 32768,
     {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 8.0, "original_max_position_embeddings": 4096,
      "attention_factor": 0.9, "beta_fast": 16.0, "beta_slow": 2.0}, [1000]),
    ("yarn_mscale_d64", "v5", 64, 163840,
     {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096,
      "mscale": 1.0, "mscale_all_dim": 0.707}, [1000]),
    ("yarn_no_truncate_d128", "v5", 128, 32768,
     {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 4096,
      "truncate": False}, [1000]),
    ("yarn_default_original_d64", "v4", 64, 8192, {"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, [1000]),
    ("dynamic_d128", "v5", 128, 4096, {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
     [100, 4095, 4096, 10000]),
    ("dynamic_d64", "v4", 64, 2048, {"rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "factor": 4.0}},
     [2047, 5000]),
]
ROTATION_CASE = "yarn_qwen_d128"
ROTATION_POSITIONS = [0, 1, 2, 3, 0, 1, 2, 40, 0, 100]  # three packed examples
ROTATION_HEADS = 2


def config_json(style, head_dim, max_pos, rope):
    base = {"vocab_size": 32, "hidden_size": 2 * head_dim, "intermediate_size": 16, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": head_dim,
            "max_position_embeddings": max_pos}
    if style == "v4":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **base, **rope}
    with tempfile.TemporaryDirectory() as d:
        LlamaConfig(**base, rope_parameters=copy.deepcopy(rope)).save_pretrained(d)
        with open(os.path.join(d, "config.json")) as f:
            return json.load(f)


def load(config):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        return LlamaConfig.from_pretrained(d)


@contextlib.contextmanager
def float64_torch():
    """HF's rope functions ask for torch.float / torch.float32 by name; map both to float64 while they run."""
    saved = torch.float, torch.float32, torch.get_default_dtype()
    torch.float = torch.float32 = torch.float64
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.float, torch.float32 = saved[0], saved[1]
        torch.set_default_dtype(saved[2])


def hf_frequencies(hf_config, max_position):
    """transformers' own run: a fresh rotary module sees position ids reaching max_position."""
    rotary = LlamaRotaryEmbedding(hf_config)
    rotary(torch.zeros(1, 1, hf_config.head_dim), torch.tensor([[0, max_position]]))
    assert rotary.inv_freq.dtype == torch.float32
    return rotary.inv_freq.tolist(), float(rotary.attention_scaling)


def hf_frequencies_f64(hf_config, max_position):
    """The same init functions in float64; dynamic recomputes only past max_position_embeddings, as the
    rotary module's dynamic_rope_update does (before that it keeps the frequencies computed at init)."""
    rope_type = hf_config.rope_parameters["rope_type"]
    seq_len = max_position + 1
    with float64_torch():
        if rope_type == "default":
            inv, scale = LlamaRotaryEmbedding.compute_default_rope_parameters(hf_config)
        elif rope_type == "dynamic" and seq_len > hf_config.max_position_embeddings:
            inv, scale = ROPE_INIT_FUNCTIONS[rope_type](hf_config, None, seq_len=seq_len)
        else:
            inv, scale = ROPE_INIT_FUNCTIONS[rope_type](hf_config, None)
    assert inv.dtype == torch.float64
    return inv.tolist(), float(scale)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    torch.manual_seed(0)
    out = {"transformers_version": transformers.__version__, "torch_version": torch.__version__, "cases": []}
    for name, style, head_dim, max_pos, rope, max_positions in CASES:
        config = config_json(style, head_dim, max_pos, rope)
        hf_config = load(config)
        case = {"name": name, "style": style, "head_dim": head_dim, "max_position_embeddings": max_pos,
                "config": config, "frequencies": []}
        for p in max_positions:
            inv32, scale32 = hf_frequencies(hf_config, p)
            inv64, scale64 = hf_frequencies_f64(hf_config, p)
            assert scale32 == scale64, (name, scale32, scale64)
            case["frequencies"].append({"max_position": p, "inv_freq_f32": inv32, "inv_freq_f64": inv64,
                                        "attention_scaling": scale32})
        out["cases"].append(case)
        if name == ROTATION_CASE:
            T, H, D = len(ROTATION_POSITIONS), ROTATION_HEADS, head_dim
            q = torch.randn(1, H, T, D, dtype=torch.float64)
            cos, sin = LlamaRotaryEmbedding(hf_config)(q, torch.tensor([ROTATION_POSITIONS]))
            q_rot, _ = apply_rotary_pos_emb(q, q, cos, sin)
            out["rotation"] = {"case": name, "positions": ROTATION_POSITIONS, "shape": [T, H, D],
                               "q": q[0].transpose(0, 1).flatten().tolist(),
                               "q_rotated": q_rot[0].transpose(0, 1).flatten().tolist()}
    os.makedirs(os.path.dirname(os.path.abspath(sys.argv[1])), exist_ok=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
