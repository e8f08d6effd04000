#!/usr/bin/env bash
# Every GPU comparison in one run, packtrain and its peers side by side on this machine, then
# OUT_DIR/REPORT.md with tables and PNG charts. Run from the repository root on the GPU machine:
#   bench/gpu.sh BUILD_DIR OUT_DIR [DATA_DIR]
# BUILD_DIR holds packtrain, bench_attention, bench_train_gpu (and bench_sparse_ffn when built). DATA_DIR is a
# prepared dataset for the packing section (default data/prepared/default, as scripts/main.sh makes it; made
# here from data/default/corpus.jsonl when only that exists). Sections, each with a time limit and its log in
# OUT_DIR/logs/; one that fails or times out does not stop the others (OUT_DIR/status.tsv):
#   attention   bench_attention vs torch FA2 varlen and cuDNN SDPA            (bench/attention.sh)
#   train_gpu   bench_train_gpu: 110m padding vs flatten at 16 and 64 examples/step, 1b at 16
#   train_hf    HF transformers on the same batches                              (bench/peers/train_hf.py)
#   families    bench_train_gpu on the family presets that train with fp32 masters and moments on one GPU
#               (gpt2, gpt2-medium, qwen2.5-0.5b, qwen3-0.6b, llama3.2-1b, llama3.2-3b; real vocabs), 48
#               examples a step, and HF's flattened paths on the Qwen batches
#   bert, bert_hf  bench_train_gpu on bert-base (masked LM) padding vs flatten at BERT_EXAMPLES (default 16,64)
#               examples a step, then HF's BertForMaskedLM on the same batches, padded (sdpa) and on each
#               packed path it has for BERT (bench/peers/train_hf.py; run the two in one call, as the batches
#               pass between them in a temporary file)
#   bert_sparse BERT-base masked LM dense against 2:4 FFNs: validation MLM loss over the same tokens
#               (bench/sparse_convergence.py) on data/prepared/bert512 (the default corpus for 512 positions,
#               made here if need be; its tokenizer has no [MASK], so <|pad|> stands in)
#   gpt2_llmc   GPT-2 124M against llm.c on the same tokens (bench/gpt2_llmc.py; llm.c from LLMC, default
#               .peers/llmc.sh: ../shared/peers copied into the checkout and carried), on data/prepared/gpt2
#               (the default corpus prepared for 1024 positions, made here if need be)
#   packing     `packtrain train` per packing strategy on the default corpus     (bench/packing_gpu.py)
#   sparse_ffn  bench_sparse_ffn --json, when that binary exists
#   train_sparse        bench_train_gpu --sparse24: dense vs 2:4 FFN steps, 110m, 1b at 16 and 64 examples
#   sparse_convergence  `packtrain train` dense, 2:4 and its ablations: validation loss (bench/sparse_convergence.py)
#                       on data/pretrain/corpus.jsonl when scripts/setup_pretrain_corpus.sh made it
#   optimizer_modes  llama3.2-1b per optimizer memory mode (f32, bf16 and 8-bit moments, bf16 weights without
#               masters, both, the optimizer in the backward), MODES_STEPS (default 300) steps of MODES_TOKENS
#               (default 16384) tokens each and MODES_RUNS of them (a comma list; default all): validation
#               loss against f32, tokens/s, memory (bench/optimizer_modes.py) on the packing section's data
#   llama8b     llama3.1-8b at 16k tokens a micro-batch, MODES_8B (default: no fp32 masters, 8-bit moments,
#               norm recomputation), 12 steps without saving: MFU and peak memory (#24)
#   llama8b_in_backward  the same with fp32 masters, 8-bit moments and the optimizer in the backward
#   llama8b_offload  the same with the masters and moments offloaded to pinned host memory
#   llama8b_fast  bf16 weights and moments, the optimizer in the backward, no recomputation (120.9 GiB
#               planned): no recomputed layer or 8-bit quantization pass in the step, within the H200's
#               135 GiB goal
#   qwen7b      qwen2.5-7b (vocab 152064, untied) as llama8b's default
#   mistral7b   mistral-7b (sliding window 4096) as llama8b's default
#   llama8b_hf  HF transformers on the same 8B shape (fp32 master weights and AdamW, as HF trains): what it
#               needs, or its out-of-memory error (bench_train_gpu writes the batches, then its own fp32-state
#               attempt fails as the plan says)
#   report      bench/report.py
# SECTIONS (comma list, default all) runs a subset; three device calls of 10 minutes split the whole set, e.g.
# SECTIONS=train_gpu,train_hf, then SECTIONS=attention,packing, then SECTIONS=sparse_ffn,train_sparse,
# sparse_convergence into the same OUT_DIR, each ending with the report of what OUT_DIR holds.
# The whole run keeps to TOTAL_BUDGET seconds (default 540, under the 10 minutes a device command may take):
# each section's limit is cut to what is left, keeping 30 s for the report.
# Environment: PYTHON (default python3, with torch, transformers, matplotlib), TOTAL_BUDGET, HF_BUDGET (seconds
# for the HF peer, default 300), FAMILY_EXAMPLES (examples a step in the families section: 48, or 24 on a
# card under 100 GB), PACKING_ARGS (arguments of packing_gpu.py, default "--seeds 1,2"),
# SPARSE_ARGS (arguments of bench_sparse_ffn, default "--tokens 16384,65536").
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: bench/gpu.sh BUILD_DIR OUT_DIR [DATA_DIR]" >&2
  exit 2
