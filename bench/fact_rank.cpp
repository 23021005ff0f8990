// fact_rank: ranks facts with the project's own retrieval (retrieval::FactRetriever over
// Bm25Index and, for dense and hybrid, VectorIndex fed by the SentenceEncoder), for evaluations
// that must measure what the server runs (tools/locomo_recall.py). Reads one JSON object on stdin,
//   {"method": "bm25" | "dense" | "hybrid", "stem": true, "k": 50,
//    "facts": [{"user": "u", "id": 1, "text": "..."}, ...],
//    "queries": [{"user": "u", "query": "..."}, ...]}
// (fact ids unique over all users; "stem" is Bm25Index's option) and prints one JSON list per
// query, on its own line: the ids of the top k facts, best first.
//
//   fact_rank [--embedding-model DIR] [--device cpu|cuda] < request.json
// dense and hybrid need --embedding-model.

#include <nlohmann/json.hpp>

#include <cstring>
#include <iostream>
#include <set>
#include <string>

#include "embed/sentence_encoder.h"
#include "engine/backend_choice.h"
#include "retrieval/fact_retriever.h"
#include "retrieval/vector_index.h"

namespace {

using nlohmann::json;
using namespace inferscale;

int fail(const std::string& message) {
    std::cerr << "fact_rank: " << message << "\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_dir, device = "cpu";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--embedding-model") == 0)
            model_dir = argv[i + 1];
        else if (std::strcmp(argv[i], "--device") == 0)
            device = argv[i + 1];
        else
            return fail(std::string("unknown flag ") + argv[i]);
    }
    if (argc % 2 == 0) return fail("flags come in pairs: --embedding-model DIR, --device NAME");
    json input;
    try {
        input = json::parse(std::cin);
    } catch (const json::exception& e) {
        return fail(std::string("bad JSON on stdin: ") + e.what());
    }
    auto method = retrieval::parse_retrieval_method(input.value("method", std::string("bm25")));
    if (!method.ok()) return fail(method.error().message);
    const bool dense = *method != retrieval::RetrievalMethod::Bm25;
    if (dense && model_dir.empty()) return fail("dense and hybrid need --embedding-model DIR");

    std::unique_ptr<tensor::Backend> backend;
    std::unique_ptr<embed::SentenceEncoder> encoder;
    const auto embed = [&](std::span<const std::string> texts) { return encoder->embed(texts); };
    if (dense) {
        auto parsed = engine::parse_device(device);
        if (!parsed.ok()) return fail(parsed.error().message);
        auto opened = engine::open_backend({.device = *parsed});
        if (!opened.ok()) return fail(opened.error().message);
        backend = std::move(opened->backend);
        auto loaded = embed::SentenceEncoder::load(model_dir, *backend);
        if (!loaded.ok()) return fail(model_dir + ": " + loaded.error().message);
        encoder = std::move(loaded).value();
    }

    retrieval::Bm25Index lexical(retrieval::Bm25Params{.stem = input.value("stem", true)});
    retrieval::VectorIndex vectors(dense ? static_cast<std::size_t>(encoder->dim()) : 1);
    std::set<std::int64_t> ids;
    std::vector<std::string> users, texts;
    std::vector<std::int64_t> fact_ids;
    for (const auto& fact : input.at("facts")) {
        const auto id = fact.at("id").get<std::int64_t>();
        // An upsert would replace the earlier fact: ids are unique over all users, as the store's.
        if (!ids.insert(id).second) return fail("fact id " + std::to_string(id) + " appears twice");
        users.push_back(fact.at("user").get<std::string>());
        texts.push_back(fact.at("text").get<std::string>());
        fact_ids.push_back(id);
        lexical.upsert(users.back(), id, texts.back());
    }
    if (dense) {
        auto embedded = embed(texts);
        if (!embedded.ok()) return fail(embedded.error().message);
        const auto dim = vectors.dim();
        for (std::size_t i = 0; i < texts.size(); ++i)
            vectors.upsert(users[i], fact_ids[i],
                           std::span<const float>(embedded->data() + i * dim, dim));
    }
    const retrieval::FactRetriever retriever(
        lexical, dense ? retrieval::DenseRetrieval{&vectors, nullptr,
                                                   [&](std::string_view q) {
                                                       const std::string one(q);
                                                       return embed({&one, 1});
                                                   }}
                       : retrieval::DenseRetrieval{});
    const auto k = input.value("k", std::size_t{50});
    for (const auto& query : input.at("queries")) {
        auto hits = retriever.search(query.at("user").get<std::string>(),
                                     query.at("query").get<std::string>(), k, *method);
        if (!hits.ok()) return fail(hits.error().message);
        json out = json::array();
        for (const auto& hit : *hits) out.push_back(hit.fact_id);
        std::cout << out.dump() << "\n";
    }
    return 0;
}
