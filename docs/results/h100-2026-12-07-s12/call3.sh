# On an H200: #27's acceptance (call1.sh). Elsewhere: lab/layernorm-rows on 268c73c (tests, op time, BERT step
# A/B against main), then qwen3-0.6b against HF's best on this card.
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh >/dev/null 2>&1
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash .gpu_bundle/call1.sh; exit; fi
mkdir -p /tmp/lab && tar -xJf .gpu_bundle/lab.tar.xz -C /tmp/lab
timeout 150 /tmp/lab/packtrain_tests --gtest_filter='CudaLayerNorm*:BertCuda.*:Gpt2Cuda.*:*HfOracleCuda*:Families/FamilyCuda.*' > $R/lab_tests.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/lab_tests.txt | head; echo "tests $SECONDS s"
for b in build /tmp/lab; do
  $b/bench_cuda_ops --tokens 20480 --hidden 768 --ffn 3072 --head-dim 64 --iters 50 > $R/ops_$(basename $b).txt 2>&1
  echo "$(basename $b): $(grep -E "layernorm" $R/ops_$(basename $b).txt | tr '\n' ' ')"
done
for i in 1 2; do for b in build /tmp/lab; do
  timeout 60 $b/bench_train_gpu --models bert-base --examples 64 --skip-1b --steps 10 > $R/bert_$(basename $b)_$i.txt 2>&1
  echo "bert $(basename $b) $i: $(grep -E ' flatten ' $R/bert_$(basename $b)_$i.txt | head -1)"
done; done
echo "lab end $SECONDS s"
m=qwen3-0.6b
timeout 60 build/bench_train_gpu --models $m --examples 24 --skip-1b --steps 20 --json $R/$m.jsonl \
  --dump-batches /tmp/q.json > $R/$m.txt 2>&1; grep -E "flatten|padding" $R/$m.txt
B=$(( 575 - SECONDS )); echo "HF budget $B s"
timeout $((B + 10)) python3 bench/peers/train_hf.py --batches /tmp/q.json --preset $m --packtrain $R/$m.jsonl \
  --json $R/${m}_hf.jsonl --steps 6 --only "flattened flex_attention compiled" --budget $B > $R/${m}_hf.txt 2>&1
tail -10 $R/${m}_hf.txt; echo "end $SECONDS s"
