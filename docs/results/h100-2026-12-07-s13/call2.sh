# On an H200: #27's acceptance (BERT-base against HF, docs/results/h100-2026-12-07-s11/call3.sh).
# Elsewhere: every GPU test on 44f2fef, then GPT-2 124M against llm.c (bench/gpu.sh's gpt2_llmc section).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 300 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
SECTIONS=gpt2_llmc timeout 250 bash bench/gpu.sh build $R > $R/gpt2_llmc.txt 2>&1; grep -A8 "GPT-2 124M" $R/gpt2_llmc.txt
echo "end $SECONDS s"
