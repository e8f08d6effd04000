#!/usr/bin/env bash
# Varlen attention, packtrain against torch's FlashAttention-2 in one run, on the same batches (GPU machine
# with torch). Usage: bench/attention.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
build=${1:-build}
out=${2:-bench-results}
mkdir -p "$out"
"$build/bench_attention" --lengths-out "$out/attention_lengths.txt" | tee "$out/attention_packtrain.txt"
python3 "$(dirname "$0")/peers/attention_torch.py" --lengths "$out/attention_lengths.txt" \
  --packtrain "$out/attention_packtrain.txt" | tee "$out/attention_vs_torch.txt"
