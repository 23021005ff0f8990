#!/usr/bin/env bash
# Runs the CUDA backend's `cuda`-label tests on a GPU machine from a build made elsewhere.
#
#   Here (no GPU), after building with -DINFERSCALE_CUDA=ON:
#     tools/device_cuda_tests.sh bundle [BUILD_DIR] [BUNDLE_DIR]
#   copies the test binaries that ctest labels `cuda` into BUNDLE_DIR/bin and the non-system
#   shared libraries they need (OpenBLAS, libgomp, libstdc++, ...) into BUNDLE_DIR/lib.
#   Defaults: BUILD_DIR=build-cuda, BUNDLE_DIR=build-cuda-device (ignored by git via /build*/,
#   so it can be carried to the device machine).
#
#   When BUILD_DIR/bin/inferscale is built, it goes into BUNDLE_DIR/app too.
#
#   On the GPU machine, from the repository root, carrying BUNDLE_DIR:
#     tools/device_cuda_tests.sh run [BUNDLE_DIR]
#   runs every bundled test, writes one log per test plus summary.txt and env.txt to $OUT
#   (or ./cuda-test-logs when OUT is unset), prints a summary, and exits non-zero when any
#   test failed or could not start. The real-model test and the CLI chats need the bundled model
#   at models/ (INFERSCALE_MODELS; 94 MB, over what one device call carries) and are reported
#   as SKIP without it. To get it there, carry it in pieces (split -n 4 into two git-ignored
#   folders of two pieces each) over calls to one warm machine, join them into models/ there and
#   check the md5; a third call carries a bundle of just cuda_local_model_test and the CLI
#   (docs/results/cuda_tests_h200_2026-12-04.txt, part 2). With the CLI bundled, cli.log
#   shows it on the GPU: a chat with the
#   bundled model, one answered from memory (kv), and 8 tokens from random weights at each
#   configs/*.json shape, each timed from start to exit (load included).
#
# The driver (libcuda), the CUDA runtime and cuBLAS/cuBLASLt are never bundled: they come from
# the GPU machine's CUDA install, which must match the toolkit the build used (13.x). Bundled
# libraries are only put on the library path for names the machine cannot resolve itself, so
# its own newer libstdc++ or libgomp win.
set -euo pipefail

