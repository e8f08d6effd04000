# On an H200: #27's acceptance (docs/results/h100-2026-12-07-s11/call3.sh). On an H100: the backward lab,
# main against four variants of attention_backward_sm90.cu: dqfirst (lab_dq_first.patch: dQ's product before
# dK's, dQ stored while dK's runs), perhead (lab/gqa-per-head), dkdefer (lab_dk_defer.patch) and desc (rows
# last to first), one run each, the attention tests of dqfirst and perhead, a second run; then ncu over
# main's backward on one 32k sequence at head dim 128 (MHA) while time is left.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash docs/results/h100-2026-12-07-s11/call3.sh; exit
fi
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1; echo "unbundled $SECONDS s"
lab() { for v in main dqfirst perhead dkdefer desc; do echo "== $v run $1"
  timeout 60 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"; done; }
lab 1 > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
for v in dqfirst perhead; do
  xz -dc .gpu_bundle/packtrain_tests_$v.xz > build/packtrain_tests_$v; chmod +x build/packtrain_tests_$v
  timeout 90 build/packtrain_tests_$v --gtest_filter='*CudaAttention*' > $R/tests_attention_$v.txt 2>&1
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention_$v.txt | head; echo "tests $v $SECONDS s"
done
lab 2 >> $R/lab.txt 2>&1; tail -55 $R/lab.txt; echo "lab 2 $SECONDS s"
[ $SECONDS -lt 330 ] || exit 0
timeout $((480 - SECONDS)) ncu --clock-control none --section WarpStateStats --section SourceCounters \
  --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
  --kernel-name-base demangled --kernel-name "regex:backward_kernel_sm90<128" --launch-skip 1 --launch-count 1 \
  -o $R/bwd32k .gpu_bundle/bench_attention_main --reps 2 --batches "one 32k" > $R/ncu_log.txt 2>&1
tail -2 $R/ncu_log.txt
ncu --import $R/bwd32k.ncu-rep --page details --print-details all > $R/ncu_details.txt 2>&1
ncu --import $R/bwd32k.ncu-rep --page source --print-source sass --csv > $R/ncu_sass.csv 2>&1
wc -l $R/ncu_*; echo "end $SECONDS s"
