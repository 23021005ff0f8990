#!/usr/bin/env bash
# Every GPU check of the project in one device call: a cold start of the device machine costs
# minutes of the device budget, so one call that runs the `cuda` tests, gpu_bench with
# the PyTorch peer, inject_bench and the serving benchmark beats four.
#
#   Here (no GPU), after `ninja -C BUILD_DIR` with -DINFERSCALE_CUDA=ON:
#     tools/device_all.sh bundle [BUILD_DIR]
#   bundles each script's binaries (build-cuda-device, build-gpubench-device,
#   build-ibench-device, build-serve-device) and packs them into .devpack/all.tar.xz (about
#   35 MB, under the 64 MiB a call carries; .devpack is ignored by git).
#
#   On the GPU machine, from the repository root, carrying .devpack:
#     tools/device_all.sh run [STEPS]
#   unpacks the bundles and runs STEPS (default tests,gpu,inject,serve) in that order, each
#   through its own script with its own logs under $OUT/<step>; prints each step's summary and
#   packs every log into $OUT/logs.tgz (the call brings back few files). SERVE_ARGS passes
#   flags to the serving benchmark (default: --users 100 --repeats 1). About 7 minutes in all.
#   Step serve_small_tier (not in the default) runs the serving benchmark again with a 64 MiB
#   device tier, chunks injected from host memory, and counts its answers equal to those of
#   the serve step before it.
set -euo pipefail

die() { echo "device_all: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PACK=.devpack/all.tar.xz
BUNDLES=(build-cuda-device build-gpubench-device build-ibench-device build-serve-device)

bundle() {
    local build=${1:-build-cuda}
    build=$(cd "$build" && pwd)
    tools/device_cuda_tests.sh bundle "$build" "$PWD/build-cuda-device" >/dev/null
    tools/device_gpu_bench.sh bundle "$build" "$PWD/build-gpubench-device" >/dev/null
    tools/device_inject_bench.sh bundle "$build" "$PWD/build-ibench-device" >/dev/null
    tools/device_serve_bench.sh bundle "$build" "$PWD/build-serve-device" >/dev/null
    pack_bundles "$PACK" "${BUNDLES[@]}"
}

run() {
    local steps=${1:-tests,gpu,inject,serve} out=${OUT:-$PWD/device-logs} status=0
    [[ -f $PACK ]] || die "no $PACK (carry .devpack after '$0 bundle')"
    unpack_bundles "$PACK" .
    mkdir -p "$out"
    local step
    for step in ${steps//,/ }; do
        echo "==== $step"
        mkdir -p "$out/$step"
        case $step in
            tests) OUT=$out/$step tools/device_cuda_tests.sh run "$PWD/build-cuda-device" \
                       >"$out/$step/run.txt" 2>&1 || status=1
                   grep -E "^(PASS|FAIL|SKIP)|TESTS" "$out/$step/run.txt" ;;
            gpu) OUT=$out/$step tools/device_gpu_bench.sh run "$PWD/build-gpubench-device" \
                     >"$out/$step/run.txt" 2>&1 || status=1
                 sed -n '/==== gpu_bench summary/,/per-op profile/p' "$out/$step/run.txt" ;;
            inject) OUT=$out/$step tools/device_inject_bench.sh run "$PWD/build-ibench-device" \
                        >"$out/$step/run.txt" 2>&1 || status=1
                    tail -12 "$out/$step/run.txt" ;;
            serve) # shellcheck disable=SC2086
                   OUT=$out/$step tools/device_serve_bench.sh run "$PWD/build-serve-device" \
                       ${SERVE_ARGS:---users 100 --repeats 1} >"$out/$step/run.txt" 2>&1 ||
                       status=1
                   grep "GPU memory:" "$out/$step/run.txt" || true
                   tail -10 "$out/$step/run.txt" ;;
            serve_small_tier) # shellcheck disable=SC2086
                   DEVICE_POOL_MB=64 OUT=$out/$step tools/device_serve_bench.sh run \
                       "$PWD/build-serve-device" ${SERVE_ARGS:---users 100 --repeats 1} \
                       --compare-answers "$out/serve/serve_bench.json" >"$out/$step/run.txt" 2>&1 ||
                       status=1
                   tail -12 "$out/$step/run.txt" ;;
            *) die "unknown step $step (tests, gpu, inject, serve, serve_small_tier)" ;;
        esac
    done
    tar -czf "$out/logs.tgz" -C "$out" ${steps//,/ }
    return $status
}

case ${1:-} in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BUILD_DIR] | run [STEPS]" ;;
esac
