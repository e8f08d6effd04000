# The other #22 figures the H200 still lacks: GPT-2 against llm.c, and qwen2.5-0.5b against HF's best on the
# same batches. Bundle with CUDNN_FRONTEND_INCLUDE set (scripts/gpu_bundle.sh) and carry .gpu_bundle and .peers.
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
SECTIONS=gpt2_llmc timeout 200 bash bench/gpu.sh build $R > $R/gpt2_llmc.txt 2>&1; grep -A8 "GPT-2 124M" $R/gpt2_llmc.txt
timeout 60 build/bench_train_gpu --models qwen2.5-0.5b --examples 24 --skip-1b --steps 10 --json $R/qwen25.jsonl \
  --dump-batches /tmp/q.json > $R/qwen25.txt 2>&1; grep -E "flatten|padding" $R/qwen25.txt
timeout 300 python3 bench/peers/train_hf.py --batches /tmp/q.json --preset qwen2.5-0.5b --packtrain $R/qwen25.jsonl \
  --json $R/qwen25_hf.jsonl --steps 6 --only "flattened flex_attention compiled" --budget 290 > $R/qwen25_hf.txt 2>&1
tail -10 $R/qwen25_hf.txt
