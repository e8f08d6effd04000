# The next session's first call. On an H200: #27's acceptance (../h100-2026-12-07-s11/call3.sh, ~8 min); then,
# in a second call, `bash bench/attention.sh build OUT` for #25's figures on that card.
# On an H100: why our backward trails cuDNN's on one 32k sequence at MHA, head dim 128 (532 against 540-548
# TFLOP/s; this session's RESULTS.md). First a kernel lab, main against dknext (lab_dk_next.patch, branch
# lab/dk-next: dK's product runs on into the next step, behind which its S^T and dP^T products queue), two
# runs, and dknext's attention tests; then ncu over both backwards with the same sections, and ours at the
# source level (stall reasons per SASS line).
# Before: .gpu_bundle/ holds main's bundle (scripts/gpu_bundle.sh) and, stripped, bench_attention_main and
# bench_attention_dknext, and packtrain_tests_dknext.xz (apply the patch, build, strip, xz, revert).
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
for run in 1 2; do for v in main dknext; do echo "== $v run $run"
  timeout 45 .gpu_bundle/bench_attention_$v --reps 20 --batches "sft-like,one 8k,one 32k" 2>&1 | grep -v "^device"
done; done > $R/lab.txt 2>&1; cat $R/lab.txt; echo "lab $SECONDS s"
xz -dc .gpu_bundle/packtrain_tests_dknext.xz > build/packtrain_tests_dknext; chmod +x build/packtrain_tests_dknext
timeout 90 build/packtrain_tests_dknext --gtest_filter='*CudaAttention*' > $R/tests_attention_dknext.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" $R/tests_attention_dknext.txt | head; echo "tests $SECONDS s"
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats
   --section SchedulerStats --section InstructionStats --section LaunchStats"
timeout 120 ncu --clock-control none $S --section SourceCounters --kernel-name regex:backward_kernel_sm90 \
  --launch-skip 1 --launch-count 1 -o $R/ours build/bench_attention --reps 2 --batches "one 32k" > $R/ncu_log.txt 2>&1
echo "ours $SECONDS s"
cat > /tmp/cudnn_bwd.py <<'PY'
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
q, k, v = (torch.randn(1, 16, 32768, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
dout = torch.randn_like(q)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(2):
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)
torch.cuda.synchronize()
PY
# Every kernel of the process (a handful: randn, the forward, the backward's pieces), named in the report.
timeout $((560 - SECONDS)) ncu --clock-control none $S --launch-count 16 -o $R/cudnn python3 /tmp/cudnn_bwd.py >> $R/ncu_log.txt 2>&1
echo "cudnn $SECONDS s"
ncu --import $R/ours.ncu-rep --page details > $R/ncu_ours.txt 2>&1
ncu --import $R/ours.ncu-rep --page source --print-source sass --csv > $R/ncu_ours_sass.csv 2>&1
ncu --import $R/cudnn.ncu-rep --page details > $R/ncu_cudnn.txt 2>&1
grep -E "^  [^ ].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|Issue Slots Busy|Executed Ipc A" \
  $R/ncu_ours.txt $R/ncu_cudnn.txt | cut -c1-160 | head -80
rm -f $R/*.ncu-rep  # the text pages above hold what is read; at most 8 files come back
wc -c $R/*; echo "end $SECONDS s"
