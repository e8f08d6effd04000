# Kernel lab of the sm_90a backward (not yet run): main; each item's query row tiles last to first (desc);
# items of (key tile, query head) with GQA's dK and dV summed in fp32 (perhead). One run each, the attention
# tests of perhead, a second run. Before: build main, strip build/bench_attention to
# .gpu_bundle/bench_attention_main; apply lab_desc.patch, build, strip to .gpu_bundle/bench_attention_desc and
# revert; check out lab/gqa-per-head (or apply lab_gqa_per_head.patch), build, strip to
# .gpu_bundle/bench_attention_perhead, xz the stripped packtrain_tests to
# .gpu_bundle/packtrain_tests_perhead.xz, run scripts/gpu_bundle.sh; carry .gpu_bundle.
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
lab() { for v in main perhead desc; do echo "== $v run $1"
  timeout 60 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"; done; }
lab 1 > $R/lab3.txt 2>&1; cat $R/lab3.txt; echo "lab $SECONDS s"
xz -dc .gpu_bundle/packtrain_tests_perhead.xz > build/packtrain_tests_perhead; chmod +x build/packtrain_tests_perhead
timeout 100 build/packtrain_tests_perhead --gtest_filter='*CudaAttention*' > $R/tests_attention_perhead.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention_perhead.txt | head; echo "tests $SECONDS s"
lab 2 >> $R/lab3.txt 2>&1; tail -33 $R/lab3.txt; echo "end $SECONDS s"
