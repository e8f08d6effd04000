#!/usr/bin/env bash
# The README's first command: set up, build, make the default corpus from Debian's packages, train its
# tokenizer, prepare it, and report what each packing strategy does with it. Idempotent: finished steps
# are kept (delete data/default or data/prepared to redo them).
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
