# #27 on the H200: BERT-base flatten against HF's padded sdpa, its best packed path and its best overall,
# the same batches, 20 timed steps after a 3-batch warm-up (bench/peers/train_hf.py). About 8 minutes.
export PATH=/opt/torch/.venv/bin:$PATH
source scripts/gpu_unbundle.sh
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
timeout 70 build/bench_train_gpu --models bert-base --examples 64 --skip-1b --steps 20 --json $R/bert.jsonl \
  --dump-batches /tmp/b.json > $R/bert.txt 2>&1; grep -E "flatten|padding" $R/bert.txt
python3 -c "
import json, statistics as st
for d in map(json.loads, open('$R/bert.jsonl')):
    s = d['step_ms']; print(d['strategy'], 'median %.1f mean %.1f' % (st.median(s), st.mean(s)))"
B=$(( 570 - SECONDS )); echo "HF budget $B s"
timeout $((B + 15)) python3 bench/peers/train_hf.py --batches /tmp/b.json --preset bert-base --packtrain $R/bert.jsonl \
  --json $R/bert_hf.jsonl --steps 20 --only "padded sdpa,flattened flex_attention compiled,padded sdpa compiled" \
  --budget $B > $R/bert_hf.txt 2>&1
tail -16 $R/bert_hf.txt
