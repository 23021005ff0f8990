#!/usr/bin/env bash
# The memory-injection benchmark (inject_bench) as one device command.
#
#   Here (no GPU), after building inject_bench with -DINFERSCALE_CUDA=ON:
#     tools/device_inject_bench.sh bundle [BUILD_DIR] [BUNDLE_DIR]
#   copies BUILD_DIR/bin/inject_bench into BUNDLE_DIR/bin and the non-system shared libraries
#   it needs into BUNDLE_DIR/lib. Defaults: build-ibench, build-ibench-device (ignored by git
#   via /build*/, so it can be carried).
#
#   On the GPU machine, from the repository root, carrying BUNDLE_DIR:
#     tools/device_inject_bench.sh run [BUNDLE_DIR] [-- extra inject_bench args]
#   runs inject_bench on configs/llama-3.1-8b.json (random weights; k = 5, 10, 20, 50), writes
#   inject_bench.log, inject_bench.json, summary.txt and env.txt to $OUT (or
#   ./inject-bench-logs) and prints the summary table. Exits non-zero when the bench failed.
#   INJECT_BENCH_CONFIG=path picks another config (e.g. a tiny one with `-- --backend cpu`,
#   to try the script without a GPU).
# Budget: under a minute and a half on an H200 (model creation included); hard limit 170 s.
set -euo pipefail

die() { echo "device_inject_bench: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

bundle() {
    local build=${1:-build-ibench} out=${2:-build-ibench-device}
    local exe=$build/bin/inject_bench
    [[ -x $exe ]] || die "$exe is not built (ninja -C $build inject_bench)"
    rm -rf "$out"
    mkdir -p "$out/bin" "$out/lib"
    bundle_exe "$exe" "$out/bin/inject_bench" "$out/lib"
    echo "bundled into $out:"
    ls -l "$out/bin" "$out/lib"
    du -sh "$out"
}

run() {
    local bundle_dir=build-ibench-device
    if [[ $# -gt 0 && $1 != -- ]]; then bundle_dir=$1; shift; fi
    [[ ${1:-} == -- ]] && shift
    local exe=$bundle_dir/bin/inject_bench
    [[ -x $exe ]] || die "no inject_bench in $bundle_dir/bin ('$0 bundle' first)"
    bundle_dir=$(cd "$bundle_dir" && pwd)
    exe=$bundle_dir/bin/inject_bench
    local logs=${OUT:-$PWD/inject-bench-logs}
    mkdir -p "$logs"
    local work
    work=$(mktemp -d)

    # Bundled libraries only where the machine lacks them (its own CUDA libraries win).
    local bench_path
    bench_path=$(bundle_library_path "$work/links" "$bundle_dir" "$exe")

    {
        machine_report "$work/links"
        LD_LIBRARY_PATH=$bench_path ldd "$exe" 2>&1
    } >"$logs/env.txt" 2>&1
    if LD_LIBRARY_PATH=$bench_path ldd "$exe" | grep -q 'not found'; then
        echo "!! unresolved libraries (see env.txt):"
        LD_LIBRARY_PATH=$bench_path ldd "$exe" | grep 'not found' || true
    fi

    local log=$logs/inject_bench.log status=0
    local config=${INJECT_BENCH_CONFIG:-configs/llama-3.1-8b.json}
    echo "== inject_bench $config (timeout 170s)"
    set +e
    timeout 170 env LD_LIBRARY_PATH="$bench_path" "$exe" --config "$config" \
        --json "$logs/inject_bench.json" "$@" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e
    # The table and ratios are everything from the bench's "== inject_bench" header on.
    awk '/^== inject_bench /{on=1} on' "$log" >"$logs/summary.txt" || true
    rm -rf "$work"
    echo
    echo "==== inject_bench summary ===="
    cat "$logs/summary.txt"
    echo "logs in $logs"
    if [[ $status -ne 0 ]]; then
        echo "INJECT BENCH FAILED (exit $status)"
        return 1
    fi
}

case "${1:-}" in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BUILD_DIR] [BUNDLE_DIR] | run [BUNDLE_DIR] [-- inject_bench args]" ;;
esac
