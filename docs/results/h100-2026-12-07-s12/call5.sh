# The packed q/k/v GEMM on a GPU: its tests, then qwen2.5-0.5b's step against 683bc2f (base.tar.xz).
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh >/dev/null 2>&1
mkdir -p /tmp/base && tar -xJf .gpu_bundle/base.tar.xz -C /tmp/base
R=$OUT; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 build/packtrain_tests --gtest_filter='*CudaRope*:Families/FamilyCuda.*:*HfOracleCuda*:LlamaCuda.*:*MemoryPlan*' > $R/tests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests.txt | head; echo "tests $SECONDS s"
for b in build /tmp/base; do
  timeout 40 $b/bench_train_gpu --models qwen2.5-0.5b --examples 24 --skip-1b --steps 10 > $R/q_$(basename $b).txt 2>&1
  echo "$(basename $b): $(grep -E ' flatten ' $R/q_$(basename $b).txt | head -1)"
done; echo "end $SECONDS s"
