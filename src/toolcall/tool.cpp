#include "toolcall/tool.h"

#include <random>

namespace inferscale::toolcall {

const char* format_name(Format format) {
    switch (format) {
        case Format::Hermes:
            return "hermes";
        case Format::Llama3:
            return "llama3";
        case Format::Mistral:
            return "mistral";
        case Format::Generic:
            return "generic";
    }
    return "generic";
}

std::string new_call_id() {
    static constexpr std::string_view kAlphabet =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::random_device device;
    std::mt19937_64 rng((static_cast<std::uint64_t>(device()) << 32) ^ device());
    std::uniform_int_distribution<std::size_t> pick(0, kAlphabet.size() - 1);
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
    return id;
}

}  // namespace inferscale::toolcall
