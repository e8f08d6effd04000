#!/usr/bin/env bash
# Varlen attention, packtrain against torch's FlashAttention-2 and cuDNN in one run, on the same batches (GPU
# machine with torch). Writes OUT_DIR/attention.jsonl for bench/report.py, and OUT_DIR/attention_kernels.txt:
# packtrain's mma.sync and wgmma kernels against each other (on GPUs that run both).
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
"$build/bench_attention" --kernels mma,wgmma >"$out/attention_kernels.txt" 2>&1 ||
  echo "bench_attention --kernels mma,wgmma: $(tail -1 "$out/attention_kernels.txt")"
