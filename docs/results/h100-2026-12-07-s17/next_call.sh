# The next session's first call. On an H200: #27's acceptance (../h100-2026-12-07-s11/call3.sh, ~8 min); then,
# in a second call, `bash bench/attention.sh build OUT` for #25's figures on that card.
# On an H100: the sm90 backward's lab, aimed at one 32k sequence at MHA, head dim 128, where ours trails
# cuDNN's (532 against 540-548 TFLOP/s; this session's RESULTS.md). main against three variants, two runs:
#   dknext         (lab_dk_next.patch, branch lab/dk-next): dK's product runs on into the next step, and its
#                  S^T and dP^T products queue behind it;
#   dqsplit        (lab_dq_split.patch, lab/dq-split): dQ's product over the warpgroup's own 64 keys is
#                  issued before the consumers' barrier, the other warpgroup's keys after it;
#   dqsplitdknext  (lab_dq_split_dk_next.patch, lab/dq-split-dk-next): both.
# Then each variant's attention tests. next_call_ncu.sh is the call after it: ncu over the backwards.
# Before: .gpu_bundle/ holds main's bundle (scripts/gpu_bundle.sh), bench_attention_main and, for each
# variant v, bench_attention_$v and packtrain_tests_$v.xz (apply the patch, build, strip, xz, revert).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
for run in 1 2; do for v in main dknext dqsplit dqsplitdknext; do echo "== $v run $run"
  timeout 45 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"
done; done > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
for v in dknext dqsplit dqsplitdknext; do
  xz -dc .gpu_bundle/packtrain_tests_$v.xz > build/packtrain_tests_$v; chmod +x build/packtrain_tests_$v
  timeout 90 build/packtrain_tests_$v --gtest_filter='*CudaAttention*' > $R/tests_attention_$v.txt 2>&1
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention_$v.txt | head; echo "tests $v $SECONDS s"
done
