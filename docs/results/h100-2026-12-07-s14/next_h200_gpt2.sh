# On an H200: GPT-2 124M against llm.c (bench/gpu.sh's gpt2_llmc section), then the gpt2-medium and
# llama3.2-3b steps (bench_train_gpu; llama3.2-3b does not fit it on an H100).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
SECTIONS=gpt2_llmc TOTAL_BUDGET=200 timeout 200 bash bench/gpu.sh build $R > $R/gpt2_llmc.txt 2>&1
grep -A8 "GPT-2 124M" $R/gpt2_llmc.txt; echo "llm.c $SECONDS s"
timeout 120 build/bench_train_gpu --models gpt2-medium,llama3.2-3b --examples 24 --skip-1b --steps 10 \
  --json $R/presets.jsonl > $R/presets.txt 2>&1; grep -E "flatten|padding|did not" $R/presets.txt
echo "presets $SECONDS s"