die() { echo "device_cuda_tests: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

bundle() {
    local build=${1:-build-cuda} out=${2:-build-cuda-device}
    [[ -d $build ]] || die "no build dir $build"
    command -v ctest >/dev/null || die "ctest not found"
    local tests
    tests=$(ctest --test-dir "$build" -L cuda --show-only=json-v1 |
        python3 -c 'import json, sys
for t in json.load(sys.stdin)["tests"]:
    print(t["command"][0])')
    [[ -n $tests ]] || die "ctest lists no cuda-label tests in $build (configured with -DINFERSCALE_CUDA=ON?)"
    rm -rf "$out"
    mkdir -p "$out/bin" "$out/lib"
    local exe
    for exe in $tests; do
        [[ -x $exe ]] || die "$exe is not built (ninja -C $build <test targets>)"
        bundle_exe "$exe" "$out/bin/$(basename "$exe")" "$out/lib"
    done
    if [[ -x $build/bin/inferscale ]]; then
        mkdir -p "$out/app"
        bundle_exe "$build/bin/inferscale" "$out/app/inferscale" "$out/lib"
    fi
    echo "bundled into $out:"
    ls -l "$out/bin" "$out/lib"
    du -sh "$out"
}

# The CLI on the GPU (cli.log): each command timed from start to exit, model load included.
# Returns non-zero when a command failed (the others still run).
run_cli() {
    local cli=$1 log=$2 db cli_failed=0
    db=$(mktemp -d)/memory.db
    cli_step() {
        echo "\$ inferscale $*" | tee -a "$log"
        local start status=0
        start=$(date +%s.%N)
        set +e
        timeout 120 "$cli" "$@" >>"$log" 2>&1
        status=$?
        set -e
        echo "   (exit $status, $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s wall)" |
            tee -a "$log"
        [[ $status -eq 0 ]] || cli_failed=1
    }
    if [[ -f $INFERSCALE_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
        cli_step chat --device cuda --max-tokens 48 --message "What is the capital of France?"
        cli_step memory add --db "$db" --user alice --text "Alice's dog is named Biscuit."
        cli_step chat --device cuda --db "$db" --user alice --memory kv --max-tokens 24 \
            --message "What is the name of my dog?"
    else
        echo "SKIP the bundled-model chats: no $INFERSCALE_MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" |
            tee -a "$log"
    fi
    local config model
    model=$(random_weights_model_dir)
    for config in configs/*.json; do
        cli_step generate --device cuda --model "$model" --random-weights "$config" \
            --max-tokens 8 --ignore-eos --json --prompt "The capital of France is"
    done
    return $cli_failed
}

run() {
    local bundle_dir=${1:-build-cuda-device}
    [[ -d $bundle_dir/bin ]] || die "no bundle at $bundle_dir (run '$0 bundle' where it was built)"
    bundle_dir=$(cd "$bundle_dir" && pwd)
    local logs=${OUT:-$PWD/cuda-test-logs}
    mkdir -p "$logs"
    local env_log=$logs/env.txt summary=$logs/summary.txt

    # Only the bundled libraries this machine lacks go on the path (through a links folder).
    local links
    links=$(mktemp -d)
    LD_LIBRARY_PATH=$(bundle_library_path "$links" "$bundle_dir" "$bundle_dir"/bin/* \
        $(ls "$bundle_dir"/app/* 2>/dev/null))
    export LD_LIBRARY_PATH
    local exe
    # The model test reads the golden checkpoints from the checkout (run from its root).
    export INFERSCALE_FIXTURES=${INFERSCALE_FIXTURES:-$PWD/tests/fixtures}
    export INFERSCALE_MODELS=${INFERSCALE_MODELS:-$PWD/models}

    {
        machine_report "$links"
        for exe in "$bundle_dir"/bin/*; do
            echo "== ldd $(basename "$exe")"
            ldd "$exe" 2>&1
        done
    } >"$env_log" 2>&1

    local failed=0 status name
    : >"$summary"
    for exe in "$bundle_dir"/bin/*; do
        name=$(basename "$exe")
        echo "== $name"
        set +e
        "$exe" --gtest_color=no >"$logs/$name.log" 2>&1
        status=$?
        set -e
        # gtest's own tally, or the crash reason when the binary died (IS_CHECK aborts).
        local tally
        tally=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$logs/$name.log" | grep -v '\] [A-Za-z_/]*\.' || true)
        # On the GPU machine a binary that passed nothing skipped everything: no device seen,
        # unless it skipped for want of the bundled model (too large to carry).
        if [[ $status -eq 0 ]] && grep -qE '^\[  PASSED  \] 0 tests' "$logs/$name.log"; then
            if grep -q "no $INFERSCALE_MODELS/" "$logs/$name.log"; then
                status=skip
            else
                status=77
                echo "    every test skipped: the CUDA device was not visible" >>"$logs/$name.log"
            fi
        fi
        if [[ $status == skip ]]; then
            echo "SKIP $name (no bundled model under $INFERSCALE_MODELS)" | tee -a "$summary"
        elif [[ $status -eq 0 ]]; then
            echo "PASS $name" | tee -a "$summary"
        else
            failed=1
            echo "FAIL $name (exit $status)" | tee -a "$summary"
            grep -E '^\[  FAILED  \]|Check failed|CHECK|Failure|error' "$logs/$name.log" | head -40 |
                sed 's/^/    /' | tee -a "$summary" || true
            tail -5 "$logs/$name.log" | sed 's/^/    | /' | tee -a "$summary" || true
        fi
        if [[ -n $tally ]]; then echo "$tally" | sed 's/^/    /' | tee -a "$summary"; fi
    done
    if [[ -x $bundle_dir/app/inferscale ]]; then
        echo "== inferscale CLI on the GPU (cli.log)"
        if run_cli "$bundle_dir/app/inferscale" "$logs/cli.log"; then
            echo "PASS inferscale CLI (cli.log)" | tee -a "$summary"
        else
            failed=1
            echo "FAIL inferscale CLI (cli.log)" | tee -a "$summary"
        fi
    fi
    rm -rf "$links"
    echo "logs in $logs"
    if [[ $failed -ne 0 ]]; then
        echo "SOME CUDA TESTS FAILED" | tee -a "$summary"
        return 1
    fi
    echo "ALL CUDA TESTS PASSED" | tee -a "$summary"
}

case "${1:-}" in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BUILD_DIR] [BUNDLE_DIR] | run [BUNDLE_DIR]" ;;
esac
