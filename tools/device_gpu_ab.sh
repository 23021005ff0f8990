#!/usr/bin/env bash
# Same-call A/B of two gpu_bench builds (or of one build under two settings) on the GPU machine.
# H200 machines differ by up to 3.5% where the code is the same, so a change is only read
# against a base measured in the same call, the two alternating.
#
#   Here (no GPU), with the change built in BUILD_DIR and the base's gpu_bench copied aside (for
#   an uncommitted change: git stash; ninja -C BUILD_DIR gpu_bench; cp BUILD_DIR/bin/gpu_bench
#   BASE_EXE; git stash pop; ninja -C BUILD_DIR gpu_bench):
#     tools/device_gpu_ab.sh bundle [BASE_EXE] [BUILD_DIR] [BUNDLE_DIR] [TEST...]
#   bundles BUILD_DIR/bin/gpu_bench as bin/gpu_bench_new and BASE_EXE as bin/gpu_bench_base
#   (without BASE_EXE, or with "-", the one build serves as both, bin/gpu_bench_base a link: an
#   A/B of settings), each TEST (a test executable of BUILD_DIR/bin, e.g.
#   cuda_linear_group_test) beside them, with the non-system libraries they need, and packs the
#   bundle into .devpack/BUNDLE_DIR.tar.xz (~9 MB; .devpack is ignored by git, and a call
#   carries 64 MiB). Defaults: build-cuda, build-ab-device.
#
#   On the GPU machine, from the repository root, carrying .devpack (or BUNDLE_DIR itself):
#     tools/device_gpu_ab.sh run [BUNDLE_DIR] [--rounds N] [--test NAME]... [--new-env VAR=VALUE]...
#         [--base-env VAR=VALUE]... [--new-arg ARG]... [--base-arg ARG]... -- GPU_BENCH_ARGS...
#   unpacks the bundle where only its pack is there, runs each --test NAME first (its gtest
#   summary printed, its log kept; a failing test fails the call but the A/B still runs), then
#   gpu_bench GPU_BENCH_ARGS N times (default 3) for each side, new then base in every round,
#   each side with its own extra environment and arguments; keeps every log (packed into
#   logs.tgz) and the table rows (ab.tsv: side, round, metric, value, unit) under $OUT (or
#   ./gpu-ab-logs), and prints each metric's values per side, the medians and new / base.
set -euo pipefail

