#!/usr/bin/env python3
"""Hugging Face oracle for packtrain's models: transformers computes (in float64, eager attention) the logits,
summed loss and gradients of tiny random models on a packed batch; C++ tests replay the fixtures without torch.
Packed (varlen) attention is reproduced exactly by running each example alone as its own sequence.
Run where torch and transformers are installed (CPU is enough).

Modes
  hf_oracle.py llama FIXTURE_DIR      (also: hf_oracle.py FIXTURE_DIR) the plain-Llama fixtures of
                                      tests/model/hf_oracle_test.cpp, in tests/fixtures/hf_oracle/:
      hf_model/, hf_tied_model/   random LlamaForCausalLM (GQA; untied / tied) saved by transformers
      batch.json                  packed batch: input_ids, position_ids restarting per example, cu_seqlens, labels
      expected.safetensors        "<model>.logits" and "<model>.grad.<param>" (float64 reference stored as f32)
      expected.json               "<model>.loss_sum", and "packtrain_model.loss_sum": HF's loss on
                                  FIXTURE_DIR/packtrain_model/ (a checkpoint packtrain wrote; must exist)
  hf_oracle.py families OUT_DIR [FAMILY ...]
                                      one tiny random model per family (tests/fixtures/hf_oracle/families/),
                                      every family or the ones named:
      OUT_DIR/<family>/hf_model/          save_pretrained (config.json, model.safetensors in float32)
      OUT_DIR/<family>/batch.json         packed batch, same format as above
      OUT_DIR/<family>/expected.safetensors  "logits" [T, V] and "grad.<HF parameter name>" for every named
                                          parameter (tied weights appear once, under the embedding's name)
      OUT_DIR/<family>/expected.json      loss_sum, family, transformers_version, and per family: layer_types /
                                          sliding_window / loss_sum_no_window (windowed families), rope_inv_freq /
                                          rope_attention_scaling (scaled rope)
      families: llama3 (rope llama3), llama_yarn (rope yarn), mistral (sliding window on every layer),
      qwen2 (qkv biases, window on layers >= max_window_layers), qwen3 (q/k norm, head_dim*heads != hidden,
      attention biases), gpt2 (learned positions, LayerNorm with bias, Conv1D, gelu_new), bert
      (BertForMaskedLM: post-LN, token types, embedding LayerNorm, exact gelu, the MLM head with its bias; a
      masked-LM batch: "objective": "mlm", unshifted labels on a subset of tokens, masked inputs)
  hf_oracle.py check OUT_DIR          for every OUT_DIR/<family>/packtrain_model/ (written by packtrain from
                                      hf_model/): load it with transformers, report the max abs difference of
                                      every tensor from hf_model's, and write "packtrain_model.loss_sum" (HF's
                                      float64 loss on the batch) and "packtrain_model.max_abs_diff" into that
                                      family's expected.json.
Every random parameter is nonzero and away from HF's init (matrices and position embeddings normal(0, 0.3),
norm weights uniform(0.5, 1.5), biases normal(0, 0.3)). Note: HF computes rotary cos/sin in float32 even in a
float64 model, so the reference carries ~1e-7 relative error there.
"""
import copy
import json
import math
import os
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (AutoModelForCausalLM, AutoModelForMaskedLM, BertConfig, BertForMaskedLM, GPT2Config,
                          GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

LENGTHS = [1, 6, 13, 2, 9]
VOCAB = 260


# ---------------------------------------------------------------------------------------------- llama (legacy)

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


def packed_batch(seed, lengths=LENGTHS):
    g = torch.Generator().manual_seed(seed)
    examples = [torch.randint(0, VOCAB, (n,), generator=g) for n in lengths]
    ids = torch.cat(examples)
    positions = torch.cat([torch.arange(n) for n in lengths])
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    labels = ids.clone()
    labels[torch.tensor(cu[:-1])] = -100  # HF flattening: no example predicts across a boundary
    labels[3] = -100                       # a masked (prompt) token inside an example
    return examples, {"input_ids": ids.tolist(), "position_ids": positions.tolist(), "cu_seqlens": cu,
                      "labels": labels.tolist()}


def loss_and_logits(model, examples, labels, per_example=None, mlm=False):
    """Sum of token losses over the packed batch, each example run alone (exact varlen semantics). Causal LM:
    the logits at t predict labels[t + 1]; masked LM (mlm): the logits at t predict labels[t]."""
    logits, total, start = [], 0.0, 0
    for ex in examples:
        out = model(input_ids=ex[None, :]).logits[0]
        lab = torch.tensor(labels[start:start + len(ex)])
        if mlm:
            term = torch.nn.functional.cross_entropy(out, lab, ignore_index=-100, reduction="sum")
            total = total + term
            if per_example is not None:
                per_example.append(term.item())
        elif len(ex) > 1:
            term = torch.nn.functional.cross_entropy(out[:-1], lab[1:], ignore_index=-100, reduction="sum")
            total = total + term
            if per_example is not None:
                per_example.append(term.item())
        elif per_example is not None:
            per_example.append(0.0)
        logits.append(out)
        start += len(ex)
    return total, torch.cat(logits)


def llama_mode(out_dir):
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


# ---------------------------------------------------------------------------------------------- families

FAMILY_LENGTHS = [1, 6, 13, 2, 9, 17]  # a 1-token example, short ones, and ones longer than every window
# intermediate 24 (not 32 = hidden, so a transposed MLP matrix fails) keeps the families/ tree small.
COMMON = dict(vocab_size=VOCAB, attn_implementation="eager")
LLAMA_LIKE = dict(hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=8)


def llama3_config():
    return LlamaConfig(**COMMON, **LLAMA_LIKE, rms_norm_eps=1e-5, max_position_embeddings=128,
                       tie_word_embeddings=False,
                       rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 16})


