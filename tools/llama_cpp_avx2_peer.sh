#!/usr/bin/env bash
# The llama.cpp peer built without AVX-512 (llama-cpp-python at the version pinned in
# tools/requirements-test.txt, ggml compiled for AVX2 + FMA + F16C), for the parity tests' AVX2
# leg on a host that has AVX-512 (where pip's own build of the peer uses AVX-512).
#   tools/llama_cpp_avx2_peer.sh           # prints the directory to put on PYTHONPATH
#   tools/llama_cpp_avx2_peer.sh --build   # builds it there first if it is not there (~5-10 min)
# Cached outside the checkout ($INFERSCALE_PEER_CACHE, default ~/.cache/inferscale), so a fresh
# clone on the same machine reuses it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^llama-cpp-python==\([^ ]*\).*/\1/p' "$ROOT/tools/requirements-test.txt")"
[[ -n "$VERSION" ]] || { echo "error: tools/requirements-test.txt pins no llama-cpp-python" >&2; exit 1; }
DIR="${INFERSCALE_PEER_CACHE:-${HOME}/.cache/inferscale}/llama-cpp-python-${VERSION}-avx2"

if [[ "${1:-}" == "--build" && ! -f "$DIR/.complete" ]]; then
  echo "setup: building llama-cpp-python $VERSION without AVX-512 into $DIR" >&2
  rm -rf "$DIR"
  mkdir -p "$DIR"
  built=0
  for attempt in 1 2 3; do
    if CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF" \
        python3 -m pip install -q --no-cache-dir --no-deps --target "$DIR" \
        "llama-cpp-python==$VERSION" >&2; then
      built=1
      break
    fi
    echo "setup: pip failed building the AVX2 peer (attempt $attempt of 3)" >&2
    sleep $((attempt * 5))
  done
  ((built)) || exit 1
  touch "$DIR/.complete"
fi
echo "$DIR"
