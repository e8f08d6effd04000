#!/usr/bin/env bash
# Varlen attention, packtrain against torch's FlashAttention-2 and cuDNN in one run, on the same batches (GPU
# machine with torch). Writes OUT_DIR/attention.jsonl for bench/report.py.
# Usage: bench/attention.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-bench-results}
python=${PYTHON:-python3}
mkdir -p "$out"
rm -f "$out/attention.jsonl"
"$build/bench_attention" --lengths-out "$out/attention_lengths.txt" | tee "$out/attention_packtrain.txt"
"$python" "$(dirname "$0")/peers/attention_torch.py" --lengths "$out/attention_lengths.txt" \
  --packtrain "$out/attention_packtrain.txt" --json "$out/attention.jsonl" | tee "$out/attention_vs_torch.txt"
