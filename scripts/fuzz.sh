#!/usr/bin/env bash
# Fuzzes packtrain's parsers of outside input (fuzz/, one libFuzzer target per parser). Installs clang and
# Debian's libFuzzer runtime, builds the targets into build-fuzz/ (clang, ASan, UBSan; the main build stays
# g++), replays every kept regression input (fuzz/regressions/TARGET/), then runs each target for a
# bounded time, one target per core at a time, from its seeds: fuzz/seeds/TARGET/ and, where the tests have
# them, their fixtures. A crash, sanitizer report, leak, timeout, memory blow-up or broken invariant fails
# the script; its input is left in build-fuzz/findings/TARGET/ (fix the parser, then keep the input in
# fuzz/regressions/TARGET/).
#   scripts/fuzz.sh [--seconds N] [TARGET...]    N seconds per target (default 25), every target by default
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=25
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done

bash scripts/setup.sh
# clang with its libFuzzer and sanitizer runtimes, and llvm-symbolizer for stack traces with lines.
FUZZ_PACKAGES=(clang libclang-rt-dev llvm)
missing=()
for p in "${FUZZ_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$BUILD/build.ninja" ]; then
  CXX=clang++ cmake -S fuzz -B "$BUILD" -G Ninja
fi
cmake --build "$BUILD" -j "$(nproc)"

if ((${#targets[@]} == 0)); then
  for bin in "$BUILD"/fuzz_*; do targets+=("${bin##*/fuzz_}"); done
fi

# Copies the tests' fixtures that are inputs of target $1 into seed directory $2, besides its own seeds.
seed_from_fixtures() {
  local f
  case "$1" in
    tokenizer_json) find tests/fixtures -name '*tokenizer.json' ;;
    model_config) find tests/fixtures -name config.json ;;
    chat_template | jsonl_record)  # the chat fixtures' templates, or their conversations as records
      python3 - "$1" "$2" <<'PY'
import json, pathlib, sys
target, out = sys.argv[1], pathlib.Path(sys.argv[2])
for path in pathlib.Path("tests/fixtures").rglob("cases.json"):
    for case in json.loads(path.read_text()).get("cases", []):
        name = f"{path.parent.name}_{case.get('name', 'case')}"
        if target == "jsonl_record":
            for i, record in enumerate(case.get("records", [])):
                if "messages" in record:
                    (out / f"{name}_{i}.json").write_text(json.dumps({"messages": record["messages"]}))
            continue
        templates = case.get("config", {}).get("chat_template")
        if isinstance(templates, str):
            templates = [{"name": "default", "template": templates}]
        for t in templates if isinstance(templates, list) else []:
            (out / f"{name}_{t.get('name', 'default')}.jinja").write_text(t.get("template", ""))
PY
      ;;
  esac | while read -r f; do cp "$f" "$2/$(echo "$f" | tr / _)"; done
}

# The files targets write for the parsers that read paths: tmpfs when there is one; removed at the end.
scratch=/dev/shm
[ -d "$scratch" ] && [ -w "$scratch" ] || scratch="$BUILD"
export PACKTRAIN_FUZZ_SCRATCH="$scratch/packtrain-fuzz-scratch-$$"
trap 'rm -rf "$PACKTRAIN_FUZZ_SCRATCH"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# One target: replays its regressions, then fuzzes it. Its messages go to stdout, its summary line to
# $BUILD/findings/$t/summary; returns nonzero on a finding.
fuzz_target() {
  local t=$1 bin="$BUILD/fuzz_$1" seeds="$BUILD/seeds/$1" corpus="$BUILD/corpus/$1" findings="$BUILD/findings/$1"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$corpus" "$findings"
  [ -d "fuzz/seeds/$t" ] && cp fuzz/seeds/"$t"/* "$seeds"/
  seed_from_fixtures "$t" "$seeds"

  if [ -d "fuzz/regressions/$t" ] && [ -n "$(ls -A "fuzz/regressions/$t")" ]; then
    echo "fuzz: $t: replaying $(ls "fuzz/regressions/$t" | wc -l) regression inputs"
    if ! "$bin" -rss_limit_mb=2048 -timeout=30 fuzz/regressions/"$t"/* >"$findings/replay.log" 2>&1; then
      tail -n 60 "$findings/replay.log"
      echo "fuzz: $t: a regression input fails again (log: $findings/replay.log)"
      printf '%-18s %-8s' "$t" REGRESSION >"$findings/summary"
      return 1
    fi
  fi

  local dict=() result rc=0 start runs cov
  [ "$t" = text_documents ] || dict=(-dict=fuzz/json.dict)  # the others read JSON (safetensors: its header)
  echo "fuzz: $t: fuzzing for ${seconds}s"
  start=$(date +%s)
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
      -artifact_prefix="$findings/" "$corpus" "$seeds" >"$findings/fuzz.log" 2>&1; then
    result=ok
  else
    tail -n 60 "$findings/fuzz.log"
    echo "fuzz: $t: FINDING, input in $findings/ (log: $findings/fuzz.log)"
    result=FINDING
    rc=1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$findings/fuzz.log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$findings/fuzz.log" | tail -n 1 | grep -o '[0-9]*$' || echo "?")
  printf '%-18s %-8s %4ss %10s runs  coverage %5s  corpus %5s' "$t" "$result" "$(($(date +%s) - start))" \
    "$runs" "$cov" "$(ls "$corpus" | wc -l)" >"$findings/summary"
  return $rc
}

# The targets run side by side, one per core (libFuzzer is single-threaded); their output follows in order.
for t in "${targets[@]}"; do
  [ -x "$BUILD/fuzz_$t" ] || { echo "fuzz: no target $t (fuzz/$t.cpp)"; exit 2; }
done
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  mkdir -p "$BUILD/findings/$t"
  rm -f "$BUILD/findings/$t/summary" "$BUILD/findings/$t/status"
  (fuzz_target "$t" && rc=0 || rc=$?; echo "$rc" >"$BUILD/findings/$t/status") >"$BUILD/findings/$t/run.log" 2>&1 &
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$BUILD/findings/$t/run.log"
  [ "$(cat "$BUILD/findings/$t/status" 2>/dev/null)" = 0 ] || status=1
done
echo "fuzz: summary"
for t in "${targets[@]}"; do
  printf '  %s\n' "$(cat "$BUILD/findings/$t/summary" 2>/dev/null || echo "$t: stopped early (its run.log above)")"
done
exit $status
