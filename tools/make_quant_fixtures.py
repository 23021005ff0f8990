#!/usr/bin/env python3
"""Writes the block-format fixtures that tests/tensor and tests/backends hold our code to, with
the PyPI `gguf` package (gguf.quants) as the reference:

tests/fixtures/quant/quant_rows.bin: random f32 rows and their Q8_0, Q4_0 and Q4_1 blocks and
dequantizations.

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
so the C++ test can demand identical bytes.

tests/fixtures/quant/quant_types.bin: the other types we load. Layout (little-endian): i32 rows,
i32 cols (a multiple of 256), then
  f32  x[rows * cols]
  u8   q8_k[rows * cols / 256 * 292]    ggml's quantize_row_q8_K_ref of x (numpy below)
and for each of Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_NL, IQ4_XS, in that order:
  u8   blocks[rows * cols / block * type_size]
  f32  deq[rows * cols]                 gguf.quants.dequantize(blocks)
Q5_0 and Q5_1 blocks are gguf.quants.quantize(x); gguf.quants cannot quantize the K-quants or
the IQ4 types, so their blocks are random bytes with finite, moderate f16 scales (every bit
pattern of the quants, grid indices and packed sub-block scales is a valid block).

tests/fixtures/quant/quant_dots.bin: llama.cpp's own dot products of those blocks with the rows x,
from the ggml CPU library that llama-cpp-python ships, called through ctypes (quantize_row_q8_*
on x, then ggml_vec_dot_<type>_q8_*), once from the AVX-512 build (pip's native build on an
AVX-512 host) and once from the AVX2 build (tools/llama_cpp_avx2_peer.sh). Layout: i32 rows,
i32 cols, then for each type as above: f32 avx512[rows * rows], f32 avx2[rows * rows], entry
[t * rows + o] the dot of x row t with weight row o. Then the same two matrices once more for
IQ4_NL over the first cols - 32 columns only: an odd number of blocks, which ggml's AVX2 kernel
sums in pairs and finishes with one block on its own.

Usage: python3 tools/make_quant_fixtures.py  (needs the AVX2 peer built: llama_cpp_avx2_peer.sh
--build; each build runs in its own process, as the two libraries share their sonames)
"""
import ctypes
import os
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as QT
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "quant", "quant_rows.bin")
OUT_TYPES = os.path.join(ROOT, "tests", "fixtures", "quant", "quant_types.bin")
OUT_DOTS = os.path.join(ROOT, "tests", "fixtures", "quant", "quant_dots.bin")
# ggml's dot kernel and activation quantizer for each weight type.
GGML_DOT = {QT.Q5_0: ("ggml_vec_dot_q5_0_q8_0", "quantize_row_q8_0", 34, 32),
            QT.Q5_1: ("ggml_vec_dot_q5_1_q8_1", "quantize_row_q8_1", 36, 32),
            QT.Q4_K: ("ggml_vec_dot_q4_K_q8_K", "quantize_row_q8_K", 292, 256),
            QT.Q5_K: ("ggml_vec_dot_q5_K_q8_K", "quantize_row_q8_K", 292, 256),
            QT.Q6_K: ("ggml_vec_dot_q6_K_q8_K", "quantize_row_q8_K", 292, 256),
            QT.Q3_K: ("ggml_vec_dot_q3_K_q8_K", "quantize_row_q8_K", 292, 256),
            QT.Q2_K: ("ggml_vec_dot_q2_K_q8_K", "quantize_row_q8_K", 292, 256),
            QT.IQ4_NL: ("ggml_vec_dot_iq4_nl_q8_0", "quantize_row_q8_0", 34, 32),
            QT.IQ4_XS: ("ggml_vec_dot_iq4_xs_q8_K", "quantize_row_q8_K", 292, 256)}
# The type whose dots are also taken over an odd number of blocks (the last section of the dots).
ODD_BLOCKS_TYPE = QT.IQ4_NL
ROWS, COLS = 6, 128
TYPES_ROWS, TYPES_COLS = 4, 512
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


def q8_k(x: np.ndarray) -> np.ndarray:
    """ggml's quantize_row_q8_K_ref in numpy (f32 arithmetic throughout)."""
    out = []
    for blk in x.reshape(-1, 256).astype(np.float32):
        amax_i = int(np.argmax(np.abs(blk)))  # the first of equal magnitudes, as ggml's strict >
        top = blk[amax_i]
        if top == 0:
            d, q = np.float32(0), np.zeros(256, dtype=np.int8)
        else:
            iscale = np.float32(-127) / top
            q = np.minimum(np.rint((iscale * blk).astype(np.float32)), 127).astype(np.int8)
            d = np.float32(1) / iscale
        bsums = q.astype(np.int16).reshape(16, 16).sum(axis=1).astype("<i2")
        out.append(np.array([d], dtype="<f4").tobytes() + q.tobytes() + bsums.tobytes())
    return np.frombuffer(b"".join(out), dtype=np.uint8)


def random_f16(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    return rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)


