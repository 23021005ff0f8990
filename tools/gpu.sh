#!/usr/bin/env bash
# shellcheck disable=SC2317 # the run_* functions are called by name
# Every GPU run of the project, on any machine with an NVIDIA GPU and a CUDA install matching
# the build's toolkit (13.x), from a build made there (--build) or carried there as a bundle.
#
#   tools/gpu.sh [OPTIONS] TARGET... [-- GPU_BENCH_ARGS]
#
# Targets run in the order given, each with its logs, run.txt and summary.txt in OUT/TARGET:
#   bundle            (no GPU needed) the build's `cuda` tests, gpu_bench, inject_bench,
#                     search_bench and inferscale, the libraries they need but the GPU
#                     machine's own (never the driver, CUDA runtime, cuBLAS) and serve-bench's
#                     LoCoMo conversation, into the bundle folder, packed into
#                     .devpack/<its name>.tar.xz to carry
#   tests             each `cuda` test, then the CLI on the GPU: chat and a `kv` answer with the
#                     bundled model (INFERSCALE_MODELS, default models/; skipped without it),
#                     8 tokens of random weights at each configs/*.json shape
#   bench             graph-decode test, gpu_bench on configs/llama-3.1-8b.json and its per-op
#                     profile, PyTorch decode peer, gpu_bench on Mistral and Qwen (~4 min, H200)
#   quant-bench       gpu_bench at the Llama-3.1-8B shape, bf16 beside --quant q4_k_m (~3 min)
#   inject-bench      inject_bench at k = 5, 10, 20, 50 on INJECT_BENCH_CONFIG (default
#                     configs/llama-3.1-8b.json) with INJECT_BENCH_ARGS (--backend cpu: no GPU)
#   search-bench      search_bench: dense, BM25 and hybrid retrieval for one user at 1k, 10k
#                     and 100k facts, CPU and GPU rows against the read limits, and with
#                     INFERSCALE_MODELS/all-minilm-l6-v2 the rows with the query's embedding
#                     (~1 min)
#   serve-bench       bench/serve_bench.py against `inferscale serve`, Llama-3.1-8B shape
#   serve-small-tier  serve-bench with a 64 MiB device tier, answers compared with serve-bench's
#   ab                gpu_bench GPU_BENCH_ARGS of the build (new) and the base, alternating
#   all               tests bench inject-bench serve-bench (about 7 minutes on an H200)
#
# Options:
#   --build DIR        bundle: the build (default build-cuda); others: run it in place
#   --bundle DIR       the bundle (build-gpu-device), unpacked afresh from its .devpack file
#   --out DIR          logs (default $OUT, else gpu-logs), env.txt, summary.txt, logs.tgz
#   --tests REGEX      bundle, tests: only the `cuda` tests whose name matches
#   --timeout-scale N  multiply bench's and inject-bench's time limits (set for an H200) by N
#   ab: --base EXE|DIR the base gpu_bench or its build (default: the build: an A/B of
#                      settings); --rounds N (3); --test NAME, a test run first; --new-env
#                      VAR=VAL, --base-env VAR=VAL, --new-arg ARG, --base-arg ARG: one side's
#                      environment and gpu_bench arguments (all but --rounds repeat)
#
# INFERSCALE_LOCOMO: the LoCoMo data (default ../shared/data/locomo10 from the repository root).
# serve-bench: SERVE_ARGS, serve_bench.py flags (--users 100 --repeats 1); SERVE_FLAGS, more
# `inferscale serve` flags; MAX_BATCH_TOKENS (2048); DEVICE_POOL_MB, the chunk pool's device
# tier (default: the server sizes it and the KV cache from the GPU's memory); HOST_POOL_MB, its
# host tier (40960). bench's decode batches (64, 128, 256) shrink to those the GPU's memory
# holds. Exits non-zero if a target failed (the others still run).
set -euo pipefail

