export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt; cat $R/gpu.txt
timeout 60 build/packtrain_tests --gtest_filter='CudaGelu*:CudaLinearGelu*:BertCuda.*' > $R/tests.txt 2>&1
tail -1 $R/tests.txt; grep -E 'FAILED|Failure' $R/tests.txt | head
timeout 60 build/bench_train_gpu --models bert-base --examples 64 --skip-1b --steps 20 --json $R/bert.jsonl \
  --dump-batches /tmp/b.json > $R/bert.txt 2>&1; grep -E "flatten|padding" $R/bert.txt
python3 -c "import json; [print(d['strategy'], [round(x,1) for x in d['step_ms']]) for d in map(json.loads, open('$R/bert.jsonl'))]"
timeout 170 python3 bench/peers/train_hf.py --batches /tmp/b.json --preset bert-base --packtrain $R/bert.jsonl \
  --json $R/bert_hf.jsonl --steps 20 --only "flattened flex_attention compiled,padded sdpa" --budget 160 > $R/bert_hf.txt 2>&1
tail -12 $R/bert_hf.txt
CUDA_INJECTION64_PATH=build/libpacktrain_cupti_profile.so timeout 60 build/packtrain train --model qwen3-0.6b \
  --data data/prepared/default --strategy flatten --tokens 10400 --steps 12 --eval-every 0 --save-every 0 \
  --no-resume --no-save --out /tmp/q3 --device cuda > $R/qwen3_profile.txt 2>&1
grep -E "step +1[0-2]/" $R/qwen3_profile.txt; grep "\[profile\]" $R/qwen3_profile.txt | head -40