fi
build=$1
out=$2
data=${3:-data/prepared/default}
python=${PYTHON:-python3}
bench=$(dirname "$0")
mkdir -p "$out/logs"
touch "$out/status.tsv"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
started=$SECONDS
total=${TOTAL_BUDGET:-540}

# Seconds left of the total budget, less $1 kept for what comes later.
left() { echo $((total - (SECONDS - started) - ${1:-0})); }

# section NAME LIMIT_SECONDS COMMAND...: runs COMMAND with its output in logs/NAME.log and on the console,
# within LIMIT_SECONDS and the total budget (less 30 s for the report).
# Whether SECTIONS (default: all) names section $1; the report always runs.
# prepare* sections make data for the section that calls them, whichever sections were asked for.
want() { [ -z "${SECTIONS:-}" ] || [ "$1" = report ] || [[ "$1" == prepare* ]] || [[ ",$SECTIONS," == *",$1,"* ]]; }

section() {
  local name=$1 limit=$2
  shift 2
  want "$name" || return 0
  [ "$name" = report ] || limit=$((limit < $(left 30) ? limit : $(left 30)))
  if [ "$limit" -lt 10 ]; then
    echo "=== $name skipped: the total budget (${total}s) is spent ==="
    printf '%s\t%s\t%s\n' "$name" skipped 0 >>"$out/status.tsv"
    return
  fi
  echo "=== $name (limit ${limit}s) ==="
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/logs/$name.log"
  local rc=${PIPESTATUS[0]}
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/status.tsv"
  [ "$rc" -eq 0 ] || echo "=== $name FAILED (exit $rc$([ "$rc" -eq 124 ] && echo ', timed out')); going on ==="
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
  "$python" -c 'import torch, transformers; print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}), transformers {transformers.__version__}")' 2>&1 | tail -1
  echo "cpu cores: $(nproc)"
} >"$out/env.txt"
cat "$out/env.txt"

for bin in packtrain bench_attention bench_train_gpu; do
  [ -x "$build/$bin" ] || echo "warning: $build/$bin is missing; its section will fail (build it first)"
done

section attention 200 bash "$bench/attention.sh" "$build" "$out"

want train_gpu && rm -f "$out/train_gpu.jsonl" "$out/train_hf.jsonl"
section train_gpu 150 "$build/bench_train_gpu" --steps 30 --json "$out/train_gpu.jsonl" \
  --dump-batches "$scratch/train_batches.json"

# HF's best (compiled flex_attention) compiles for 1-2 minutes per size; the peer's own budget leaves about
# 3 minutes for the sections after it.
hf_budget=$(left 210)
hf_budget=$((hf_budget < ${HF_BUDGET:-300} ? hf_budget : ${HF_BUDGET:-300}))
section train_hf $((hf_budget + 40)) "$python" "$bench/peers/train_hf.py" \
  --batches "$scratch/train_batches.json" --packtrain "$out/train_gpu.jsonl" --json "$out/train_hf.jsonl" \
  --steps 8 --budget "$hf_budget"

want families && rm -f "$out/families.jsonl" "$out/families_hf.jsonl"
# 48 examples fit the H200; padding them with a 152k vocab needs ~96 GiB, so 24 on an 80 GiB card.
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
family_examples=${FAMILY_EXAMPLES:-$([ "${gpu_mib:-0}" -gt 0 ] && [ "${gpu_mib:-0}" -lt 100000 ] && echo 24 || echo 48)}
section families 300 "$build/bench_train_gpu" --models gpt2,gpt2-medium,qwen2.5-0.5b,qwen3-0.6b,llama3.2-1b,llama3.2-3b \
  --examples "$family_examples" --skip-1b --steps 10 --json "$out/families.jsonl" --dump-batches "$scratch/family_batches.json"
for preset in qwen2.5-0.5b qwen3-0.6b; do
  section "families_hf_$preset" 200 "$python" "$bench/peers/train_hf.py" --batches "$scratch/family_batches.json" \
    --preset "$preset" --packtrain "$out/families.jsonl" --json "$out/families_hf.jsonl" --steps 6 --budget 160 \
    --only "flattened flex_attention compiled,flattened sdpa"
