#!/usr/bin/env python3
"""Writes tests/fixtures/quant/quant_rows.bin: random f32 rows and their Q8_0, Q4_0 and Q4_1
blocks and dequantizations as computed by the PyPI `gguf` package (gguf.quants), the reference
that tests/tensor/quantized_test.cpp holds our block code to.

Layout (little-endian): i32 rows, i32 cols, then
  f32  x[rows * cols]
  u8   q8_0[rows * cols / 32 * 34]      gguf.quants.quantize(x, Q8_0)
  f32  q8_0_deq[rows * cols]            gguf.quants.dequantize(q8_0, Q8_0)
  u8   q4_0[rows * cols / 32 * 18]      and its dequantization, as for Q8_0
  f32  q4_0_deq[rows * cols]
  u8   q4_1[rows * cols / 32 * 20]
  f32  q4_1_deq[rows * cols]

gguf.quants' Q8_0 is ggml's scalar reference: id = 1 / d and round half away from zero
(np_roundf). ggml's AVX2 activation quantizer, which llama.cpp runs on x86 and ours follows,
uses id = 127 / amax and rounds half to even. The two agree except at exact .5 ties and where
the two multipliers differ in the last bit and that moves a product across a .5 boundary;
this script checks that no such case occurs in the fixture (random data almost never has one),
so the C++ test can demand identical bytes. Usage: python3 tools/make_quant_fixtures.py
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "quant", "quant_rows.bin")
ROWS, COLS = 6, 128
SEED = 20261202


def avx2_q8_0(x: np.ndarray) -> np.ndarray:
    """ggml's AVX2 quantize_row_q8_0 in numpy (f32 arithmetic throughout)."""
    blocks = x.reshape(-1, 32).astype(np.float32)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(amax == 0, np.float32(0), np.float32(127) / amax).astype(np.float32)
    q = np.round((blocks * idv).astype(np.float32))  # numpy rounds half to even
    return np.concatenate([d.astype(np.float16).view(np.uint8), q.astype(np.int8).view(np.uint8)], axis=1)


def main() -> None:
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    x[1] *= 0.01   # small activations
    x[2] *= 100.0  # large ones
    x[3, 32:64] = 0.0  # an all-zero block: d = 0, id = 0
    x[4] = rng.uniform(-1, 1, COLS).astype(np.float32) ** 3  # heavy-tailed
    parts = [np.array([ROWS, COLS], dtype="<i4").tobytes(), x.astype("<f4").tobytes()]
    for qtype in (QT.Q8_0, QT.Q4_0, QT.Q4_1):
        blocks = quants.quantize(x, qtype)
        deq = quants.dequantize(blocks, qtype).reshape(x.shape).astype(np.float32)
        parts += [blocks.tobytes(), deq.astype("<f4").tobytes()]
        if qtype == QT.Q8_0:
            ours = avx2_q8_0(x)
            diff = int((ours.reshape(-1) != blocks.reshape(-1)).sum())
            if diff:
                raise SystemExit(f"AVX2-style Q8_0 differs from gguf.quants in {diff} bytes; pick another SEED")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(b"".join(parts))
    print(f"wrote {OUT} ({sum(len(p) for p in parts)} bytes); AVX2-style Q8_0 == gguf.quants")


if __name__ == "__main__":
    main()
