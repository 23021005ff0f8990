#pragma once
// Which of llama.cpp's x86 builds the CPU backend's ggml arithmetic reproduces. llama.cpp compiles
// ggml for the host it is built on, and its f32 kernels round differently per instruction set:
// AVX-512 (16-lane vectors, ggml_v_expf's AVX-512 variant) or AVX2 (8-lane vectors, its AVX2
// variant). Both are computed here with AVX2 instructions (or lane by lane without them), so
// either can be chosen on any x86-64 host.

#include <optional>
#include <string_view>

namespace inferscale::backends::cpu {

enum class GgmlIsa { Avx2, Avx512 };

std::string_view ggml_isa_name(GgmlIsa isa);

// "avx2" or "avx512"; nullopt for anything else.
std::optional<GgmlIsa> parse_ggml_isa(std::string_view name);

// The host's: AVX-512 where the CPU has AVX512F and AVX512DQ (what ggml's AVX-512 kernels
// require), else AVX2. The environment variable INFERSCALE_CPU_ISA=avx2|avx512 overrides the
// detection (e.g. to match a llama.cpp built without AVX-512 on an AVX-512 host); another value
// is reported once as a warning and ignored.
GgmlIsa host_ggml_isa();

}  // namespace inferscale::backends::cpu