def llama_yarn_config():
    return LlamaConfig(**COMMON, **LLAMA_LIKE, rms_norm_eps=1e-5, max_position_embeddings=64,
                       tie_word_embeddings=True,
                       rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                        "original_max_position_embeddings": 16})


def mistral_config():
    return MistralConfig(**COMMON, **LLAMA_LIKE, rms_norm_eps=1e-5, max_position_embeddings=128,
                         tie_word_embeddings=False, sliding_window=4,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


def qwen2_config():
    return Qwen2Config(**COMMON, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, rms_norm_eps=1e-6, max_position_embeddings=128,
                       tie_word_embeddings=True, use_sliding_window=True, sliding_window=3, max_window_layers=1,
                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})


def qwen3_config():
    return Qwen3Config(**COMMON, hidden_size=32, intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, max_position_embeddings=128,
                       tie_word_embeddings=True, attention_bias=True, use_sliding_window=False,
                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})


def gpt2_config():
    return GPT2Config(**COMMON, n_embd=32, n_head=4, n_layer=2, n_inner=80, n_positions=64,
                      activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
                      bos_token_id=None, eos_token_id=None)


def bert_config():
    # Dropout off (packtrain trains without it); every token is of type 0 (token_type_ids default to zeros).
    # No pad token: torch's Embedding(padding_idx) would hold that row's gradient at zero wherever its id
    # appears in the random batch, while packtrain keeps pads out of examples rather than out of the table.
    return BertConfig(**COMMON, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                      max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12, hidden_act="gelu",
                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, tie_word_embeddings=True,
                      pad_token_id=None)


MLM_FAMILIES = {"bert"}
MASK_ID = 4  # the id masked inputs show (any id: the model has no special ids)


def masked_batch(seed, lengths):
    """A packed masked-LM batch: about 40% of the tokens chosen (the 1-token example's among them, and at
    least one per example), labels the original ids there and -100 elsewhere (unshifted); chosen inputs are
    80% MASK_ID, 10% a random id, 10% unchanged, as BERT's masking."""
    g = torch.Generator().manual_seed(seed)
    originals = [torch.randint(0, VOCAB, (n,), generator=g) for n in lengths]
    examples, labels = [], []
    for ex in originals:
        chosen = torch.rand(len(ex), generator=g) < 0.4
        chosen[torch.randint(0, len(ex), (1,), generator=g)] = True
        inputs = ex.clone()
        kind = torch.rand(len(ex), generator=g)
        inputs[chosen & (kind < 0.8)] = MASK_ID
        random_ids = torch.randint(0, VOCAB, (len(ex),), generator=g)
        swap = chosen & (kind >= 0.8) & (kind < 0.9)
        inputs[swap] = random_ids[swap]
        examples.append(inputs)
        labels.append(torch.where(chosen, ex, torch.full_like(ex, -100)))
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    assert int(labels[0][0]) != -100, "the 1-token example must carry a label"
    return examples, {"input_ids": torch.cat(examples).tolist(),
                      "position_ids": torch.cat([torch.arange(n) for n in lengths]).tolist(), "cu_seqlens": cu,
                      "labels": torch.cat(labels).tolist(), "objective": "mlm"}