done

# BERT-base masked LM (issue #27). The HF peer gets BERT_HF_BUDGET seconds (default 420), less where that
# would leave under 70 s for the sections after it. Its compiled flex_attention compiles for minutes per
# size, so one size a call (BERT_EXAMPLES=16, then 64, each into its own OUT_DIR) runs every configuration.
want bert && rm -f "$out/bert.jsonl" "$out/bert_hf.jsonl"
section bert 150 "$build/bench_train_gpu" --models bert-base --examples "${BERT_EXAMPLES:-16,64}" --skip-1b \
  --steps 10 --json "$out/bert.jsonl" --dump-batches "$scratch/bert_batches.json"
bert_budget=$(left 70)
bert_budget=$((bert_budget < ${BERT_HF_BUDGET:-420} ? bert_budget : ${BERT_HF_BUDGET:-420}))
section bert_hf $((bert_budget + 40)) "$python" "$bench/peers/train_hf.py" --batches "$scratch/bert_batches.json" \
  --preset bert-base --packtrain "$out/bert.jsonl" --json "$out/bert_hf.jsonl" --steps 8 --budget "$bert_budget"

# BERT-base 2:4 against dense (#27): 100 steps of 16k tokens stay within one epoch of the default corpus.
bert_data=data/prepared/bert512
if want bert_sparse && [ ! -f "$bert_data/metadata.json" ] && [ -f data/default/corpus.jsonl ] &&
  [ -f data/default/tokenizer.json ] && [ -x "$build/packtrain" ]; then
  section prepare_bert 120 "$build/packtrain" prepare --input data/default/corpus.jsonl \
    --tokenizer data/default/tokenizer.json --output "$bert_data" --max-len 512 --long split --threads "$(nproc)"
fi
want bert_sparse && mkdir -p "$out/bert_sparse"
section bert_sparse 240 "$python" "$bench/sparse_convergence.py" --packtrain "$build/packtrain" --data "$bert_data" \
  --out "$out/bert_sparse" --model bert-base --runs dense,2:4 --steps 100 --eval-every 20 --lr 3e-4 \
  --train-args "--objective mlm --mask-token <|pad|>"

# The packing and optimizer sections need a prepared dataset: made from the corpus as scripts/main.sh does.
if { want packing || want optimizer_modes || want llama8b; } && [ ! -f "$data/metadata.json" ] &&
  [ -f data/default/corpus.jsonl ] && [ -x "$build/packtrain" ]; then
  section prepare 120 bash -c "set -e
    [ -f data/default/tokenizer.json ] || '$build/packtrain' tokenizer train --input data/default/corpus.jsonl \
      --vocab-size 8192 --output data/default/tokenizer.json
    '$build/packtrain' prepare --input data/default/corpus.jsonl --tokenizer data/default/tokenizer.json \
      --output '$data' --max-len 2048"
fi
want packing && rm -f "$out/packing.jsonl"
packing_budget=$(left 70)
# shellcheck disable=SC2086  # PACKING_ARGS is a list of arguments
section packing $((packing_budget + 20)) "$python" "$bench/packing_gpu.py" --packtrain "$build/packtrain" \
  --data "$data" --out "$out" --budget "$packing_budget" ${PACKING_ARGS:---seeds 1,2}

want sparse_ffn && rm -f "$out/sparse_ffn.jsonl"
if [ -x "$build/bench_sparse_ffn" ]; then
  # shellcheck disable=SC2086  # SPARSE_ARGS is a list of arguments
  section sparse_ffn 300 "$build/bench_sparse_ffn" --json "$out/sparse_ffn.jsonl" ${SPARSE_ARGS:---tokens 16384,65536}
fi

want train_sparse && rm -f "$out/train_sparse.jsonl"
section train_sparse 240 "$build/bench_train_gpu" --sparse24 --steps 8 --json "$out/train_sparse.jsonl"

# The convergence runs need more tokens than one epoch of the default corpus holds: the pre-training corpus
# (scripts/setup_pretrain_corpus.sh) when it is there, prepared here if need be; else the default corpus,
# which sparse_convergence.py flags when the run exceeds one epoch.
conv_data=$data
conv_args=${CONVERGENCE_ARGS:-}
if want sparse_convergence && [ -f data/pretrain/corpus.jsonl ] && [ -x "$build/packtrain" ]; then
  if [ ! -f data/prepared/pretrain/metadata.json ]; then
    section prepare_pretrain 120 "$build/packtrain" prepare --input data/pretrain/corpus.jsonl \
      --tokenizer data/default/tokenizer.json --output data/prepared/pretrain --max-len 2048 --long split \
      --threads "$(nproc)"
  fi
  if [ -f data/prepared/pretrain/metadata.json ]; then
    conv_data=data/prepared/pretrain
    conv_args=${CONVERGENCE_ARGS:---steps 1200 --eval-every 100 --eval-batches 16}
  fi
