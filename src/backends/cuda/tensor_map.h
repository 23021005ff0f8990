#pragma once
// Tensor maps (the TMA unit's view of a global matrix) of row-major bf16 weights, encoded
// through the driver's cuTensorMapEncodeTiled, which the runtime looks up once (no link
// against the driver library).

#include <cuda.h>

namespace inferscale::backends::cuda {

enum class BoxSwizzle { None, Bytes128 };

// A map of a row-major bf16 [rows, inner] matrix at `base` in boxes of box_rows x box_inner
// elements; rows past the end arrive as zeros. L2 fills 128 bytes of a row per request, or 256
// with promote_256. False when the driver refuses the shape.
bool encode_bf16_rows(CUtensorMap* map, const void* base, int inner, int rows, int box_inner,
                      int box_rows, BoxSwizzle swizzle, bool promote_256);

}  // namespace inferscale::backends::cuda
