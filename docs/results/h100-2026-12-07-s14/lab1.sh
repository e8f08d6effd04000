# On an H200: #27's acceptance instead. Elsewhere, a kernel lab: TMA loads in the sm_90a attention kernels (build/) against main's cp.async producers
# (.gpu_bundle/bench_attention_main), alternating; the attention and model tests on the TMA build; then the
# llama3.2-3b preset's step (packtrain train, 8-bit moments) if time remains.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then  # #27 acceptance, after the TMA build passes the attention tests
  (source scripts/gpu_unbundle.sh >/dev/null 2>&1; timeout 60 build/packtrain_tests --gtest_filter="*CudaAttention*" 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]")
  sed "s/570 - SECONDS/525 - SECONDS/" docs/results/h100-2026-12-07-s11/call3.sh > /tmp/c3.sh; bash /tmp/c3.sh; exit
fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 100 build/packtrain_tests --gtest_filter='*CudaAttention*' > $R/tests_attention.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention.txt | head -20; echo "attention tests $SECONDS s"
for i in 1 2; do for b in .gpu_bundle/bench_attention_main build/bench_attention; do
  echo "== $b run $i"; timeout 60 $b --reps 20 2>&1 | grep -v "^device"
done; done > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
timeout 150 build/packtrain_tests --gtest_filter='*HfOracleCuda*:Families/FamilyCuda.*:BertCuda.*:Gpt2Cuda.*:LlamaCuda.*:*OnTheGpu*' > $R/tests_models.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_models.txt | head -20; echo "model tests $SECONDS s"
left=$((560 - SECONDS))
[ $left -gt 60 ] && timeout $left build/packtrain train --model llama3.2-3b --data data/prepared/default \
  --strategy flatten --tokens 16384 --steps 12 --warmup 2 --eval-every 0 --no-save --no-resume --device cuda \
  --optimizer-state 8bit --out /tmp/l3b > $R/llama3.2-3b.txt 2>&1
grep -E "^  total|^model:|^step +(3|12)/" $R/llama3.2-3b.txt; tail -2 $R/llama3.2-3b.txt; echo "end $SECONDS s"
