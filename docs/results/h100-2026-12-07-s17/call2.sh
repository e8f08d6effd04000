# main with FA3's backward order (lab_dq_first_counters.patch, merged): bench/attention.sh against FA2 and
# cuDNN in one run (#25's acceptance on an H200, its figures on an H100); every GPU test; racecheck over the
# attention tests of its kernels; then the attention share of a llama3.2-1b step on 8k-token examples.
# On an H200, #27's acceptance instead (the session's device time leaves room for one call).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 280 bash bench/attention.sh build /tmp/att > $R/attention_log.txt 2>&1; echo "attention.sh rc $?"
cp /tmp/att/attention_packtrain.txt /tmp/att/attention_vs_torch.txt /tmp/att/attention_kernels.txt $R/ 2>/dev/null
cat $R/attention_vs_torch.txt | tail -30; echo "bench $SECONDS s"
timeout 170 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
f=$(printf 'Mixes/CudaAttention.MatchesCpuReference/%s:' PaddedD128 Window127PaddedD128 Window100PaddedGqa4D64 \
  BidirPaddedGqa4D64 BidirPaddedD128 SftLikeGqa4D128)
timeout $((520 - SECONDS)) compute-sanitizer --tool racecheck --racecheck-report hazard build/packtrain_tests \
  --gtest_filter="$f" > $R/racecheck.txt 2>&1
grep -E "RACECHECK SUMMARY|PASSED|FAILED" $R/racecheck.txt | head; echo "racecheck $SECONDS s"
left=$((575 - SECONDS))
[ $left -gt 40 ] && CUDA_INJECTION64_PATH=build/libpacktrain_cupti_profile.so timeout $left build/bench_train_gpu \
  --models llama3.2-1b --examples 2 --example-tokens 8192 --skip-1b --steps 6 > $R/llama1b_8k.txt 2>&1
grep -E "flatten|GPU busy|attn" $R/llama1b_8k.txt | cut -c1-150 | head -12; echo "end $SECONDS s"
