#include "backends/cpu/ggml_isa.h"

#include <cstdlib>

#include "base/log.h"

namespace inferscale::backends::cpu {

std::string_view ggml_isa_name(GgmlIsa isa) { return isa == GgmlIsa::Avx512 ? "avx512" : "avx2"; }

std::optional<GgmlIsa> parse_ggml_isa(std::string_view name) {
    if (name == "avx2") return GgmlIsa::Avx2;
    if (name == "avx512") return GgmlIsa::Avx512;
    return std::nullopt;
}

GgmlIsa host_ggml_isa() {
    static const GgmlIsa isa = [] {
        const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
        const GgmlIsa detected = avx512 ? GgmlIsa::Avx512 : GgmlIsa::Avx2;
        const char* env = std::getenv("INFERSCALE_CPU_ISA");
        if (env == nullptr || *env == '\0') return detected;
        if (const auto chosen = parse_ggml_isa(env)) return *chosen;
        IS_LOG(Warn) << "INFERSCALE_CPU_ISA='" << env << "' is not avx2 or avx512; using "
                     << ggml_isa_name(detected);
        return detected;
    }();
    return isa;
}

}  // namespace inferscale::backends::cpu
