// bm25_rank: ranks facts with the project's own Bm25Index, for retrieval evaluations that
// must measure the real index (tools/locomo_recall.py). Reads one JSON object on stdin,
//   {"stem": true, "k": 50,
//    "facts": [{"user": "u", "id": 1, "text": "..."}, ...],
//    "queries": [{"user": "u", "query": "..."}, ...]}
// (fact ids unique over all users)
// and prints one JSON list per query, on its own line: the ids of the top k facts, best first.

#include <nlohmann/json.hpp>

#include <iostream>
#include <set>
#include <string>

#include "retrieval/bm25_index.h"

int main() {
    using nlohmann::json;
    using inferscale::retrieval::Bm25Index;
    using inferscale::retrieval::Bm25Params;
    json input;
    try {
        input = json::parse(std::cin);
    } catch (const json::exception& e) {
        std::cerr << "bm25_rank: bad JSON on stdin: " << e.what() << "\n";
        return 2;
    }
    Bm25Index index(Bm25Params{.stem = input.value("stem", true)});
    std::set<std::int64_t> ids;
    for (const auto& fact : input.at("facts")) {
        const auto id = fact.at("id").get<std::int64_t>();
        // upsert() would replace the earlier fact: ids are unique over all users, as the store's.
        if (!ids.insert(id).second) {
            std::cerr << "bm25_rank: fact id " << id << " appears twice\n";
            return 2;
        }
        index.upsert(fact.at("user").get<std::string>(), id, fact.at("text").get<std::string>());
    }
    const auto k = input.value("k", std::size_t{50});
    for (const auto& query : input.at("queries")) {
        json ids = json::array();
        for (const auto& hit : index.search(query.at("user").get<std::string>(),
                                            query.at("query").get<std::string>(), k))
            ids.push_back(hit.fact_id);
        std::cout << ids.dump() << "\n";
    }
    return 0;
}
