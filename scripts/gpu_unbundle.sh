# Sourced on a GPU machine, from a checkout of the same commit, after scripts/gpu_bundle.sh ran where the
# project builds: unpacks the binaries into build/ and the datasets into data/, and points LD_LIBRARY_PATH
# at the bundled libraries and at the CUDA libraries of the machine's python (a torch wheel's nvidia/).
#   source scripts/gpu_unbundle.sh
tar -xJf .gpu_bundle/bundle.tar.xz -C /tmp
# The tests find their fixtures by the absolute path of the checkout they were built in.
fixtures=$(strings /tmp/pkg/bin/packtrain_tests | grep -m1 '/tests/fixtures$' || true)
built_in=${fixtures%/tests/fixtures}
if [ -n "$fixtures" ] && [ ! -e "$fixtures" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -sfn "$PWD" "$built_in"
fi
nvidia_libs=$(python3 -c 'import nvidia; print(nvidia.__path__[0])' 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/pkg/lib:$([ -n "$nvidia_libs" ] && find "$nvidia_libs" -maxdepth 3 -name lib -type d |
  tr '\n' ':')/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
[ -d /tmp/pkg/cudnn_frontend/include ] && export CUDNN_FRONTEND_INCLUDE=/tmp/pkg/cudnn_frontend/include
mkdir -p build data/prepared data/default
cp /tmp/pkg/bin/* build/
for d in /tmp/pkg/data/*/; do cp -r "$d" data/prepared/; done
[ -f /tmp/pkg/data/tokenizer.json ] && cp /tmp/pkg/data/tokenizer.json data/default/
if ldd build/packtrain_tests build/packtrain | grep -q "not found"; then
  echo "gpu_unbundle: libraries missing:" && ldd build/packtrain_tests build/packtrain | grep "not found"
fi
