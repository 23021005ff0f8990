#!/usr/bin/env bash
# Sets up everything the tests need and runs them all:
#   1. the release build: every CTest test except the GPU ones (label cuda);
#   2. an AddressSanitizer + UBSan build: the unit tests (label unit);
#   3. the libFuzzer targets, 30 s each (scripts/fuzz.sh);
#   4. where nvcc exists, a compile of the CUDA backend (no GPU needed), and the GPU benches'
#      logic run on its CPU backend, also from a tools/gpu.sh bundle (tools/bench_dry_run.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
scripts/setup.sh --tests
JOBS="$(nproc)"

# Which llama.cpp builds the parity tests meet here (tests/python/conftest.py).
echo "test: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo; then
  echo "test: AVX-512 present: parity legs avx512 (pip's llama.cpp) and avx2 (tools/llama_cpp_avx2_peer.sh)"
else
  echo "test: no AVX-512: parity leg avx2 (pip's llama.cpp, built for this CPU)"
fi

ctest --test-dir build --output-on-failure -j "$JOBS" -LE cuda

if [[ ! -f build-asan/build.ninja ]]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DINFERSCALE_ASAN=ON \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
fi
cmake --build build-asan
ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L unit

scripts/fuzz.sh 30

if command -v nvcc >/dev/null && [[ -f src/backends/cuda/CMakeLists.txt ]]; then
  if [[ ! -f build-cuda/build.ninja ]]; then
    cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERSCALE_CUDA=ON \
      -DINFERSCALE_TESTS=OFF -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  fi
  cmake --build build-cuda
  tools/bench_dry_run.sh build-cuda
fi
