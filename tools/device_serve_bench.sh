#!/usr/bin/env bash
# The serving benchmark (bench/serve_bench.py) on a GPU machine at the Llama-3.1-8B shape with
# random weights, from a build made elsewhere.
#
#   Here (no GPU), after building inferscale with -DINFERSCALE_CUDA=ON:
#     tools/device_serve_bench.sh bundle [BUILD_DIR] [BUNDLE_DIR]
#   copies inferscale, the non-system libraries it needs and the LoCoMo conversation the
#   workload uses into BUNDLE_DIR (default build-serve-device).
#
#   On the GPU machine, from the repository root, carrying BUNDLE_DIR:
#     tools/device_serve_bench.sh run [BUNDLE_DIR] [bench/serve_bench.py flags...]
#   writes serve_bench.txt, serve_bench.json and the server log to $OUT (or ./serve-bench-logs).
#   SERVE_FLAGS adds `inferscale serve` flags (e.g. --log-requests); MAX_BATCH_TOKENS sets the
#   step token budget (default 2048: at 100 users half the kv TTFT of 4096 at the same QPS);
#   DEVICE_POOL_MB the chunk pool's device tier (default: the server sizes the KV cache and the
#   device tier from the GPU's memory; small: chunks are injected from host memory);
#   HOST_POOL_MB its host tier (default 40960: the 100 users' chunks fit, so the disk tier
#   only takes what the server writes at exit).
#
# The model folder for the random weights comes from committed fixtures (random_weights_model_dir).
set -euo pipefail

die() { echo "device_serve_bench: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

CONVERSATION=../shared/data/locomo10/26.json

bundle() {
    local build=${1:-build-cuda} out=${2:-build-serve-device}
    [[ -x $build/bin/inferscale ]] || die "no $build/bin/inferscale (ninja -C $build inferscale)"
    [[ -f $CONVERSATION ]] || die "no $CONVERSATION"
    rm -rf "$out"
    mkdir -p "$out/app" "$out/lib"
    bundle_exe "$build/bin/inferscale" "$out/app/inferscale" "$out/lib"
    cp "$CONVERSATION" "$out/conversation.json"
    du -sh "$out"
}

run() {
    local bundle_dir=${1:-build-serve-device}
    shift || true
    [[ -x $bundle_dir/app/inferscale ]] || die "no bundle at $bundle_dir"
    bundle_dir=$(cd "$bundle_dir" && pwd)
    local logs=${OUT:-$PWD/serve-bench-logs}
    mkdir -p "$logs"
    local links model
    links=$(mktemp -d)
    LD_LIBRARY_PATH=$(bundle_library_path "$links" "$bundle_dir" "$bundle_dir/app/inferscale")
    export LD_LIBRARY_PATH

    model=$(random_weights_model_dir)
    machine_report "$links" >"$logs/env.txt" 2>&1
    local pool_flag=""
    [[ -n ${DEVICE_POOL_MB:-} ]] && pool_flag="--device-pool-mb $DEVICE_POOL_MB"

    python3 bench/serve_bench.py --bin "$bundle_dir/app/inferscale" \
        --conversation "$bundle_dir/conversation.json" --out "$logs/serve_bench.json" \
        --server-log "$logs/server.log" \
        --server-args "--model $model --device cuda --random-weights configs/llama-3.1-8b.json \
--max-batch-tokens ${MAX_BATCH_TOKENS:-2048} --max-batch-seqs 256 $pool_flag \
--host-pool-mb ${HOST_POOL_MB:-40960} --max-context 4096 ${SERVE_FLAGS:-}" "$@" 2>&1 | tee "$logs/serve_bench.txt"
}

case "${1:-}" in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BUILD_DIR] [BUNDLE_DIR] | run [BUNDLE_DIR] [bench flags...]" ;;
esac
