#!/usr/bin/env bash
# The README's first command: set up, build, make the default corpus from Debian's packages, train its
# tokenizer, prepare it, report what each packing strategy does with it, train the `tiny` model with
# `flatten` packing (validation loss falls), and sample text from the result. Idempotent: finished steps
# are kept (delete data/default, data/prepared or runs/main to redo them); training resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
PT=build/packtrain
mkdir -p data/default
[ -f data/default/corpus.jsonl ] || python3 scripts/build_corpus.py data/default/corpus.jsonl
[ -f data/default/tokenizer.json ] ||
  $PT tokenizer train --input data/default/corpus.jsonl --vocab-size 8192 --output data/default/tokenizer.json
[ -f data/prepared/default/metadata.json ] ||
  $PT prepare --input data/default/corpus.jsonl --tokenizer data/default/tokenizer.json \
    --output data/prepared/default --max-len 2048
$PT pack-report --data data/prepared/default --examples 64 --row-len 2048
$PT train --data data/prepared/default --out runs/main --model tiny --strategy flatten --tokens 4096 \
  --steps 300 --warmup 20 --lr 3e-3 --min-lr 3e-4 --eval-every 100 --save-every 100 --log-every 10
$PT generate --model runs/main/final --prompt 'Define "water".
' --max-new-tokens 60 --top-k 20 --temperature 0.8 --seed 1
