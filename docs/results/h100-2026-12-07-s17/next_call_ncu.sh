# After next_call.sh, on an H100: ncu over our sm90 backward and cuDNN's on one 32k sequence at MHA, head dim 128,
# the same sections, and ours at the source level (stall reasons per SASS line). About 4 minutes.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
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
