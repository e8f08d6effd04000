# lab/layernorm-rows on a GPU (check it out, build, bundle): its tests, its time, and BERT's step against main's binaries (base.tar.xz).
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh >/dev/null 2>&1
mkdir -p /tmp/base && tar -xJf .gpu_bundle/base.tar.xz -C /tmp/base
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
timeout 150 build/packtrain_tests --gtest_filter='CudaLayerNorm*:BertCuda.*:Gpt2Cuda.*:*HfOracleCuda*' > $R/tests_gpu.txt 2>&1
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $R/tests_gpu.txt | head; echo "tests $SECONDS s"
build/bench_cuda_ops --tokens 20480 --hidden 768 --ffn 3072 --head-dim 64 --iters 50 > $R/ops_bert.txt 2>&1
grep -E "layernorm|gelu_erf bwd" $R/ops_bert.txt
for i in 1; do for b in /tmp/base build; do
  timeout 80 $b/bench_train_gpu --models bert-base --examples 64 --skip-1b --steps 10 > $R/bert_$(basename $b)_$i.txt 2>&1
  echo "bert $(basename $b) $i: $(grep -E ' flatten ' $R/bert_$(basename $b)_$i.txt | head -1)"
done; done
echo "end $SECONDS s"
