# 683bc2f on a GPU: the GPU tests, then qwen3-0.6b and qwen2.5-0.5b steps, ccc2041 (base) against 683bc2f, alternating.
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh >/dev/null 2>&1
mkdir -p /tmp/base && tar -xJf .gpu_bundle/base.tar.xz -C /tmp/base
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
timeout 240 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
for m in qwen3-0.6b qwen2.5-0.5b; do for b in /tmp/base build; do
  timeout 100 $b/bench_train_gpu --models $m --examples 24 --skip-1b --steps 10 > $R/${m}_$(basename $b).txt 2>&1
  echo "$m $(basename $b): $(grep -E ' flatten ' $R/${m}_$(basename $b).txt | head -1)"
done; done
echo "end $SECONDS s"
