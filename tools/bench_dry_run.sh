#!/usr/bin/env bash
# The GPU benches' own logic, run on the CPU backend from a CUDA build (no GPU needed), so a
# broken bench shows up here rather than on the scarce GPU machine: gpu_bench and inject_bench
# on the golden Llama fixture's small config and search_bench's CPU rows on small users, then
# their JSON checked against the quantities they derive (limits from the measured rates,
# tokens/s from the step times); then
# tools/gpu.sh bundles the build and runs inject_bench from the unpacked bundle the same way.
#
#   tools/bench_dry_run.sh [BUILD_DIR]    (default build-cuda)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${1:-build-cuda}/bin
CONFIG=tests/fixtures/golden/llama_gqa/config.json
WORK=$(mktemp -d)
PACK=.devpack/bench-dry-run-bundle.tar.xz
trap 'rm -rf "$WORK" "$PACK"' EXIT

"$BIN/gpu_bench" --backend cpu --config "$CONFIG" --copy-mib 16 --d2h-mib 16 --gemm-size 64 \
  --context 32 --prompt 16 --prefill-len 64 --prefill-seqs 2 --prefill-seq-len 32 \
  --decode-batches 2,4 --json "$WORK/gpu.json" >"$WORK/gpu.log" 2>&1 ||
  { cat "$WORK/gpu.log"; exit 1; }
"$BIN/inject_bench" --backend cpu --config "$CONFIG" --ks 2,4 --warmup 1 --repeats 2 \
  --json "$WORK/inject.json" >"$WORK/inject.log" 2>&1 ||
  { cat "$WORK/inject.log"; exit 1; }

"$BIN/search_bench" --facts 300,3000 --iters 20 --threads 1 --gpu off \
  --json "$WORK/search.json" >"$WORK/search.log" 2>&1 || { cat "$WORK/search.log"; exit 1; }

python3 - "$WORK/gpu.json" "$WORK/inject.json" "$WORK/search.json" <<'PY'
import json, math, sys

g = json.load(open(sys.argv[1]))
i = json.load(open(sys.argv[2]))
s = json.load(open(sys.argv[3]))
errors = []

def check(ok, what):
    if not ok:
        errors.append(what)

def near(a, b):
    return math.isclose(a, b, rel_tol=1e-6)

gemm = g["gemm"]
check(g["logits_finite"], "gpu_bench: logits not finite")
check(gemm["flops_per_s"] > 0 and gemm["sustained_flops_per_s"] > 0, "gpu_bench: GEMM rates")
check(gemm["sustained"]["repeats"] > 0, "gpu_bench: no back-to-back GEMM blocks")
for p in g["prefill"]:
    name = f"prefill {p['seqs']}x{p['len']}"
    check(near(p["gemm_bound_ms"], 1e3 * p["flops"] / gemm["sustained_flops_per_s"]),
          f"{name}: GEMM bound is not flops over the back-to-back rate")
    check(near(p["single_gemm_bound_ms"], 1e3 * p["flops"] / gemm["flops_per_s"]),
          f"{name}: single-GEMM bound is not flops over the single rate")
    check(near(p["tokens_per_s"], p["seqs"] * p["len"] / (p["median_ms"] * 1e-3)),
          f"{name}: tokens/s is not tokens over the median step")
for d in g["decode"]:
    check(near(d["tokens_per_s"], d["batch"] / (d["ms_per_step"] * 1e-3)),
          f"decode b={d['batch']}: tokens/s is not the batch over the step")
    check(d["roofline_ms"] > 0, f"decode b={d['batch']}: no roofline")
check(g["ttft"]["limit_ms"] > 0 and g["decode1"]["read_limit_ms"] > 0, "gpu_bench: read limits")
check(i["logits_finite"] and i["host_gpu_logits_match"], "inject_bench: logits")
check(len(i["rows"]) > 0, "inject_bench: no rows")
bandwidth = {"cpu": s["host_read_bytes_per_s"], "gpu": s.get("device_copy_bytes_per_s", 0)}
check(bandwidth["cpu"] > 0, "search_bench: no host read bandwidth")
for facts in (300, 3000):
    rows = {r["method"]: r for r in s["rows"] if r["facts"] == facts and r["device"] == "cpu"}
    check(set(rows) == {"dense", "bm25", "hybrid"}, f"search_bench {facts}: rows {sorted(rows)}")
    for r in rows.values():
        check(0 < r["p50_us"] <= r["p99_us"], f"search_bench {facts} {r['method']}: percentiles")
    dense = rows.get("dense", {"bytes_read": 0, "limit_us": 0})
    check(dense["bytes_read"] == facts * s["dim"] * 4, f"search_bench {facts}: dense bytes")
    check(near(dense["limit_us"], 1e6 * dense["bytes_read"] / bandwidth["cpu"]),
          f"search_bench {facts}: the limit is not the bytes over the measured bandwidth")
for e in errors:
    print("bench dry run:", e)
sys.exit(1 if errors else 0)
PY

# tools/gpu.sh: the bundle of this build (packed into $PACK), unpacked again to run inject_bench.
tools/gpu.sh bundle --build "${1:-build-cuda}" --bundle "$WORK/bench-dry-run-bundle" \
  >"$WORK/bundle.log" 2>&1 || { cat "$WORK/bundle.log"; exit 1; }
INJECT_BENCH_CONFIG=$CONFIG INJECT_BENCH_ARGS="--backend cpu --ks 2,4 --warmup 1 --repeats 2" \
  tools/gpu.sh --bundle "$WORK/bench-dry-run-bundle" --out "$WORK/gpu-logs" inject-bench \
  >"$WORK/gpu-sh.log" 2>&1 || { cat "$WORK/bundle.log" "$WORK/gpu-sh.log"; exit 1; }
echo "bench dry runs: gpu_bench and inject_bench on the CPU backend and search_bench's CPU rows" \
  "pass their checks, inject_bench also through tools/gpu.sh's bundle"