# family -> (model class, config factory, seed, names that must be among the parameters)
FAMILIES = {
    "llama3": (LlamaForCausalLM, llama3_config, 11, ["lm_head.weight"]),
    "llama_yarn": (LlamaForCausalLM, llama_yarn_config, 12, []),
    "mistral": (MistralForCausalLM, mistral_config, 13, ["lm_head.weight"]),
    "qwen2": (Qwen2ForCausalLM, qwen2_config, 14,
              ["model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.k_proj.bias",
               "model.layers.0.self_attn.v_proj.bias"]),
    "qwen3": (Qwen3ForCausalLM, qwen3_config, 15,
              ["model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.k_norm.weight",
               "model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.o_proj.bias"]),
    "gpt2": (GPT2LMHeadModel, gpt2_config, 16,
             ["transformer.wpe.weight", "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.bias"]),
    "bert": (BertForMaskedLM, bert_config, 17,
             ["bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.bias",
              "bert.encoder.layer.0.attention.output.LayerNorm.weight", "cls.predictions.transform.dense.bias",
              "cls.predictions.transform.LayerNorm.weight", "cls.predictions.bias"]),
}


def auto_class(family):
    return AutoModelForMaskedLM if family in MLM_FAMILIES else AutoModelForCausalLM


def randomize(model):
    """Every parameter nonzero and away from HF's init (zero biases and unit norms would hide bugs)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0, 0.3)
            elif p.dim() == 1:  # RMSNorm / LayerNorm / q_norm / k_norm weights
                p.uniform_(0.5, 1.5)
            else:  # matrices, token and position embeddings
                p.normal_(0, 0.3)
    for name, p in model.named_parameters():
        assert bool((p != 0).all()), f"{name} has a zero"


def rotary(model):
    return model.model.rotary_emb if hasattr(model, "model") else None


def without_window(model):
    """The same weights with the sliding window disabled everywhere (the negative control)."""
    cfg = copy.deepcopy(model.config)
    cfg.sliding_window = None
    if getattr(cfg, "layer_types", None) is not None:
        cfg.layer_types = ["full_attention"] * cfg.num_hidden_layers
    if hasattr(cfg, "use_sliding_window"):
        cfg.use_sliding_window = False
    plain = type(model)(cfg).double().eval()
    plain.load_state_dict(model.state_dict())
    return plain


def check_window(name, model, window, examples, labels):
    """HF must apply the window in eager mode on one example alone; pins its width: query i sees keys
    i-window+1 .. i (window keys including itself)."""
    plain = without_window(model)
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for n, should_differ in ((window, False), (window + 1, True)):
            ids = torch.randint(0, VOCAB, (1, n), generator=g)
            d = (model(input_ids=ids).logits[0, -1] - plain(input_ids=ids).logits[0, -1]).abs().max().item()
            print(f"  {name}: length {n}, last-token logits windowed vs full: max abs diff {d:.3e}")
            assert (d > 1e-6) == should_differ, f"{name}: window semantics not as expected at length {n}"
        per_w, per_p = [], []
        loss_w, _ = loss_and_logits(model, examples, labels, per_w)
        loss_p, _ = loss_and_logits(plain, examples, labels, per_p)
    print(f"  {name}: loss with window {loss_w.item():.10f}, without {loss_p.item():.10f}")
    for ex, a, b in zip(examples, per_w, per_p):
        print(f"    example of length {len(ex):2d}: {a:.10f} vs {b:.10f}  {'differs' if a != b else 'equal'}")
    assert abs(loss_w.item() - loss_p.item()) > 1e-6, f"{name}: the sliding window changed nothing"
    return loss_p.item()


def make_family(out_dir, family):
    cls, config_fn, seed, must_have = FAMILIES[family]
    fdir = os.path.join(out_dir, family)
    os.makedirs(fdir, exist_ok=True)
    torch.manual_seed(seed)
    model = cls(config_fn()).eval()
    randomize(model)
    names = dict(model.named_parameters())
    for n in must_have:
        assert n in names, f"{family}: expected parameter {n}"
    model.save_pretrained(os.path.join(fdir, "hf_model"), safe_serialization=True)

    mlm = family in MLM_FAMILIES
    if family == "bert":  # the decoder is the word embeddings, its bias cls.predictions.bias (both tied)
        head = model.cls.predictions
        assert head.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()
        assert head.decoder.bias is None or head.decoder.bias.data_ptr() == head.bias.data_ptr()
    examples, batch = (masked_batch if mlm else packed_batch)(100 + seed, FAMILY_LENGTHS)
    with open(os.path.join(fdir, "batch.json"), "w") as f:
        json.dump(batch, f)
    expected = {"family": family, "architecture": cls.__name__, "transformers_version": transformers.__version__,
                "torch_version": torch.__version__}
    cfg = model.config
    if family == "gpt2":
        assert max(FAMILY_LENGTHS) <= cfg.n_positions
    if mlm:
        assert max(FAMILY_LENGTHS) <= cfg.max_position_embeddings
        # Bidirectional: a token's logits depend on the tokens after it.
        with torch.no_grad():
            ids = examples[-1][None, :].clone()
            before = model(input_ids=ids).logits[0, 0]
            ids[0, -1] = (ids[0, -1] + 1) % VOCAB
            assert (model(input_ids=ids).logits[0, 0] - before).abs().max().item() > 1e-6, "attention is causal"

    model = model.double()
    loss, logits = loss_and_logits(model, examples, batch["labels"], mlm=mlm)
    loss.backward()
    expected["loss_sum"] = loss.item()
    tensors = {"logits": logits.detach().float().contiguous()}
    for pname, p in model.named_parameters():
        assert p.grad is not None, f"{family}: no gradient for {pname}"
        tensors["grad." + pname] = p.grad.float().contiguous()

    # Per-layer attention as HF runs it.
    if getattr(cfg, "layer_types", None) is not None:
        expected["layer_types"] = list(cfg.layer_types)
    elif family == "mistral":  # Mistral has no layer_types: one global window on every layer
        expected["layer_types"] = ["sliding_attention"] * cfg.num_hidden_layers
    if family in ("mistral", "qwen2", "qwen3"):
        expected["sliding_window"] = cfg.sliding_window
    if family in ("mistral", "qwen2"):
        expected["loss_sum_no_window"] = check_window(family, model, cfg.sliding_window, examples,
                                                      batch["labels"])

    # Scaled rope: the inverse frequencies and the cos/sin scale HF uses, against plain rope.
    rope = rotary(model)
    if rope is not None and rope.rope_type != "default":
        plain_inv, _ = rope.compute_default_rope_parameters(cfg)
        inv = rope.inv_freq.float()
        print(f"  {family}: rope {rope.rope_type} inv_freq {inv.tolist()}\n"
              f"  {family}: plain rope inv_freq {plain_inv.tolist()}  attention_scaling {rope.attention_scaling}")
        assert not torch.equal(inv, plain_inv.float()), f"{family}: rope scaling changed no frequency"
        expected["rope_inv_freq"] = inv.tolist()
        expected["rope_plain_inv_freq"] = plain_inv.float().tolist()
        expected["rope_attention_scaling"] = float(rope.attention_scaling)
        if rope.rope_type == "yarn":
            assert abs(rope.attention_scaling - (0.1 * math.log(cfg.rope_parameters["factor"]) + 1)) < 1e-12

    # The saved checkpoint reloads to the very model the references came from.
    reloaded = auto_class(family).from_pretrained(os.path.join(fdir, "hf_model"), attn_implementation="eager",
                                                  dtype=torch.float32).double().eval()
    assert type(reloaded) is cls
    with torch.no_grad():
        loss_r, _ = loss_and_logits(reloaded, examples, batch["labels"], mlm=mlm)
    assert loss_r.item() == loss.item(), f"{family}: reloaded loss {loss_r.item()} != {loss.item()}"

    save_file(tensors, os.path.join(fdir, "expected.safetensors"))
    with open(os.path.join(fdir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=2)
    with safe_open(os.path.join(fdir, "hf_model", "model.safetensors"), "pt") as f:
        saved = {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}
    print(f"{family}: loss_sum {loss.item():.12f}; saved tensors:")
    for k in sorted(saved):
        print(f"    {k} {saved[k][0]} {saved[k][1]}")
    print(f"  {family}: gradients for {len(tensors) - 1} parameters; tied: {cfg.tie_word_embeddings}")


def families_mode(out_dir, families=None):
    for family in families or FAMILIES:
        if family not in FAMILIES:
            sys.exit(f"unknown family {family}; families: {', '.join(FAMILIES)}")
        make_family(out_dir, family)


# ---------------------------------------------------------------------------------------------- check

def load_examples(fdir):
    with open(os.path.join(fdir, "batch.json")) as f:
        batch = json.load(f)
    ids, cu = batch["input_ids"], batch["cu_seqlens"]
    return ([torch.tensor(ids[cu[i]:cu[i + 1]]) for i in range(len(cu) - 1)], batch["labels"],
            batch.get("objective") == "mlm")


def check_mode(out_dir):
    found = False
    for family in sorted(os.listdir(out_dir)):
        fdir = os.path.join(out_dir, family)
        pdir = os.path.join(fdir, "packtrain_model")
        if not os.path.isdir(pdir):
            continue
        found = True
        print(f"{family}: checking {pdir}")
        auto = auto_class(family)
        ref = auto.from_pretrained(os.path.join(fdir, "hf_model"), attn_implementation="eager", dtype=torch.float32)
        got, info = auto.from_pretrained(pdir, attn_implementation="eager", dtype=torch.float32,
                                         output_loading_info=True)
        for k, v in info.items():
            if v:
                print(f"  loading info {k}: {sorted(v) if not isinstance(v, list) else v}")
        assert not info.get("missing_keys"), f"{family}: packtrain_model lacks {info['missing_keys']}"
        assert not info.get("mismatched_keys"), f"{family}: mismatched shapes {info['mismatched_keys']}"
        assert type(got) is type(ref), f"{family}: {type(got).__name__} != {type(ref).__name__}"
        for key in ("tie_word_embeddings", "layer_types", "sliding_window", "rope_parameters"):
            a, b = getattr(ref.config, key, None), getattr(got.config, key, None)
            if a != b:
                print(f"  config {key}: hf_model {a} packtrain_model {b}")
        with safe_open(os.path.join(fdir, "hf_model", "model.safetensors"), "pt") as f:
            ref_keys = set(f.keys())
        with safe_open(os.path.join(pdir, "model.safetensors"), "pt") as f:
            got_keys = set(f.keys())
        if ref_keys != got_keys:
            print(f"  safetensors names only in hf_model: {sorted(ref_keys - got_keys)}; "
                  f"only in packtrain_model: {sorted(got_keys - ref_keys)}")
        if ref.config.tie_word_embeddings and got.get_output_embeddings().weight.data_ptr() != \
                got.get_input_embeddings().weight.data_ptr():
            # transformers 5 unties a tied model whose checkpoint holds an lm_head.weight unlike the embedding
            print("  packtrain_model is NOT tied after loading: its lm_head.weight differs from its embedding")
        # state_dict names tied weights under both names (so lm_head.weight is compared either way);
        # the rotary inv_freq buffers (not saved) show that the rope config was read alike.
        ref_t = dict(ref.state_dict())
        ref_t.update({"buffer." + n: b for n, b in ref.named_buffers()})
        got_t = dict(got.state_dict())
        got_t.update({"buffer." + n: b for n, b in got.named_buffers()})
        assert ref_t.keys() == got_t.keys(), f"{family}: {sorted(ref_t.keys() ^ got_t.keys())}"
        max_diff = 0.0
        for n in ref_t:
            a, b = ref_t[n].detach(), got_t[n].detach()
            if a.shape != b.shape:
                raise AssertionError(f"{family}: {n} shape {tuple(b.shape)} != {tuple(a.shape)}")
            d = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
            print(f"  {n:55s} {str(tuple(a.shape)):12s} max abs diff {d:.3e}")
            if not n.startswith("buffer."):
                max_diff = max(max_diff, d)
        examples, labels, mlm = load_examples(fdir)
        with torch.no_grad():
            loss, _ = loss_and_logits(got.double().eval(), examples, labels, mlm=mlm)
        path = os.path.join(fdir, "expected.json")
        with open(path) as f:
            expected = json.load(f)
        expected["packtrain_model.loss_sum"] = loss.item()
        expected["packtrain_model.max_abs_diff"] = max_diff
        with open(path, "w") as f:
            json.dump(expected, f, indent=2)
        print(f"  packtrain_model.loss_sum {loss.item():.12f} (hf_model {expected['loss_sum']:.12f}); "
              f"max abs diff {max_diff:.3e}")
    if not found:
        print(f"no {out_dir}/<family>/packtrain_model/ found")


def main():
    args = sys.argv[1:]
    if len(args) >= 2 and args[0] == "families":
        families_mode(args[1], args[2:])
    elif len(args) == 2 and args[0] in ("llama", "check"):
        {"llama": llama_mode, "check": check_mode}[args[0]](args[1])
    elif len(args) == 1 and os.path.isdir(args[0]):
        llama_mode(args[0])  # the original interface
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
