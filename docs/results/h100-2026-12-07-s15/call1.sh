# On an H200: #27's acceptance (docs/results/h100-2026-12-07-s11/call3.sh). Elsewhere, a kernel lab of the
# sm_90a backward: main (TMA), GQA steps with the heads inner (gqa), warpgroups that each take dQ over their
# own 64 keys with no per-step barrier between them (indep), and both (indep_gqa); alternating, two runs.
# Then the attention tests of the indep builds, and racecheck over the indep build's kernels.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
for v in indep indep_gqa; do xz -dc .gpu_bundle/packtrain_tests_$v.xz > build/packtrain_tests_$v; chmod +x build/packtrain_tests_$v; done
for i in 1 2; do for v in main gqa indep indep_gqa; do
  echo "== $v run $i"; timeout 60 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"
done; done > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
for v in indep indep_gqa; do
  timeout 100 build/packtrain_tests_$v --gtest_filter='*CudaAttention*' > $R/tests_$v.txt 2>&1
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_$v.txt | head -20; echo "tests $v $SECONDS s"
done
f=$(printf 'Mixes/CudaAttention.MatchesCpuReference/%s:' PaddedD128 Window127PaddedD128 Window100PaddedGqa4D64 \
  BidirPaddedGqa4D64 BidirPaddedD128 SftLikeGqa4D128)
timeout $((560 - SECONDS)) compute-sanitizer --tool racecheck --racecheck-report hazard build/packtrain_tests_indep \
  --gtest_filter="$f" > $R/racecheck.txt 2>&1; grep -E "RACECHECK SUMMARY|hazard|PASSED|FAILED" $R/racecheck.txt | head; echo "end $SECONDS s"
