# On an H200: #27's acceptance (docs/results/h100-2026-12-07-s11/call3.sh). Elsewhere, on main's build (TMA
# kernels): every GPU test; ncu over the sm_90a backward on one 8k sequence at head dim 128, MHA against
# GQA 4 (why GQA is 7% slower); then qwen2.5-7b's steady step (offloaded, as mistral-7b's).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
timeout 170 build/packtrain_tests --gtest_filter='*Cuda*:*HfOracle*:*OnTheGpu*:*MemoryPlan*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_gpu.txt | head -20; echo "tests $SECONDS s"
timeout 120 ncu --clock-control none --set full --kernel-name regex:backward_kernel_sm90 --launch-skip 2 \
  --launch-count 4 -o $R/bwd8k .gpu_bundle/bench_attention_main --reps 1 --batches "one 8k" > $R/ncu_log.txt 2>&1
tail -3 $R/ncu_log.txt
ncu --import $R/bwd8k.ncu-rep --page details > $R/ncu_details.txt 2>&1; wc -l $R/ncu_details.txt; echo "ncu $SECONDS s"
left=$((565 - SECONDS))
[ $left -gt 90 ] && timeout $left build/packtrain train --model qwen2.5-7b --data data/prepared/default \
  --strategy flatten --tokens 16384 --steps 12 --warmup 2 --eval-every 0 --no-save --no-resume --device cuda \
  --offload-optimizer --optimizer-in-backward --clip 0 --optimizer-state 8bit --recompute=norms \
  --out /tmp/q7 > $R/qwen2.5-7b.txt 2>&1
grep -E "^  total|^step +(3|8|12)/" $R/qwen2.5-7b.txt; tail -1 $R/qwen2.5-7b.txt; echo "end $SECONDS s"
