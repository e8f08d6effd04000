# Every GPU test on 39c4b0a (what the budget left allows), then GPT-2 against llm.c if time remains.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 150 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
SECTIONS=gpt2_llmc TOTAL_BUDGET=150 timeout 150 bash bench/gpu.sh build $R > $R/gpt2_llmc.txt 2>&1
grep -A8 "GPT-2 124M" $R/gpt2_llmc.txt; echo "llm.c $SECONDS s"