def random_blocks(rng: np.random.Generator, qtype, n_blocks: int) -> np.ndarray:
    size = quants.GGML_QUANT_SIZES[qtype][1]
    blocks = rng.integers(0, 256, (n_blocks, size), dtype=np.uint8)
    if qtype in (QT.IQ4_NL, QT.IQ4_XS):
        blocks[:, 0:2] = random_f16(rng, n_blocks, -0.01, 0.01)  # d (the grid is signed)
    elif qtype == QT.Q6_K:
        blocks[:, 208:210] = random_f16(rng, n_blocks, -0.01, 0.01)  # d (scales are signed)
    elif qtype == QT.Q3_K:
        blocks[:, 108:110] = random_f16(rng, n_blocks, -0.01, 0.01)  # d
    elif qtype == QT.Q2_K:
        blocks[:, 80:82] = random_f16(rng, n_blocks, 1e-4, 4e-3)  # d
        blocks[:, 82:84] = random_f16(rng, n_blocks, 1e-4, 4e-3)  # dmin
    else:
        blocks[:, 0:2] = random_f16(rng, n_blocks, 1e-4, 4e-3)  # d
        blocks[:, 2:4] = random_f16(rng, n_blocks, 1e-4, 4e-3)  # dmin
    return blocks


def ggml_dots(lib_dir: str) -> bytes:
    """In this process: llama.cpp's dots of quant_types.bin's blocks with its rows x."""
    ctypes.CDLL(os.path.join(lib_dir, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    cpu = ctypes.CDLL(os.path.join(lib_dir, "libggml-cpu.so"), mode=ctypes.RTLD_GLOBAL)
    cpu.ggml_cpu_init()
    raw = open(OUT_TYPES, "rb").read()
    rows, cols = np.frombuffer(raw[:8], dtype="<i4")
    off = 8
    x = np.frombuffer(raw[off:off + 4 * rows * cols], dtype="<f4").reshape(rows, cols).copy()
    off += 4 * rows * cols + rows * cols // 256 * 292
    weights = {}
    for qtype in GGML_DOT:
        block, size = quants.GGML_QUANT_SIZES[qtype]
        nbytes = rows * cols // block * size
        weights[qtype] = np.frombuffer(raw[off:off + nbytes], dtype=np.uint8).reshape(rows, -1)
        off += nbytes + 4 * rows * cols
    out = [ggml_dot_matrix(cpu, qtype, x, w, cols) for qtype, w in weights.items()]
    out.append(ggml_dot_matrix(cpu, ODD_BLOCKS_TYPE, x, weights[ODD_BLOCKS_TYPE], cols - 32))
    return b"".join(out)


def ggml_dot_matrix(cpu, qtype, x: np.ndarray, w: np.ndarray, n: int) -> bytes:
    """ggml's dots of each row x[t, :n] with each weight row w[o] (its blocks over n columns)."""
    dot_name, quant_name, act_bytes, act_block = GGML_DOT[qtype]
    quantize, dot = getattr(cpu, quant_name), getattr(cpu, dot_name)
    quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    dot.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                    ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rows = x.shape[0]
    y = np.zeros((rows, w.shape[0]), dtype=np.float32)
    for t in range(rows):
        act = np.zeros(n // act_block * act_bytes, dtype=np.uint8)
        quantize(np.ascontiguousarray(x[t, :n]).ctypes.data, act.ctypes.data, n)
        for o in range(w.shape[0]):
            s = np.zeros(1, dtype=np.float32)
            dot(int(n), s.ctypes.data, 0, w[o].ctypes.data, 0, act.ctypes.data, 0, 1)
            y[t, o] = s[0]
    return y.astype("<f4").tobytes()


def write_dots() -> None:
    native = os.path.join(os.path.dirname(__import__("llama_cpp").__file__), "lib")
    peer = subprocess.run([os.path.join(ROOT, "tools", "llama_cpp_avx2_peer.sh")], check=True,
                          capture_output=True, text=True).stdout.strip()
    legs = []
    for lib_dir in (native, os.path.join(peer, "llama_cpp", "lib")):
        legs.append(subprocess.run([sys.executable, __file__, "--dots", lib_dir], check=True,
                                   capture_output=True).stdout)
    per_section = 4 * TYPES_ROWS * TYPES_ROWS
    parts = [np.array([TYPES_ROWS, TYPES_COLS], dtype="<i4").tobytes()]
    for i in range(len(legs[0]) // per_section):
        parts += [leg[i * per_section:(i + 1) * per_section] for leg in legs]
    with open(OUT_DOTS, "wb") as f:
        f.write(b"".join(parts))
    print(f"wrote {OUT_DOTS}; the AVX-512 and AVX2 builds agree: {legs[0] == legs[1]}")


def write_types(rng: np.random.Generator) -> None:
    x = rng.standard_normal((TYPES_ROWS, TYPES_COLS)).astype(np.float32)
    x[1] *= 0.01
    x[2, :256] *= 100.0
    x[3, 256:] = 0.0  # an all-zero super-block: d = 0
    x[3, 7] = -4.0    # a negative extreme sets the sign of iscale
    parts = [np.array([TYPES_ROWS, TYPES_COLS], dtype="<i4").tobytes(), x.astype("<f4").tobytes(),
             q8_k(x).tobytes()]
    for qtype in GGML_DOT:
        if qtype in (QT.Q5_0, QT.Q5_1):
            blocks = quants.quantize(x, qtype)
        else:
            n_blocks = x.size // quants.GGML_QUANT_SIZES[qtype][0]
            blocks = random_blocks(rng, qtype, n_blocks).reshape(TYPES_ROWS, -1)
        deq = quants.dequantize(blocks, qtype).reshape(x.shape).astype(np.float32)
        assert np.isfinite(deq).all()
        parts += [blocks.tobytes(), deq.astype("<f4").tobytes()]
    with open(OUT_TYPES, "wb") as f:
        f.write(b"".join(parts))
    print(f"wrote {OUT_TYPES} ({sum(len(p) for p in parts)} bytes)")


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
    write_types(rng)
    write_dots()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--dots":
        sys.stdout.buffer.write(ggml_dots(sys.argv[2]))
    else:
        main()
