# Not yet run: what this session's TMA kernels still need on a GPU, main's build bundled (scripts/gpu_bundle.sh,
# carry .gpu_bundle). On an H200 #27's acceptance comes first (docs/results/h100-2026-12-07-s11/call3.sh).
# Elsewhere: every GPU test, racecheck over the TMA kernels (padded, windowed and bidirectional mixes, both
# head dims), then qwen2.5-7b's steady step (offloaded, as mistral-7b's in RESULTS.md).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 150 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
f=$(printf 'Mixes/CudaAttention.MatchesCpuReference/%s:' PaddedD128 Window127PaddedD128 Window100PaddedGqa4D64 \
  BidirPaddedGqa4D64 BidirPaddedD128 SftLikeGqa4D128)
timeout 200 compute-sanitizer --tool racecheck --racecheck-report hazard build/packtrain_tests --gtest_filter="$f" \
  > $R/racecheck.txt 2>&1; grep -E "RACECHECK SUMMARY|hazard|PASSED|FAILED" $R/racecheck.txt | head; echo "racecheck $SECONDS s"
left=$((570 - SECONDS))
[ $left -gt 90 ] && timeout $left build/packtrain train --model qwen2.5-7b --data data/prepared/default \
  --strategy flatten --tokens 16384 --steps 12 --warmup 2 --eval-every 0 --no-save --no-resume --device cuda \
  --offload-optimizer --optimizer-in-backward --clip 0 --optimizer-state 8bit --recompute=norms \
  --out /tmp/q7 > $R/qwen2.5-7b.txt 2>&1
grep -E "^  total|^step +(3|12)/" $R/qwen2.5-7b.txt; tail -1 $R/qwen2.5-7b.txt; echo "end $SECONDS s"
