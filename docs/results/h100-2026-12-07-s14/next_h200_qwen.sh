# On an H200, after next_call.sh (#27's acceptance): #22's benchmarks there, qwen2.5-0.5b and qwen3-0.6b
# flatten against HF's best (flattened flex_attention compiled) on the same batches, about 250 s each.
export PATH=/opt/torch/.venv/bin:$PATH
R=$OUT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee $R/gpu.txt
source scripts/gpu_unbundle.sh >/dev/null 2>&1
end=280
for m in qwen2.5-0.5b qwen3-0.6b; do
  timeout 60 build/bench_train_gpu --models $m --examples 24 --skip-1b --steps 20 --json $R/$m.jsonl \
    --dump-batches /tmp/$m.json > $R/$m.txt 2>&1; grep -E "flatten|padding" $R/$m.txt
  B=$(( end - SECONDS )); echo "$m: HF budget $B s"
  timeout $((B + 10)) python3 bench/peers/train_hf.py --batches /tmp/$m.json --preset $m --packtrain $R/$m.jsonl \
    --json $R/${m}_hf.jsonl --steps 6 --only "flattened flex_attention compiled" --budget $B > $R/${m}_hf.txt 2>&1
  tail -8 $R/${m}_hf.txt; echo "$m end $SECONDS s"; end=575
done