fi
# shellcheck disable=SC2086  # conv_args is a list of arguments
section sparse_convergence 330 "$python" "$bench/sparse_convergence.py" --packtrain "$build/packtrain" \
  --data "$conv_data" --out "$out" $conv_args

# GPT-2 learns 1024 positions: its packed run needs the corpus prepared with examples of at most 1024 tokens.
llmc=${LLMC:-.peers/llmc.sh}
gpt2_data=data/prepared/gpt2
if want gpt2_llmc && [ ! -f "$gpt2_data/metadata.json" ] && [ -f data/default/corpus.jsonl ] &&
  [ -f data/default/tokenizer.json ] && [ -x "$build/packtrain" ]; then
  section prepare_gpt2 120 "$build/packtrain" prepare --input data/default/corpus.jsonl \
    --tokenizer data/default/tokenizer.json --output "$gpt2_data" --max-len 1024 --long split --threads "$(nproc)"
fi
if want gpt2_llmc && [ -f "$gpt2_data/metadata.json" ] && [ -f "$llmc" ]; then
  # llm.c's cuDNN build: the torch wheel's cuDNN unless CUDNN_INCLUDE is set; CUDNN_FRONTEND_INCLUDE (PyPI
  # nvidia-cudnn-frontend's headers) is the caller's to set.
  nvidia=$("$python" -c 'import nvidia; print(nvidia.__path__[0])' 2>/dev/null)
  if [ -z "${CUDNN_INCLUDE:-}" ] && [ -d "$nvidia/cudnn/include" ]; then
    export CUDNN_INCLUDE=$nvidia/cudnn/include CUDNN_LIB=$nvidia/cudnn/lib
  fi
  section gpt2_llmc 300 "$python" "$bench/gpt2_llmc.py" --packtrain "$build/packtrain" --data "$gpt2_data" \
    --llmc "$llmc" --out "$out/gpt2_llmc"
fi

# The optimizer's memory modes (#24): each mode a run of the same steps on the same data.
section optimizer_modes 560 "$python" "$bench/optimizer_modes.py" --packtrain "$build/packtrain" --data "$data" \
  --out "$out/optimizer_modes" --steps "${MODES_STEPS:-300}" --tokens "${MODES_TOKENS:-16384}" \
  ${MODES_RUNS:+--runs "$MODES_RUNS"}
full_finetune=("$build/packtrain" train --data "$data" --no-resume --no-save --device cuda --strategy flatten
  --tokens 16384 --steps 12 --warmup 2 --eval-every 0)
# shellcheck disable=SC2086  # MODES_8B is a list of arguments
section llama8b 300 "${full_finetune[@]}" --model llama3.1-8b --out "$scratch/llama8b" \
  ${MODES_8B:---master-weights bf16 --optimizer-state 8bit --recompute=norms}
section llama8b_in_backward 300 "${full_finetune[@]}" --model llama3.1-8b --out "$scratch/llama8b_in_backward" \
  --optimizer-in-backward --clip 0 --optimizer-state 8bit --recompute=norms
section llama8b_offload 300 "${full_finetune[@]}" --model llama3.1-8b --out "$scratch/llama8b_offload" \
  --offload-optimizer --optimizer-in-backward --clip 0 --optimizer-state 8bit --recompute=norms
section llama8b_fast 300 "${full_finetune[@]}" --model llama3.1-8b --out "$scratch/llama8b_fast" \
  --master-weights bf16 --optimizer-state bf16 --optimizer-in-backward --clip 0 --recompute=none
section qwen7b 300 "${full_finetune[@]}" --model qwen2.5-7b --out "$scratch/qwen7b" \
  --master-weights bf16 --optimizer-state 8bit --recompute=norms
section mistral7b 300 "${full_finetune[@]}" --model mistral-7b --out "$scratch/mistral7b" \
  --master-weights bf16 --optimizer-state 8bit --recompute=norms
section llama8b_hf 360 bash -c "'$build/bench_train_gpu' --models llama3.1-8b --examples 16 --skip-1b --steps 1 \
  --dump-batches '$scratch/llama8b_batches.json'; '$python' '$bench/peers/train_hf.py' \
  --batches '$scratch/llama8b_batches.json' --preset llama3.1-8b --steps 2 --warmup 1 --budget 300 \
  --only 'flattened sdpa'"

section report 60 "$python" "$bench/report.py" "$out"
echo "all sections: $((SECONDS - started)) s; report: $out/REPORT.md"