die() { echo "gpu.sh: $*" >&2; exit 2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/gpu_bundle_lib.sh
source "$ROOT/tools/gpu_bundle_lib.sh"
abs() { if [[ -n $1 ]]; then realpath -m "$1"; fi; }

BUILD="" BUNDLE=$ROOT/build-gpu-device LOGS=${OUT:-$ROOT/gpu-logs}
TESTS_RE="" BASE="" ROUNDS=3 SCALE=1
TARGETS=() AB_TESTS=() NEW_ENV=() BASE_ENV=() NEW_ARGS=() BASE_ARGS=() BENCH_ARGS=()
while [[ $# -gt 0 ]]; do
    n=1
    case $1 in
        --build | --bundle | --out | --tests | --timeout-scale | --base | --rounds | --test | \
            --new-env | --base-env | --new-arg | --base-arg)
            [[ $# -ge 2 ]] || die "$1 takes a value"
            n=2 ;;&
        --build) BUILD=$2 ;;
        --bundle) BUNDLE=$2 ;;
        --out) LOGS=$2 ;;
        --tests) TESTS_RE=$2 ;;
        --timeout-scale) SCALE=$2 ;;
        --base) BASE=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --test) AB_TESTS+=("$2") ;;
        --new-env) NEW_ENV+=("$2") ;;
        --base-env) BASE_ENV+=("$2") ;;
        --new-arg) NEW_ARGS+=("$2") ;;
        --base-arg) BASE_ARGS+=("$2") ;;
        --) shift; BENCH_ARGS=("$@"); break ;;
        -h | --help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        bundle | tests | bench | quant-bench | inject-bench | search-bench | serve-bench | \
            serve-small-tier | ab)
            TARGETS+=("$1") ;;
        all) TARGETS+=(tests bench inject-bench serve-bench) ;;
        *) die "unknown target or option '$1' (tools/gpu.sh --help)" ;;
    esac
    shift $n
