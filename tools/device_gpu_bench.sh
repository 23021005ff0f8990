#!/usr/bin/env bash
# The 8B-scale GPU benchmark as one device command: gpu_bench on three real configs (random
# weights) plus the PyTorch CUDA-graph decode peer, with a summary table.
#
#   Here (no GPU), after building gpu_bench with -DINFERSCALE_CUDA=ON:
#     tools/device_gpu_bench.sh bundle [BUILD_DIR] [BUNDLE_DIR]
#   copies BUILD_DIR/bin/gpu_bench (and cuda_decode_graph_test when built) into BUNDLE_DIR/bin
#   and the non-system shared libraries they need into BUNDLE_DIR/lib. Defaults: build-perf,
#   build-gpubench-device (ignored by git via /build*/, so it can be carried).
#
#   On the GPU machine, from the repository root, carrying BUNDLE_DIR:
#     tools/device_gpu_bench.sh run [BUNDLE_DIR]
#   runs the graph-decode correctness test (when bundled), gpu_bench on
#   configs/llama-3.1-8b.json, its per-op profile (gpu_bench --profile), the torch peer, then
#   the Mistral and Qwen configs; writes gpu_bench.log, profile.log, graph_test.log,
#   torch_peer.log, results.json (everything), summary.txt and env.txt to $OUT (or
#   ./gpu-bench-logs); prints the summary, with inferscale/PyTorch decode throughput at each
#   batch size. Exits non-zero when a step failed (the others still run).
# Budget: about 4 minutes on an H200; each step has its own timeout below (worst case 7.5).
set -euo pipefail

die() { echo "device_gpu_bench: $*" >&2; exit 2; }

source "$(dirname "${BASH_SOURCE[0]}")/device_bundle_lib.sh"

bundle() {
    local build=${1:-build-perf} out=${2:-build-gpubench-device}
    local exe=$build/bin/gpu_bench
    [[ -x $exe ]] || die "$exe is not built (ninja -C $build gpu_bench)"
    rm -rf "$out"
    mkdir -p "$out/bin" "$out/lib"
    local exes=("$exe")
    [[ -x $build/bin/cuda_decode_graph_test ]] && exes+=("$build/bin/cuda_decode_graph_test")
    local e
    for e in "${exes[@]}"; do
        bundle_exe "$e" "$out/bin/$(basename "$e")" "$out/lib"
    done
    echo "bundled into $out:"
    ls -l "$out/bin" "$out/lib"
    du -sh "$out"
}

# One step: a name, a timeout in seconds, a log file, then the command. Never aborts the run.
failed=0
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    echo "== $name (timeout ${limit}s)"
    local status=0
    set +e
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    status=${PIPESTATUS[0]}
    set -e
    if [[ $status -ne 0 ]]; then
        failed=1
        echo "!! $name failed (exit $status)" | tee -a "$log"
    fi
}

run() {
    local bundle_dir=${1:-build-gpubench-device}
    [[ -x $bundle_dir/bin/gpu_bench ]] || die "no gpu_bench in $bundle_dir/bin ('$0 bundle' first)"
    bundle_dir=$(cd "$bundle_dir" && pwd)
    local logs=${OUT:-$PWD/gpu-bench-logs}
    mkdir -p "$logs"
    local work
    work=$(mktemp -d)

    local bench_path
    bench_path=$(bundle_library_path "$work/links" "$bundle_dir" "$bundle_dir/bin/gpu_bench")

    {
        machine_report "$work/links"
        LD_LIBRARY_PATH=$bench_path ldd "$bundle_dir/bin/gpu_bench" 2>&1
        python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1 || true
    } >"$logs/env.txt" 2>&1

    local bench_log=$logs/gpu_bench.log
    : >"$bench_log"
    : >"$logs/torch_peer.log"
    bench() {  # name, timeout, config
        step "gpu_bench $1" "$2" "$bench_log" env LD_LIBRARY_PATH="$bench_path" \
            "$bundle_dir/bin/gpu_bench" --config "$3" --json "$work/$1.json"
    }
    if [[ -x $bundle_dir/bin/cuda_decode_graph_test ]]; then
        step "graph decode test" 60 "$logs/graph_test.log" env LD_LIBRARY_PATH="$bench_path" \
            INFERSCALE_FIXTURES="$PWD/tests/fixtures" "$bundle_dir/bin/cuda_decode_graph_test"
    fi
    bench llama 100 configs/llama-3.1-8b.json
    : >"$logs/profile.log"
    step "gpu_bench llama --profile" 75 "$logs/profile.log" env LD_LIBRARY_PATH="$bench_path" \
        "$bundle_dir/bin/gpu_bench" --config configs/llama-3.1-8b.json --profile \
        --json "$work/profile.json"
    step "torch peer" 120 "$logs/torch_peer.log" env PYTHONUNBUFFERED=1 \
        python3 tools/torch_decode_peer.py --config configs/llama-3.1-8b.json \
        --batches 64,128,256 --json "$work/torch.json"
    bench mistral 75 configs/mistral-7b-v0.3.json
    bench qwen 75 configs/qwen2.5-7b.json

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
    rm -rf "$work"
    echo "logs in $logs"
    if [[ $failed -ne 0 ]]; then
        echo "SOME GPU BENCH STEPS FAILED"
        return 1
    fi
}

case "${1:-}" in
    bundle) shift; bundle "$@" ;;
    run) shift; run "$@" ;;
    *) die "usage: $0 bundle [BUILD_DIR] [BUNDLE_DIR] | run [BUNDLE_DIR]" ;;
esac