die() { echo "device_gpu_ab: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

bundle() {
    local base=${1:--} build=${2:-build-cuda} out=${3:-build-ab-device}
    shift $(($# < 3 ? $# : 3))
    local exe=$build/bin/gpu_bench test
    [[ -x $exe ]] || die "$exe is not built (ninja -C $build gpu_bench)"
    [[ $base == - || -x $base ]] || die "no base gpu_bench at $base"
    for test in "$@"; do
        [[ -x $build/bin/$test ]] || die "$build/bin/$test is not built (ninja -C $build $test)"
    done
    rm -rf "$out"
    mkdir -p "$out/bin" "$out/lib"
    bundle_exe "$exe" "$out/bin/gpu_bench_new" "$out/lib"
    if [[ $base == - ]]; then
        ln -s gpu_bench_new "$out/bin/gpu_bench_base"
    else
        bundle_exe "$base" "$out/bin/gpu_bench_base" "$out/lib"
    fi
    for test in "$@"; do bundle_exe "$build/bin/$test" "$out/bin/$test" "$out/lib"; done
    echo "bundled into $out:"
    ls -l "$out/bin"
    pack_bundles ".devpack/$(basename "$out").tar.xz" "$out"
}

# The rows of gpu_bench's closing table in LOG as "metric<TAB>value<TAB>unit" (the table is
# printed with fixed widths: metric in 28 columns, then the measured value in 16).
table_rows() {
    awk '/^== gpu_bench / {on = 1; next}
         on && /^metric / {next}
         on && length($0) > 30 {
             metric = substr($0, 1, 28); sub(/ +$/, "", metric)
             split(substr($0, 30, 16), m, " ")
             if (m[1] ~ /^[0-9.]+$/) printf "%s\t%s\t%s\n", metric, m[1], m[2]
         }' "$1"
}

# Per metric: the values of each side, their medians and new / base.
summarize() {
    awk -F'\t' '
        function median(list,   n, v, i, j, t) {
            n = split(list, v, " ")
            for (i = 2; i <= n; ++i)
                for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; --j) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
            return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        }
        {
            key = $3 " (" ($5 == "" ? "-" : $5) ")"
            if (!(key in seen)) { seen[key] = 1; order[++count] = key }
            values[key, $1] = values[key, $1] (values[key, $1] == "" ? "" : " ") $4
        }
        END {
            for (k = 1; k <= count; ++k) {
                key = order[k]
                printf "%s\n  new:  %s\n  base: %s\n", key, values[key, "new"], values[key, "base"]
                if (values[key, "new"] != "" && values[key, "base"] != "") {
                    mn = median(values[key, "new"]); mb = median(values[key, "base"])
                    printf "  median new %g, base %g: new / base %.4f\n", mn, mb, mb != 0 ? mn / mb : 0
                }
            }
        }' "$1"
}

run() {
    local dir=build-ab-device rounds=3
    local -a new_env=() base_env=() new_args=() base_args=() bench_args=() tests=()
    if [[ $# -gt 0 && $1 != --* ]]; then
        dir=$1
        shift
    fi
    while [[ $# -gt 0 ]]; do
        case $1 in
            --rounds) rounds=${2:?--rounds takes a count}; shift 2 ;;
            --test) tests+=("${2:?--test takes the name of a test executable}"); shift 2 ;;
            --new-env) new_env+=("${2:?--new-env takes VAR=VALUE}"); shift 2 ;;
            --base-env) base_env+=("${2:?--base-env takes VAR=VALUE}"); shift 2 ;;
            --new-arg) new_args+=("${2:?--new-arg takes an argument}"); shift 2 ;;
            --base-arg) base_args+=("${2:?--base-arg takes an argument}"); shift 2 ;;
            --) shift; bench_args=("$@"); break ;;
            *) die "unknown option $1 (gpu_bench's own arguments go after --)" ;;
        esac
    done
    [[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds takes a positive count"
    local pack
    pack=.devpack/$(basename "$dir").tar.xz
    if [[ ! -d $dir && -f $pack ]]; then unpack_bundles "$pack" "$(dirname "$dir")"; fi
    [[ -x $dir/bin/gpu_bench_new && -x $dir/bin/gpu_bench_base ]] ||
        die "no bundle at $dir nor $pack (run '$0 bundle' where it was built)"
    dir=$(cd "$dir" && pwd)
    local logs=${OUT:-$PWD/gpu-ab-logs}
    mkdir -p "$logs"
    LD_LIBRARY_PATH=$(bundle_library_path "$(mktemp -d)" "$dir" "$dir"/bin/*)
    export LD_LIBRARY_PATH

    local tsv=$logs/ab.tsv round side log status failed=0 test
    for test in ${tests[@]+"${tests[@]}"}; do
        [[ -x $dir/bin/$test ]] || die "no test $test in $dir/bin (bundle it)"
        set +e
        timeout 600 "$dir/bin/$test" >"$logs/$test.log" 2>&1
        status=$?
        set -e
        echo "== $test exited $status"
        grep -E '^\[  PASSED  \]|^\[  SKIPPED \] [0-9]+ tests?,|^\[  FAILED  \]|FAILED TESTS?$' \
            "$logs/$test.log" || true
        [[ $status -eq 0 ]] || failed=1
    done
    : >"$tsv"
    for ((round = 1; round <= rounds; ++round)); do
        for side in new base; do
            log=$logs/$side.$round.log
            local -a env_side=() args_side=()
            if [[ $side == new ]]; then
                env_side=(${new_env[@]+"${new_env[@]}"})
                args_side=(${new_args[@]+"${new_args[@]}"})
            else
                env_side=(${base_env[@]+"${base_env[@]}"})
                args_side=(${base_args[@]+"${base_args[@]}"})
            fi
            set +e
            env ${env_side[@]+"${env_side[@]}"} timeout 600 "$dir/bin/gpu_bench_$side" \
                ${bench_args[@]+"${bench_args[@]}"} ${args_side[@]+"${args_side[@]}"} >"$log" 2>&1
            status=$?
            set -e
            if [[ $status -ne 0 ]]; then
                failed=1
                echo "!! $side round $round exited $status (log: $log)"
                tail -n 5 "$log"
            fi
            table_rows "$log" | awk -v s="$side" -v r="$round" '{print s "\t" r "\t" $0}' >>"$tsv"
        done
    done
    summarize "$tsv" | tee "$logs/summary.txt"
    local packed
    packed=$(mktemp)
    tar -C "$logs" -czf "$packed" --exclude=logs.tgz --exclude=summary.txt --exclude=ab.tsv .
    mv "$packed" "$logs/logs.tgz"
    find "$logs" -maxdepth 1 -name '*.log' -delete
    return $failed
}

case ${1:-} in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BASE_EXE] [BUILD_DIR] [BUNDLE_DIR] [TEST...] | run [BUNDLE_DIR]" \
           "[options] -- GPU_BENCH_ARGS" ;;
esac
