// embed_bench: the sentence encoder's time per sentence at batch sizes 1 and 32 (by default),
// on memory-store facts of typical length, on the CPU or CUDA backend. Prints one JSON object:
// {"device", "model", "tokens_per_sentence", "batches": [{"batch", "ms_per_sentence"}]}.
//   build/bin/embed_bench [--embedding-model DIR] [--device cpu|cuda] [--threads N]

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "embed/sentence_encoder.h"
#include "engine/backend_choice.h"

namespace {

using namespace inferscale;

// Facts of the kind a memory store holds (10-20 tokens each), made distinct per index.
std::vector<std::string> facts(std::size_t count) {
    static const char* const kFacts[] = {
        "Alice's dog is named Biscuit and loves long walks in the park.",
        "Bob is allergic to peanuts and shellfish.",
        "My sister lives in Lisbon and works as an architect.",
        "I started learning the piano in March 2023.",
        "The user prefers vegetarian restaurants with outdoor seating.",
        "Her favourite book is One Hundred Years of Solitude.",
        "We adopted two cats, Miso and Tofu, from the shelter.",
        "He runs a half marathon every October in Chicago.",
    };
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count; ++i)
        out.push_back(std::string(kFacts[i % 8]) + " (note " + std::to_string(i) + ")");
    return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"sentence encoder time per sentence"};
    std::string model_dir = "models/all-minilm-l6-v2", device_name = "cpu";
    int threads = 0, sentences = 256;
    std::vector<int> batches{1, 32};
    app.add_option("--embedding-model", model_dir, "sentence-transformers folder")
        ->capture_default_str();
    app.add_option("--device", device_name, "cpu or cuda")->capture_default_str();
    app.add_option("--threads", threads, "CPU threads (0: all cores)");
    app.add_option("--batch", batches, "texts per encode call")->capture_default_str();
    app.add_option("--sentences", sentences, "sentences timed per batch size")
        ->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    auto device = engine::parse_device(device_name);
    if (!device.ok()) return std::fprintf(stderr, "error: %s\n", device.error().message.c_str()), 1;
    engine::BackendChoice choice;
    choice.device = *device;
    choice.num_threads = threads;
    auto backend = engine::open_backend(choice);
    if (!backend.ok())
        return std::fprintf(stderr, "error: %s\n", backend.error().message.c_str()), 1;
    auto encoder = embed::SentenceEncoder::load(model_dir, *backend->backend);
    if (!encoder.ok())
        return std::fprintf(stderr, "error: %s\n", encoder.error().message.c_str()), 1;
    embed::SentenceEncoder& enc = **encoder;

    const std::vector<std::string> texts = facts(static_cast<std::size_t>(sentences));
    std::size_t tokens = 0;
    for (const std::string& t : texts) tokens += enc.tokenize(t).size();
    nlohmann::json report = {{"device", backend->description},
                             {"model", enc.id()},
                             {"tokens_per_sentence", double(tokens) / double(texts.size())},
                             {"batches", nlohmann::json::array()}};
    std::vector<float> out;
    for (int batch : batches) {
        if (batch <= 0) continue;
        const auto b = static_cast<std::size_t>(batch);
        out.resize(b * static_cast<std::size_t>(enc.dim()));
        // One untimed call: the workspace grows to this batch and the caches warm.
        if (!enc.encode(std::span(texts).first(std::min(b, texts.size())), out).ok()) return 1;
        std::size_t done = 0;
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t first = 0; first + b <= texts.size(); first += b) {
            if (!enc.encode(std::span(texts).subspan(first, b), out).ok()) return 1;
            done += b;
        }
        const double ms = 1e3 * seconds_since(start) / double(std::max<std::size_t>(done, 1));
        report["batches"].push_back({{"batch", batch}, {"ms_per_sentence", ms}});
    }
    std::printf("%s\n", report.dump(1).c_str());
    return 0;
}
