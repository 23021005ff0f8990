#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ (clang, ASan + UBSan, into build-fuzz/) and runs each for
# SECONDS (default 60), two at a time, from a scratch copy of its seed corpus in fuzz/corpus/.
# Prints each target's executions per second and coverage (edges); exits non-zero naming every
# target that crashed, leaked, hung or ran out of memory, and where its input was kept.
#   scripts/fuzz.sh          # 60 s per target
#   scripts/fuzz.sh 600      # nightly
#   scripts/fuzz.sh 600 gbnf_fuzz json_schema_fuzz   # only these targets
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_TARGET="${1:-60}"
BUILD="${INFERSCALE_FUZZ_BUILD_DIR:-build-fuzz}"
JOBS="$(nproc)"
PARALLEL=$((JOBS < 2 ? 1 : 2))

# clang, its libFuzzer runtime and OpenMP come with the test setup (quick when present).
command -v clang++ >/dev/null || scripts/setup.sh --tests

if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DINFERSCALE_FUZZ=ON -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build "$BUILD" --target fuzzers -j "$JOBS"

RUNS="$BUILD/fuzz-runs/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$RUNS"
TARGETS=("${@:2}")
if ((${#TARGETS[@]} == 0)); then
  for src in fuzz/*_fuzz.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
fi
for target in "${TARGETS[@]}"; do
  [[ -f "fuzz/$target.cpp" ]] || { echo "fuzz: no target $target (fuzz/$target.cpp)" >&2; exit 2; }
done

# Runs one target; its log, exit status, scratch corpus and any failing input stay under
# $RUNS/<target>/.
run_target() {
  local target="$1" dir="$RUNS/$1" args=() status=0
  mkdir -p "$dir/corpus"
  [[ -d "fuzz/corpus/$target" ]] && cp -r "fuzz/corpus/$target/." "$dir/corpus/"
  [[ -f "fuzz/$target.dict" ]] && args+=("-dict=fuzz/$target.dict")
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD/bin/$target" "${args[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -detect_leaks=1 -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1 || status=$?
  echo "$status" >"$dir/status"
}

declare -A PIDS=()
for target in "${TARGETS[@]}"; do
  while ((${#PIDS[@]} >= PARALLEL)); do
    wait -n || true
    for t in "${!PIDS[@]}"; do kill -0 "${PIDS[$t]}" 2>/dev/null || unset "PIDS[$t]"; done
  done
  run_target "$target" &
  PIDS[$target]=$!
done
wait

failed=()
printf '%-26s %10s %8s %8s  %s\n' target exec/s edges units result
for target in "${TARGETS[@]}"; do
  status="$(cat "$RUNS/$target/status" 2>/dev/null || echo missing)"
  log="$RUNS/$target/log"
  execs="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  units="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  edges="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
  artifacts="$(find "$RUNS/$target" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | tr '\n' ' ')"
  result=ok
  if [[ "$status" != 0 || -n "$artifacts" ]]; then
    result="FAILED (exit $status) ${artifacts:-see $log}"
    failed+=("$target")
  fi
  printf '%-26s %10s %8s %8s  %s\n' "$target" "${execs:--}" "${edges:--}" "${units:--}" "$result"
done

if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]} (logs and inputs under $RUNS)" >&2
  exit 1
fi
echo "fuzz: all ${#TARGETS[@]} targets ran ${SECONDS_PER_TARGET}s clean ($RUNS)"
