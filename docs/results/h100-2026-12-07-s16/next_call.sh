# Next session's first call (not yet run). On an H200: #27's acceptance (h100-2026-12-07-s11/call3.sh).
# On an H100, the sm90 backward: the attention tests of stepcount (lab_step_counters.patch: dK's product left
# running through the consumers' barrier, and each step's head and row tile counted, not divided) and of
# dqcount (lab_dq_first_counters.patch: FA3's order, dQ stored while dK's product runs, no branch around
# the products, and the counters); two lab runs of main, stepcount, dqcount and dqfirst2
# (lab_dq_first_uniform.patch: dqcount without the counters); racecheck over stepcount.
# Before: build main, strip build/bench_attention to .gpu_bundle/bench_attention_main; for each patch v
# (stepcount, dqcount, dqfirst2) apply it, build, strip bench_attention to .gpu_bundle/bench_attention_$v
# (and, for stepcount and dqcount, xz the stripped packtrain_tests to .gpu_bundle/packtrain_tests_$v.xz),
# revert; scripts/gpu_bundle.sh on main; carry .gpu_bundle.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash docs/results/h100-2026-12-07-s11/call3.sh; exit
fi
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
for v in stepcount dqcount; do
  xz -dc .gpu_bundle/packtrain_tests_$v.xz > build/packtrain_tests_$v; chmod +x build/packtrain_tests_$v
  timeout 90 build/packtrain_tests_$v --gtest_filter='*CudaAttention*' > $R/tests_attention_$v.txt 2>&1
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention_$v.txt | head; echo "tests $v $SECONDS s"
done
for run in 1 2; do for v in main stepcount dqcount dqfirst2; do echo "== $v run $run"
  timeout 45 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"
done; done > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
f=$(printf 'Mixes/CudaAttention.MatchesCpuReference/%s:' PaddedD128 Window127PaddedD128 Window100PaddedGqa4D64 \
  BidirPaddedGqa4D64 BidirPaddedD128 SftLikeGqa4D128)
timeout $((570 - SECONDS)) compute-sanitizer --tool racecheck --racecheck-report hazard \
  build/packtrain_tests_stepcount --gtest_filter="$f" > $R/racecheck.txt 2>&1
grep -E "RACECHECK SUMMARY|hazard|PASSED|FAILED" $R/racecheck.txt | head; echo "end $SECONDS s"
