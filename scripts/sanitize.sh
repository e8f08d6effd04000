#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer: a second build in build-asan/
# (g++, CUDA off, -O1, every sanitizer report fatal) of the test binary, whose tests then run in one
# process per core (gtest shards). The mpirun tests (CTest's dist_mpi_*) are not run here: they start
# OpenMPI's own runtime, which is not built with the sanitizers; the in-process communicator tests are.
#   scripts/sanitize.sh [GTEST_FILTER]    (default: every test; GPU tests skip themselves)
set -euo pipefail
cd "$(dirname "$0")/.."
filter=${1:-*}

bash scripts/setup.sh
BUILD=${ASAN_BUILD_DIR:-build-asan}
SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ ! -f "$BUILD/build.ninja" ]; then
  # CMAKE_CUDA_COMPILER=NOTFOUND: check_language(CUDA) keeps it, so the build is CPU-only with nvcc present.
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CUDA_COMPILER=NOTFOUND -DCMAKE_BUILD_TYPE=Sanitize \
    -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1 $SANITIZE" -DCMAKE_EXE_LINKER_FLAGS_SANITIZE="$SANITIZE"
fi
start=$(date +%s)
cmake --build "$BUILD" -j "$(nproc)" --target packtrain_tests
built=$(date +%s)

# detect_leaks: a leak fails the run too. allow_user_segv_handler=0 keeps ASan's report for a SEGV instead
# of the tests' backtrace handler (tests/crash_backtrace.cpp).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allow_user_segv_handler=0:check_initialization_order=1:strict_init_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
shards=$(nproc)
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$BUILD/packtrain_tests" --gtest_filter="$filter" \
    --gtest_brief=1 >"$BUILD/sanitize-shard-$i.log" 2>&1 &
  pids+=($!)
done
status=0
for ((i = 0; i < shards; ++i)); do
  if ! wait "${pids[$i]}"; then
    status=1
    echo "sanitize: shard $i failed ($BUILD/sanitize-shard-$i.log):"
    tail -n 80 "$BUILD/sanitize-shard-$i.log"
  fi
done
now=$(date +%s)
echo "sanitize: build $((built - start)) s, tests $((now - built)) s in $shards shards ($BUILD/sanitize-shard-*.log)"
grep -h "tests ran\|PASSED\|FAILED\|SKIPPED" "$BUILD"/sanitize-shard-*.log || true
exit $status
