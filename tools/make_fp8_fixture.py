#!/usr/bin/env python3
"""Writes tests/fixtures/fp8/e4m3.bin: PyTorch's float8_e4m3fn conversions, the golden data
for tensor::e4m3_to_f32 and f32_to_e4m3.

Layout (little-endian): u32 n; 256 f32 (byte b widened, b = 0..255; NaN for 0x7f and 0xff);
n f32 inputs; n u8 (each input narrowed). The inputs are every midpoint between neighbouring
finite values (ties, rounding to even), each nudged one float ulp either side, every finite
value itself, values beyond 448 (saturated), and log-uniform random values of both signs.

    pip install torch && python3 tools/make_fp8_fixture.py
"""
import pathlib
import struct

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/fixtures/fp8/e4m3.bin"


def main():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    widened = codes.view(torch.float8_e4m3fn).to(torch.float32).numpy()
    finite = np.sort(np.unique(widened[np.isfinite(widened) & (widened >= 0)]))
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    mids = mids.astype(np.float32)  # exact: neighbours differ by a power of two
    nudged = np.concatenate([np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1e9))])
    big = np.array([448.0, 449.0, 463.9, 464.0, 480.0, 1e4, 3.0e38], dtype=np.float32)
    rng = np.random.default_rng(7)
    random = np.exp2(rng.uniform(-14, 10, 4000)).astype(np.float32)
    positive = np.concatenate([mids, nudged, finite, big, random]).astype(np.float32)
    inputs = np.concatenate([positive, -positive]).astype(np.float32)
    narrowed = torch.from_numpy(inputs).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(struct.pack("<I", len(inputs)))
        f.write(widened.astype("<f4").tobytes())
        f.write(inputs.astype("<f4").tobytes())
        f.write(narrowed.astype(np.uint8).tobytes())
    print(f"wrote {OUT} ({len(inputs)} conversions)")


if __name__ == "__main__":
    main()
