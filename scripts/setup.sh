#!/usr/bin/env bash
# Installs everything packtrain needs to build, test and run its main job. Idempotent: a second run
# only checks. Debian packages for the C++ libraries and the default corpus; PyPI only for the optional
# tokenizer-fixture generator (HF tokenizers), which the build and tests never need.
set -euo pipefail

DEB_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libgtest-dev libgmock-dev    # unit tests through CTest
  libcli11-dev                 # CLI parsing: subcommands and --help
  libfmt-dev                   # formatting (g++ 12 lacks std::format)
  libsimdjson-dev              # JSONL parsing at GB/s on the prepare hot path
  nlohmann-json3-dev           # small JSON documents we read and write (tokenizer.json, metadata)
  libpcre2-dev                 # the HF pre-tokenizer regexes (\p{L}, lookahead) with JIT
  libutf8proc-dev              # Unicode NFC normalisation (Qwen2-style tokenizers)
  libxxhash-dev                # checksums of prepared datasets
  libopenblas-dev              # CPU GEMMs
  libopenmpi-dev openmpi-bin   # data-parallel training on CPUs, and its multi-rank tests (mpirun)
  python3 man-db fortune-mod fortunes wordnet-base   # the default corpus: real text shipped by Debian
)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: dependencies present"