done
[[ ${#TARGETS[@]} -gt 0 ]] || die "usage: tools/gpu.sh [OPTIONS] TARGET... [-- GPU_BENCH_ARGS]" \
    "(targets: bundle tests bench inject-bench search-bench serve-bench serve-small-tier ab all;" \
    "--help)"
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "--rounds takes a positive count"
[[ $SCALE =~ ^[1-9][0-9]*$ ]] || die "--timeout-scale takes a positive whole number"
[[ ${#BENCH_ARGS[@]} -eq 0 || " ${TARGETS[*]} " == *" ab "* ]] ||
    die "the arguments after -- are gpu_bench's for the ab target"
BUILD=$(abs "$BUILD") BUNDLE=$(abs "$BUNDLE") LOGS=$(abs "$LOGS") BASE=$(abs "$BASE")
LOCOMO=$(abs "${INFERSCALE_LOCOMO:-$ROOT/../shared/data/locomo10}")
[[ -z ${INFERSCALE_MODELS:-} ]] || INFERSCALE_MODELS=$(abs "$INFERSCALE_MODELS")
[[ -z ${INJECT_BENCH_CONFIG:-} ]] || INJECT_BENCH_CONFIG=$(abs "$INJECT_BENCH_CONFIG")
export INFERSCALE_LOCOMO=$LOCOMO INFERSCALE_FIXTURES=${INFERSCALE_FIXTURES:-$ROOT/tests/fixtures}
export INFERSCALE_MODELS=${INFERSCALE_MODELS:-$ROOT/models}
cd "$ROOT"
PACK=$ROOT/.devpack/$(basename "$BUNDLE").tar.xz
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The `cuda` test executables of the build DIR, as ctest lists them (--tests filters).
cuda_tests() {
    ctest --test-dir "$1" -L cuda ${TESTS_RE:+-R "$TESTS_RE"} --show-only=json-v1 |
        python3 -c 'import json, sys
for t in json.loads(sys.stdin.read() or "{}").get("tests", []):
    print(t["command"][0])' | sort -u
}

base_exe() { if [[ -d $BASE ]]; then echo "$BASE/bin/gpu_bench"; else echo "$BASE"; fi; }

# Removes the bundle folder, refusing one that holds something else (a mistyped --bundle):
# bundles carry the file .gpu-bundle.
clear_bundle() {
    if [[ -e $BUNDLE && ! -f $BUNDLE/.gpu-bundle && -n $(ls -A "$BUNDLE") ]]; then
        die "$BUNDLE is not a bundle folder (no .gpu-bundle in it): not replacing it"
    fi
    rm -rf "$BUNDLE"
}

do_bundle() {
    local build=${BUILD:-$ROOT/build-cuda} exe name
    local -a tests missing=()
    [[ -d $build ]] || die "no build folder $build (--build DIR)"
    command -v ctest >/dev/null || die "ctest not found"
    mapfile -t tests < <(cuda_tests "$build")
    clear_bundle
    mkdir -p "$BUNDLE/bin" "$BUNDLE/tests" "$BUNDLE/lib"
    echo "bundle of $build for tools/gpu.sh, $(date -u)" >"$BUNDLE/.gpu-bundle"
    for exe in ${tests[@]+"${tests[@]}"}; do
        [[ -x $exe ]] || die "$exe is not built (cmake --build $build)"
        bundle_exe "$exe" "$BUNDLE/tests/$(basename "$exe")" "$BUNDLE/lib"
    done
    [[ ${#tests[@]} -gt 0 ]] ||
        missing+=("cuda tests (none in $build${TESTS_RE:+ matching $TESTS_RE})")
    for name in gpu_bench inject_bench search_bench inferscale; do
        if [[ -x $build/bin/$name ]]; then
            bundle_exe "$build/bin/$name" "$BUNDLE/bin/$name" "$BUNDLE/lib"
        else
            missing+=("$name")
        fi
    done
    if [[ -n $BASE ]]; then
        [[ -x $(base_exe) ]] || die "no base gpu_bench at $(base_exe)"
        bundle_exe "$(base_exe)" "$BUNDLE/bin/gpu_bench_base" "$BUNDLE/lib"
    fi
    if [[ -f $LOCOMO/26.json ]]; then
        cp "$LOCOMO/26.json" "$BUNDLE/conversation.json"
    else
        missing+=("$LOCOMO/26.json (set INFERSCALE_LOCOMO)")
    fi
    compgen -G "$BUNDLE/tests/*" >/dev/null || compgen -G "$BUNDLE/bin/*" >/dev/null ||
        die "nothing to bundle in $build (configured with -DINFERSCALE_CUDA=ON and built?)"
    echo "bundled from $build into $BUNDLE:"
    ls -l "$BUNDLE/bin" "$BUNDLE/tests" "$BUNDLE/lib"
    du -sh "$BUNDLE"
    if [[ ${#missing[@]} -gt 0 ]]; then
        printf 'not bundled (the targets that need it will stop): %s\n' "${missing[@]}"
    fi
    mkdir -p "$(dirname "$PACK")"
    tar -C "$(dirname "$BUNDLE")" -cf - "$(basename "$BUNDLE")" | xz -T0 -6 >"$PACK"
    ls -l "$PACK"
}

# Once, before the first GPU target: where the programs are (BIN, TEST_EXES, BASE_EXE, CONV),
# the library path they run with (RUN_PATH: never exported, so python3 and torch keep their
# own) and OUT/env.txt (the machine, ldd of every program, torch's version).
PREPARED=0 BUNDLED=0
prepare() {
    [[ $PREPARED -eq 0 ]] || return 0
    PREPARED=1
    local lib_dir=$WORK/none exe
    if [[ -n $BUILD ]]; then
        BIN=$BUILD/bin CONV=$LOCOMO/26.json
        command -v ctest >/dev/null || die "ctest not found"
        mapfile -t TEST_EXES < <(cuda_tests "$BUILD")
    else
        if [[ -f $PACK && $BUNDLED -eq 0 ]]; then
            clear_bundle
            tar -C "$(dirname "$BUNDLE")" -xJf "$PACK"
        fi
        [[ -d $BUNDLE/bin ]] || die "no bundle at $BUNDLE nor ${PACK#"$ROOT"/}: run" \
            "'tools/gpu.sh bundle' where the build is and carry .devpack, or run a build" \
            "made here with --build DIR"
        BIN=$BUNDLE/bin CONV=$BUNDLE/conversation.json lib_dir=$BUNDLE/lib
        TEST_EXES=()
        for exe in "$BUNDLE"/tests/*; do
            [[ -x $exe && $(basename "$exe") =~ ${TESTS_RE:-.} ]] && TEST_EXES+=("$exe")
        done
    fi
    BASE_EXE=$BIN/gpu_bench
    if [[ -n $BASE ]]; then BASE_EXE=$(base_exe); elif [[ -x $BIN/gpu_bench_base ]]; then
        BASE_EXE=$BIN/gpu_bench_base; fi
    local -a exes=(${TEST_EXES[@]+"${TEST_EXES[@]}"})
    for exe in gpu_bench gpu_bench_base inject_bench search_bench inferscale; do
        if [[ -x $BIN/$exe ]]; then exes+=("$BIN/$exe"); fi
    done
    [[ $BASE_EXE == "$BIN"/* ]] || exes+=("$BASE_EXE")
    RUN_PATH=$(bundle_library_path "$WORK/links" "$lib_dir" ${exes[@]+"${exes[@]}"})
    mkdir -p "$LOGS"
    {
        echo "date: $(date -u)"
        echo "host: $(uname -a)"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
        echo "cuda lib dirs: $(cuda_lib_dirs | paste -sd: - | grep . || echo '<none found>')"
        echo "bundled libs used: $(find "$WORK/links" -mindepth 1 -printf '%f\n' | sort | paste -sd' ' -)"
        for exe in ${exes[@]+"${exes[@]}"}; do
            echo "== ldd $exe"
            LD_LIBRARY_PATH=$RUN_PATH ldd "$exe" 2>&1 || true
        done
        python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 || true
    } >"$LOGS/env.txt" 2>&1
    if grep -q '=> not found' "$LOGS/env.txt"; then
        echo "!! unresolved libraries (see env.txt):"
        awk '/^== ldd/ {h = $0} /=> not found/ {if (h) print h; h = ""; print}' "$LOGS/env.txt"
    fi
    return 0
}

need() {
    [[ -x $1 ]] || die "no $1 (not built$([[ -n $BUILD ]] || echo ' where the bundle was made'))"
}

# The CLI on the GPU (LOG): each command timed from start to exit, model load included.
# Returns non-zero when a command failed (the others still run).
run_cli() {
    local log=$1 db cli_failed=0 config model
    db=$(mktemp -d -p "$WORK")/memory.db
    cli_step() {
        echo "\$ inferscale $*" | tee -a "$log"
        local start status=0
        start=$(date +%s.%N)
        LD_LIBRARY_PATH=$RUN_PATH timeout 120 "$BIN/inferscale" "$@" >>"$log" 2>&1 || status=$?
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
    model=$(random_weights_model_dir)
    for config in configs/*.json; do
        cli_step generate --device cuda --model "$model" --random-weights "$config" \
            --max-tokens 8 --ignore-eos --json --prompt "The capital of France is"
    done
    return "$cli_failed"
}

run_tests() {
    local logs=$1 summary=$1/summary.txt failed=0 exe name status tally
    [[ ${#TEST_EXES[@]} -gt 0 ]] ||
        die "no cuda tests in ${BUILD:-$BUNDLE}${TESTS_RE:+ matching $TESTS_RE}"
    : >"$summary"
    for exe in "${TEST_EXES[@]}"; do
        name=$(basename "$exe")
        echo "== $name"
        status=0
        LD_LIBRARY_PATH=$RUN_PATH "$exe" --gtest_color=no >"$logs/$name.log" 2>&1 || status=$?
        # gtest's own tally, or the crash reason when the binary died (IS_CHECK aborts).
        tally=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$logs/$name.log" | grep -v '\] [A-Za-z_/]*\.' || true)
        # On a GPU machine a binary that passed nothing skipped everything: no device seen,
        # unless it skipped for want of the bundled model.
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
    if [[ -x $BIN/inferscale ]]; then
        echo "== inferscale CLI on the GPU (cli.log)"
        if run_cli "$logs/cli.log"; then
            echo "PASS inferscale CLI (cli.log)" | tee -a "$summary"
        else
            failed=1
            echo "FAIL inferscale CLI (cli.log)" | tee -a "$summary"
        fi
    fi
    if [[ $failed -ne 0 ]]; then
        echo "SOME CUDA TESTS FAILED" | tee -a "$summary"
        return 1
    fi
    echo "ALL CUDA TESTS PASSED" | tee -a "$summary"
}

# One bench step: a name, a time limit in seconds (times --timeout-scale), a log file, then the
# command. Never aborts the run; a failure sets step_failed.
step_failed=0
step() {
    local name=$1 limit=$(($2 * SCALE)) log=$3 status=0
    shift 3
    echo "== $name (timeout ${limit}s)"
    timeout "$limit" "$@" 2>&1 | tee -a "$log" || status=${PIPESTATUS[0]}
    if [[ $status -ne 0 ]]; then
        step_failed=1
        echo "!! $name failed (exit $status)" | tee -a "$log"
    fi
}

# The decode batches to give CONFIG's runs: none (their default 64,128,256) where all fit in
# the GPU's memory, else those that fit, else the smallest.
decode_batches() {
    local fit
    [[ $GPU_MIB =~ ^[0-9]+$ ]] || return 0
    fit=$(batches_that_fit "$1" "$GPU_MIB" 64,128,256)
    [[ $fit == 64,128,256 ]] && return 0
    echo "!! $GPU_MIB MiB of GPU memory: decode batches of $1 cut to ${fit:-64 (none fits)}" >&2
    echo "${fit:-64}"
}

run_bench() {
    local logs=$1 work=$WORK/bench bench_log=$1/gpu_bench.log batches graph_test
    need "$BIN/gpu_bench"
    mkdir -p "$work"
    GPU_MIB=$(gpu_memory_mib || true)
    bench() { # name, timeout, log, config, more gpu_bench arguments
        local name=$1 limit=$2 log=$3 config=$4 fit
        shift 4
        fit=$(decode_batches "$config")
        step "gpu_bench $name" "$limit" "$log" env LD_LIBRARY_PATH="$RUN_PATH" \
            "$BIN/gpu_bench" --config "$config" ${fit:+--decode-batches "$fit"} "$@"
    }
    graph_test=$(printf '%s\n' ${TEST_EXES[@]+"${TEST_EXES[@]}"} | grep '/cuda_decode_graph_test$' || true)
    if [[ -n $graph_test ]]; then
        step "graph decode test" 60 "$logs/graph_test.log" env LD_LIBRARY_PATH="$RUN_PATH" "$graph_test"
    fi
    bench llama 100 "$bench_log" configs/llama-3.1-8b.json --json "$work/llama.json"
    bench "llama --profile" 75 "$logs/profile.log" configs/llama-3.1-8b.json --profile \
        --json "$work/profile.json"
    batches=$(decode_batches configs/llama-3.1-8b.json 2>/dev/null)
    step "torch peer" 120 "$logs/torch_peer.log" env PYTHONUNBUFFERED=1 \
        python3 tools/torch_decode_peer.py --config configs/llama-3.1-8b.json \
        --batches "${batches:-64,128,256}" --json "$work/torch.json"
    bench mistral 75 "$bench_log" configs/mistral-7b-v0.3.json --json "$work/mistral.json"
    bench qwen 75 "$bench_log" configs/qwen2.5-7b.json --json "$work/qwen.json"

    python3 - "$work" "$logs/results.json" <<'PY' | tee "$logs/summary.txt"
import json, os, sys
work, out = sys.argv[1], sys.argv[2]
res = {}
for name in ("llama", "mistral", "qwen", "torch", "profile"):
    p = os.path.join(work, name + ".json")
    if os.path.exists(p):
        with open(p) as f:
            res[name] = json.load(f)
with open(out, "w") as f:
    json.dump(res, f, indent=2)

def pct(limit, ms):
    return f"{100 * limit / ms:.0f}%" if limit and ms else "n/a"

print("\n==== gpu_bench summary ====")
first = next((r for k, r in res.items() if k != "torch"), None)
if first:
    print(f"device: {first.get('device')}   d2d copy {first.get('copy', {}).get('bytes_per_s', 0) / 1e12:.2f} TB/s"
          f"   gemm {first.get('gemm', {}).get('flops_per_s', 0) / 1e12:.0f} TFLOP/s single,"
          f" {first.get('gemm', {}).get('sustained_flops_per_s', 0) / 1e12:.0f} back to back"
          f"   pinned readback {first.get('d2h_pinned', {}).get('bytes_per_s', 0) / 1e9:.1f} GB/s")
rows = []
for name in ("llama", "mistral", "qwen"):
    r = res.get(name)
    if not r:
        rows.append((name, "MISSING (see gpu_bench.log)", "", "", ""))
        continue
    d1, tt = r.get("decode1", {}), r.get("ttft", {})
    rows.append((name, "decode b=1 ms/token", f"{d1.get('ms_per_token', 0):.3f}",
                 f"{d1.get('read_limit_ms', 0):.3f}", pct(d1.get('read_limit_ms'), d1.get('ms_per_token'))))
    rows.append((name, "TTFT 32 tok ms", f"{tt.get('ms', 0):.3f}", f"{tt.get('limit_ms', 0):.3f}",
                 pct(tt.get('limit_ms'), tt.get('ms'))))
    for p in r.get("prefill", []):
        rows.append((name, f"prefill {p['seqs']}x{p['len']} tok/s", f"{p['tokens_per_s']:.0f}",
                     f"{p['gemm_bound_tokens_per_s']:.0f}", pct(p['gemm_bound_ms'], p['median_ms'])))
        if p.get("single_gemm_bound_ms"):
            rows.append((name, "  vs single-GEMM rate", "", "",
                         pct(p["single_gemm_bound_ms"], p["median_ms"])))
    for d in r.get("decode", []):
        rows.append((name, f"decode b={d['batch']} tok/s", f"{d['tokens_per_s']:.0f}",
                     f"{d['roofline_ms']:.2f} ms", pct(d['roofline_ms'], d['ms_per_step'])))
for name in ("llama", "mistral", "qwen"):
    r = res.get(name)
    if r:
        print(f"{name}: decode graphs recorded {r.get('decode_graphs')}"
              f"{'  GRAPH FALLBACK: ' + r['decode_graph_error'] if r.get('decode_graph_error') else ''}")
print(f"{'model':8} {'metric':26} {'measured':>10} {'limit':>12} {'% limit':>8}")
for row in rows:
    print(f"{row[0]:8} {row[1]:26} {row[2]:>10} {row[3]:>12} {row[4]:>8}")

t = res.get("torch")
l = res.get("llama")
print("\nbatched decode, Llama-3.1-8B shape, 1K context: inferscale vs PyTorch (CUDA graphs)")
if not t:
    print("  torch peer MISSING (see torch_peer.log)")
else:
    print(f"  torch {t.get('torch')}, weights: {t.get('weights')}, attention: {t.get('decode_attention')}")
    ours = {d["batch"]: d for d in (l or {}).get("decode", [])}
    print(f"  {'batch':>5} {'inferscale tok/s':>17} {'pytorch tok/s':>14} {'ratio':>7}")
    for d in t.get("decode", []):
        o = ours.get(d["batch"])
        mine = o["tokens_per_s"] if o else 0
        ratio = f"{mine / d['tokens_per_s']:.2f}x" if mine else "n/a"
        print(f"  {d['batch']:>5} {mine:>17.0f} {d['tokens_per_s']:>14.0f} {ratio:>7}")
PY
    if [[ -f $work/profile.json ]]; then
        python3 - "$work/profile.json" <<'PY' | tee -a "$logs/summary.txt"
import json, sys
p = json.load(open(sys.argv[1]))
print("\nper-op profile, top ops (full tables in profile.log)")
for sc in p.get("profile", []):
    print(f"  {sc['scenario']}: step {sc['step_ms']:.3f} ms, ops {sc['ops_ms']:.3f} ms")
    for o in sc["ops"][:8]:
        ms = o["ms_per_step"]
        gbs = o["bytes_per_step"] / (ms * 1e-3) / 1e9 if ms > 0 else 0
        tfs = o["flops_per_step"] / (ms * 1e-3) / 1e12 if ms > 0 else 0
        print(f"    {o['op']:16} {o['shape']:28} {o['calls_per_step']:6.1f} calls {ms:8.3f} ms"
              f" {100 * ms / sc['step_ms']:5.1f}%  {gbs:6.0f} GB/s {tfs:6.1f} TFLOP/s")
PY
    fi
    if [[ $step_failed -ne 0 ]]; then
        echo "SOME GPU BENCH STEPS FAILED"
        return 1
    fi
}

# gpu_bench at the Llama-3.1-8B shape in bf16, then in llama.cpp's Q4_K_M mix: batch-1 decode
# against its weight-read limit and bf16's time, batched decode, and the 2K prefill's rate as a
# share of bf16's.
run_quant_bench() {
    local logs=$1 work=$WORK/quant-bench q
    need "$BIN/gpu_bench"
    mkdir -p "$work"
    for q in none q4_k_m; do
        step "gpu_bench $q" 150 "$logs/gpu_bench.log" env LD_LIBRARY_PATH="$RUN_PATH" \
            "$BIN/gpu_bench" --config configs/llama-3.1-8b.json --rows copy,decode1,prefill,decode \
            --decode-batches 16,64 --quant "$q" --json "$work/$q.json"
    done
    python3 - "$work" <<'PY' | tee "$logs/summary.txt"
import json, os, sys
work = sys.argv[1]
res = {}
for q in ("none", "q4_k_m"):
    p = os.path.join(work, q + ".json")
    if os.path.exists(p):
        with open(p) as f:
            res[q] = json.load(f)
if len(res) < 2:
    sys.exit("quant-bench: a gpu_bench run is missing (see gpu_bench.log)")
dense, quant = res["none"], res["q4_k_m"]
bw = quant["copy"]["bytes_per_s"]
print(f"device: {quant.get('device')}   d2d copy {bw / 1e12:.2f} TB/s")
print(f"weights: bf16 {dense['weights_bytes'] / 1e9:.2f} GB, q4_k_m {quant['weights_bytes'] / 1e9:.2f} GB")
d1, q1 = dense["decode1"], quant["decode1"]
limit = q1["read_limit_ms"]
print(f"decode b=1: bf16 {d1['ms_per_token']:.3f} ms, q4_k_m {q1['ms_per_token']:.3f} ms "
      f"(read limit {limit:.3f} ms: {q1['ms_per_token'] / limit:.2f}x the limit, target <= 1.3x); "
      f"q4_k_m {d1['ms_per_token'] / q1['ms_per_token']:.2f}x faster than bf16 (target >= 2.5x)")
for d, q in zip(dense.get("decode", []), quant.get("decode", [])):
    print(f"decode b={q['batch']}: bf16 {d['tokens_per_s']:.0f} tok/s, q4_k_m {q['tokens_per_s']:.0f} tok/s "
          f"({q['tokens_per_s'] / d['tokens_per_s']:.2f}x)")
for d, q in zip(dense.get("prefill", []), quant.get("prefill", [])):
    print(f"prefill {q['seqs']}x{q['len']}: bf16 {d['tokens_per_s']:.0f} tok/s, q4_k_m "
          f"{q['tokens_per_s']:.0f} tok/s ({100 * q['tokens_per_s'] / d['tokens_per_s']:.0f}% of bf16, "
          f"target >= 60% at 1x2048)")
PY
}

run_search_bench() {
    local logs=$1
    need "$BIN/search_bench"
    echo "== search_bench (timeout $((300 * SCALE))s)"
    local status=0
    local embed=()  # the rows with the query's embedding, where the model is at hand
    if [[ -f $INFERSCALE_MODELS/all-minilm-l6-v2/model.safetensors ]]; then
        embed=(--embedding-model "$INFERSCALE_MODELS/all-minilm-l6-v2")
    fi
    timeout $((300 * SCALE)) env LD_LIBRARY_PATH="$RUN_PATH" "$BIN/search_bench" --gpu on \
        ${embed[@]+"${embed[@]}"} --json "$logs/search_bench.json" 2>&1 |
        tee "$logs/search_bench.log" ||
        status=${PIPESTATUS[0]}
    cp "$logs/search_bench.log" "$logs/summary.txt"
    if [[ $status -ne 0 ]]; then
        echo "SEARCH BENCH FAILED (exit $status)"
        return 1
    fi
}

run_inject_bench() {
    local logs=$1 config=${INJECT_BENCH_CONFIG:-configs/llama-3.1-8b.json} status=0
    need "$BIN/inject_bench"
    echo "== inject_bench $config (timeout $((170 * SCALE))s)"
    # shellcheck disable=SC2086 # INJECT_BENCH_ARGS is a list of flags
    timeout $((170 * SCALE)) env LD_LIBRARY_PATH="$RUN_PATH" "$BIN/inject_bench" --config "$config" \
        --json "$logs/inject_bench.json" ${INJECT_BENCH_ARGS:-} 2>&1 | tee "$logs/inject_bench.log" ||
        status=${PIPESTATUS[0]}
    # The table and ratios are everything from the bench's "== inject_bench" header on.
    awk '/^== inject_bench /{on=1} on' "$logs/inject_bench.log" >"$logs/summary.txt" || true
    printf '\n==== inject_bench summary ====\n'
    cat "$logs/summary.txt"
    if [[ $status -ne 0 ]]; then
        echo "INJECT BENCH FAILED (exit $status)"
        return 1
    fi
}

# serve_bench.py at the Llama-3.1-8B shape, random weights; LOGS, then more serve_bench flags.
run_serve_bench() {
    local logs=$1 model status=0
    shift
    need "$BIN/inferscale"
    [[ -f $CONV ]] || die "no LoCoMo conversation at $CONV (INFERSCALE_LOCOMO)"
    model=$(random_weights_model_dir)
    # shellcheck disable=SC2086 # SERVE_ARGS is a list of flags
    LD_LIBRARY_PATH=$RUN_PATH python3 bench/serve_bench.py --bin "$BIN/inferscale" \
        --conversation "$CONV" --out "$logs/serve_bench.json" --server-log "$logs/server.log" \
        --server-args "--model $model --device cuda --random-weights configs/llama-3.1-8b.json \
--max-batch-tokens ${MAX_BATCH_TOKENS:-2048} --max-batch-seqs 256 \
${DEVICE_POOL_MB:+--device-pool-mb $DEVICE_POOL_MB} --host-pool-mb ${HOST_POOL_MB:-40960} \
--max-context 4096 ${SERVE_FLAGS:-}" ${SERVE_ARGS:---users 100 --repeats 1} "$@" 2>&1 |
        tee "$logs/serve_bench.txt" || status=${PIPESTATUS[0]}
    { grep "GPU memory:" "$logs/serve_bench.txt" || true; tail -10 "$logs/serve_bench.txt"; } \
        >"$logs/summary.txt"
    return "$status"
}
run_serve_small_tier() {
    local first=$LOGS/serve-bench/serve_bench.json
    local -a compare=(--compare-answers "$first")
    [[ -f $first ]] ||
        { compare=(); echo "!! no $first (serve-bench first, same --out): answers not compared"; }
    DEVICE_POOL_MB=64 run_serve_bench "$1" ${compare[@]+"${compare[@]}"}
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

# Per metric of TSV (side, round, metric, value, unit): each side's values, medians, new / base.
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

run_ab() {
    local logs=$1 tsv=$1/ab.tsv failed=0 test exe round side log status
    need "$BIN/gpu_bench"
    need "$BASE_EXE"
    for test in ${AB_TESTS[@]+"${AB_TESTS[@]}"}; do
        exe=$(printf '%s\n' ${TEST_EXES[@]+"${TEST_EXES[@]}"} | grep "/$test\$" || echo "$BIN/$test")
        need "$exe"
        status=0
        LD_LIBRARY_PATH=$RUN_PATH timeout 600 "$exe" >"$logs/$test.log" 2>&1 || status=$?
        echo "== $test exited $status"
        grep -E '^\[  PASSED  \]|^\[  SKIPPED \] [0-9]+ tests?,|^\[  FAILED  \]|FAILED TESTS?$' \
            "$logs/$test.log" || true
        [[ $status -eq 0 ]] || failed=1
    done
    echo "== new: $BIN/gpu_bench; base: $BASE_EXE; $ROUNDS rounds"
    : >"$tsv"
    for ((round = 1; round <= ROUNDS; ++round)); do
        for side in new base; do
            log=$logs/$side.$round.log exe=$BIN/gpu_bench status=0
            [[ $side == new ]] || exe=$BASE_EXE
            local -n env_side=${side^^}_ENV args_side=${side^^}_ARGS
            env LD_LIBRARY_PATH="$RUN_PATH" ${env_side[@]+"${env_side[@]}"} timeout 600 "$exe" \
                ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} ${args_side[@]+"${args_side[@]}"} >"$log" 2>&1 ||
                status=$?
            if [[ $status -ne 0 ]]; then
                failed=1
                echo "!! $side round $round exited $status (log: $log)"
                tail -n 5 "$log"
            fi
            table_rows "$log" | awk -v s="$side" -v r="$round" '{print s "\t" r "\t" $0}' >>"$tsv"
        done
    done
    summarize "$tsv" | tee "$logs/summary.txt"
    return "$failed"
}

# What the closing summary shows of each target's run.
target_summary() {
    local dir=$LOGS/$1
    case $1 in
        tests) grep -E '^(PASS|FAIL|SKIP)|TESTS' "$dir/summary.txt" ;;
        bench) sed -n '/==== gpu_bench summary/,/per-op profile/p' "$dir/summary.txt" ;;
        *) cat "$dir/summary.txt" ;;
    esac 2>/dev/null || tail -5 "$dir/run.txt"
}

status=0
declare -A rc_of=()
ran=()
for target in "${TARGETS[@]}"; do
    if [[ $target == bundle ]]; then
        do_bundle
        BUNDLED=1
        continue
    fi
    [[ $target == inject-bench && " ${INJECT_BENCH_ARGS:-} " == *" --backend cpu "* ]] ||
        need_gpu "target $target"
    prepare
    echo "==== $target"
    rm -rf "${LOGS:?}/$target"
    mkdir -p "$LOGS/$target"
    set +e
    (set -e; "run_${target//-/_}" "$LOGS/$target") 2>&1 | tee "$LOGS/$target/run.txt"
    rc=${PIPESTATUS[0]}
    set -e
    if [[ $rc -ne 0 ]]; then status=1; echo "!! $target failed (exit $rc)"; fi
    [[ -n ${rc_of[$target]:-} ]] || ran+=("$target")
    rc_of[$target]=$rc
done
[[ ${#ran[@]} -gt 0 ]] || exit 0
for target in "${ran[@]}"; do
    if [[ ${rc_of[$target]} -eq 0 ]]; then echo "==== $target: ok"; else
        echo "==== $target: FAILED (exit ${rc_of[$target]})"; fi
    target_summary "$target"
done >"$LOGS/summary.txt"
echo
cat "$LOGS/summary.txt"
tar -czf "$LOGS/logs.tgz" -C "$LOGS" env.txt summary.txt "${ran[@]}"
echo "logs in $LOGS (all of them in logs.tgz)"
exit $status
