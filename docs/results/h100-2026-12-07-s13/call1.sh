# On an H200: #27's acceptance (BERT-base against HF, docs/results/h100-2026-12-07-s11/call3.sh).
# Elsewhere: qwen2.5-0.5b's step, c62fed0 (base) against the 4096-row logit chunks, alternating; then
# qwen2.5-0.5b against HF's best on the same batches.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
if grep -q H200 $R/gpu.txt; then bash docs/results/h100-2026-12-07-s11/call3.sh; exit; fi
source scripts/gpu_unbundle.sh >/dev/null 2>&1
mkdir -p /tmp/base && tar -xJf .gpu_bundle/base.tar.xz -C /tmp/base
for i in 1 2; do for b in /tmp/base build; do
  timeout 60 $b/bench_train_gpu --models qwen2.5-0.5b --examples 24 --skip-1b --steps 10 > $R/q_$(basename $b)_$i.txt 2>&1
  echo "$(basename $b) $i: $(grep -E ' flatten ' $R/q_$(basename $b)_$i.txt | head -1)"
done; done; echo "A/B end $SECONDS s"
m=qwen2.5-0.5b
timeout 60 build/bench_train_gpu --models $m --examples 24 --skip-1b --steps 20 --json $R/$m.jsonl \
  --dump-batches /tmp/q.json > $R/$m.txt 2>&1; grep -E "flatten|padding" $R/$m.txt
B=$(( 575 - SECONDS )); echo "HF budget $B s"
timeout $((B + 10)) python3 bench/peers/train_hf.py --batches /tmp/q.json --preset $m --packtrain $R/$m.jsonl \
  --json $R/${m}_hf.jsonl --steps 6 --only "flattened flex_attention compiled" --budget $B > $R/${m}_hf.txt 2>&1
tail -10 $R/${m}_hf.txt; echo "end $SECONDS s"
