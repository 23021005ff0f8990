"""The parity tests run once per llama.cpp build the host can hold inferscale to
(INFERSCALE_PARITY_LEG, set by tests/python/CMakeLists.txt):
  native: pip's own build of llama-cpp-python (ggml compiled for this host: AVX-512 where the CPU
          has it), against inferscale choosing its arithmetic from the host;
  avx2:   the peer built without AVX-512 (tools/llama_cpp_avx2_peer.sh) put first on sys.path
          here, before any test imports llama_cpp, against inferscale capped to AVX2
          (INFERSCALE_CPU_ISA=avx2, inherited by the binaries the tests start)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

if os.environ.get("INFERSCALE_PARITY_LEG") == "avx2":
    _dir = subprocess.run([os.path.join(ROOT, "tools", "llama_cpp_avx2_peer.sh")],
                          capture_output=True, text=True, check=True).stdout.strip()
    if not os.path.exists(os.path.join(_dir, ".complete")):
        raise pytest.UsageError(f"the AVX2 llama.cpp peer is missing at {_dir}: "
                                "run scripts/setup.sh --tests (or tools/llama_cpp_avx2_peer.sh --build)")
    sys.path.insert(0, _dir)
    os.environ["INFERSCALE_CPU_ISA"] = "avx2"
