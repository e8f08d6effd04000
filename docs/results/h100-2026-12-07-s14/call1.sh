# On an H200: #27's acceptance (BERT-base against HF, docs/results/h100-2026-12-07-s11/call3.sh).
# Elsewhere, on 39c4b0a, within END seconds (default 480): every GPU test; GPT-2 124M against llm.c
# (bench/gpu.sh's gpt2_llmc section); the presets without a figure yet: gpt2-medium and llama3.2-3b
# (bench_train_gpu, fp32 masters and moments), mistral-7b and qwen2.5-7b (packtrain train with the optimizer
# state offloaded, as Llama-3.1-8B on 80 GB); then a kernel profile of llama3.2-1b on 8k-token examples (#25).
export PATH=/opt/torch/.venv/bin:$PATH
END=${END:-480}
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 150 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
big() {  # a 7-8B preset with the optimizer state offloaded, within what is left
  local left=$((END - SECONDS)); [ $left -lt 60 ] && { echo "$1 skipped: $left s left"; return; }
  timeout $((left < 150 ? left : 150)) build/packtrain train --model $1 --data data/prepared/default \
    --strategy flatten --tokens 16384 --steps 12 --warmup 2 --eval-every 0 --no-save --no-resume --device cuda \
    --offload-optimizer --optimizer-in-backward --clip 0 --optimizer-state 8bit --recompute=norms \
    --out /tmp/$1 > $R/$1.txt 2>&1
  grep -E "^  total|^model:|^step +(3|12)/" $R/$1.txt; tail -2 $R/$1.txt; echo "$1 $SECONDS s"
}
left=$((END - SECONDS))
if [ $left -ge 110 ]; then
  SECTIONS=gpt2_llmc TOTAL_BUDGET=$((left - 5)) timeout $left bash bench/gpu.sh build $R > $R/gpt2_llmc.txt 2>&1
  grep -A8 "GPT-2 124M" $R/gpt2_llmc.txt; echo "llm.c $SECONDS s"
fi
timeout 120 build/bench_train_gpu --models gpt2-medium,llama3.2-3b --examples 24 --skip-1b --steps 10 \
  --json $R/presets.jsonl > $R/presets.txt 2>&1; grep -E "flatten|padding|did not" $R/presets.txt
echo "presets $SECONDS s"
big mistral-7b
big qwen2.5-7b
# #25's "before": the attention share of a llama3.2-1b step on 8k-token examples (CUPTI kernel profile).
left=$((END - SECONDS))
if [ $left -ge 50 ]; then
  CUDA_INJECTION64_PATH=build/libpacktrain_cupti_profile.so PACKTRAIN_PROFILE_TOP=40 timeout $left \
    build/bench_train_gpu --models llama3.2-1b --examples 2 --example-tokens 8192 --skip-1b --steps 6 \
    > $R/llama1b_8k.txt 2> $R/llama1b_8k_profile.txt
  grep -E "flatten|padding" $R/llama1b_8k.txt; grep -iE "busy|total|attention" $R/llama1b_8k_profile.txt | head -20
fi
