#!/usr/bin/env bash
# Packs what a GPU machine without this project's build dependencies needs to run the GPU tests and benchmarks:
# the stripped binaries of build/, every shared library they link beyond the C/C++ runtime and the CUDA math
# and communication libraries (cuBLAS, cuSPARSELt, NCCL: the GPU machine's own, e.g. a torch wheel's), the
# prepared datasets, and the cudnn-frontend headers for llm.c when CUDNN_FRONTEND_INCLUDE is set. Build first
# (scripts/build.sh); then carry .gpu_bundle/ and, on the GPU machine, `source scripts/gpu_unbundle.sh`.
#   scripts/gpu_bundle.sh                  -> .gpu_bundle/bundle.tar.xz
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/pkg/bin" "$stage/pkg/lib" "$stage/pkg/data" .gpu_bundle
for b in packtrain packtrain_tests bench_train_gpu bench_attention bench_cuda_ops bench_sparse_ffn \
  bench_cublaslt_algos libpacktrain_cupti_profile.so; do
  [ -x "build/$b" ] && strip -o "$stage/pkg/bin/$b" "build/$b"
done
for b in "$stage"/pkg/bin/*; do ldd "$b"; done | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libstdc++* | libgcc_s* | libpthread* | librt.so* | libdl.so* | libcublas* | libnccl* | \
      libcusparseLt* | libcuda.so*) ;;
    *) cp -L "$lib" "$stage/pkg/lib/" ;;
  esac
done
for d in data/prepared/*/; do
  [ -f "$d/metadata.json" ] && cp -r "$d" "$stage/pkg/data/"
done
[ -f data/default/tokenizer.json ] && cp data/default/tokenizer.json "$stage/pkg/data/"
# Its headers include one another as ../include/...: the folder keeps that name.
if [ -n "${CUDNN_FRONTEND_INCLUDE:-}" ]; then
  mkdir -p "$stage/pkg/cudnn_frontend" && cp -r "$CUDNN_FRONTEND_INCLUDE" "$stage/pkg/cudnn_frontend/include"
fi
tar -C "$stage" -cf - pkg | xz -6 -T0 >.gpu_bundle/bundle.tar.xz
ls -la .gpu_bundle/bundle.tar.xz
