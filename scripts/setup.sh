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
  python3-jinja2               # the oracle for chat templates (tests/data/chat/template_oracle.py)
  python3-matplotlib           # scripts/plot_run.py: a run's metrics.jsonl as a PNG (and its test)
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

# cuSPARSELt (2:4 sparse tensor-core GEMMs) for CUDA builds: NVIDIA ships it on PyPI only, as a wheel holding
# the header and the library. Unpacked once into a cache shared by every checkout; CMake looks there
# (and at PACKTRAIN_CUSPARSELT_ROOT). Without it CUDA builds still work with dense GEMMs.
CUSPARSELT_VERSION=0.8.0
CUSPARSELT_DIR="${PACKTRAIN_CUSPARSELT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/packtrain/cusparselt-$CUSPARSELT_VERSION}"
fetch_cusparselt() {
  if ! python3 -m pip --version >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
  local tmp
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" \
      "nvidia-cusparselt-cu13==$CUSPARSELT_VERSION" &&
    python3 -m zipfile -e "$tmp"/nvidia_cusparselt_cu13-*.whl "$tmp/unpacked" &&
    mkdir -p "$(dirname "$CUSPARSELT_DIR")" && rm -rf "$CUSPARSELT_DIR" &&
    mv "$tmp/unpacked/nvidia/cusparselt" "$CUSPARSELT_DIR"
  local status=$?
  rm -rf "$tmp"
  return $status
}
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  if [ -n "${PACKTRAIN_CUSPARSELT_ROOT:-}" ]; then
    echo "setup: cuSPARSELt from PACKTRAIN_CUSPARSELT_ROOT=$PACKTRAIN_CUSPARSELT_ROOT"
  elif [ -f "$CUSPARSELT_DIR/include/cusparseLt.h" ] && [ -f "$CUSPARSELT_DIR/lib/libcusparseLt.so.0" ]; then
    echo "setup: cuSPARSELt $CUSPARSELT_VERSION in $CUSPARSELT_DIR"
  elif echo "setup: fetching nvidia-cusparselt-cu13==$CUSPARSELT_VERSION into $CUSPARSELT_DIR" &&
    fetch_cusparselt; then
    echo "setup: cuSPARSELt $CUSPARSELT_VERSION in $CUSPARSELT_DIR"
  else
    echo "setup: warning: could not fetch cuSPARSELt; CUDA builds will use dense GEMMs for sparse layers"
  fi
fi
echo "setup: dependencies present"
