#pragma once
// The weights one small-batch linear launch multiplies x by (linear_small.cu, linear_gemv.cu):
// up to kSmallLinearMaxTargets targets, each cut into units of a fixed number of weight rows
// that the kernels hand out in order, target after target, and where each output goes.

#include "backends/cuda/device_utils.cuh"
#include "backends/cuda/linear_small.h"

namespace inferscale::backends::cuda {

struct LinearTargets {
    int count = 0;
    bool y_f32 = false;
    const bf16* w[kSmallLinearMaxTargets];
    const void* bias[kSmallLinearMaxTargets];
    bool bias_f32[kSmallLinearMaxTargets];
    void* y[kSmallLinearMaxTargets];
    int out[kSmallLinearMaxTargets];
    int unit_end[kSmallLinearMaxTargets];  // running unit count, target by target

    // False when a weight is not 16-byte aligned or a target is empty or too large.
    bool set(std::span<const SmallLinearTarget> targets, bool f32_output) {
        count = static_cast<int>(targets.size());
        y_f32 = f32_output;
        for (int i = 0; i < count; ++i) {
            const SmallLinearTarget& t = targets[i];
            if (reinterpret_cast<std::uintptr_t>(t.w) % 16 != 0 || t.out < 1 || t.out > (1 << 24))
                return false;
            w[i] = static_cast<const bf16*>(t.w);
            bias[i] = t.bias;
            bias_f32[i] = t.bias_f32;
            y[i] = t.y;
            out[i] = static_cast<int>(t.out);
        }
        return true;
    }

    // Cuts every target into units of `rows` weight rows; returns the total.
    int cut(int rows) {
        int units = 0;
        for (int i = 0; i < count; ++i) {
            units += (out[i] + rows - 1) / rows;
            unit_end[i] = units;
        }
        return units;
    }

    // The target of `unit` and, through first_row, its first weight row (units of `rows`).
    __device__ __forceinline__ int find(int unit, int rows, int& first_row) const {
        int target = 0;
        while (unit >= unit_end[target]) ++target;
        first_row = (unit - (target > 0 ? unit_end[target - 1] : 0)) * rows;
        return target;
    }

    // v + bias[row] of `target`: what store writes, before rounding.
    __device__ __forceinline__ float with_bias(int target, int row, float v) const {
        if (bias[target] != nullptr) {
            v += bias_f32[target] ? static_cast<const float*>(bias[target])[row]
                                  : to_f32(static_cast<const bf16*>(bias[target])[row]);
        }
        return v;
    }

    // y[token, row] of `target` = v + bias[row].
    __device__ __forceinline__ void store(int target, int token, int row, float v) const {
        v = with_bias(target, row, v);
        const std::int64_t at = static_cast<std::int64_t>(token) * out[target] + row;
        if (y_f32) {
            static_cast<float*>(y[target])[at] = v;
        } else {
            static_cast<bf16*>(y[target])[at] = from_f32<bf16>(v);
        }
    }
};

}  // namespace inferscale::backends::cuda
