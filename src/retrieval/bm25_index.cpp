#include "retrieval/bm25_index.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "base/check.h"
#include "retrieval/lexical_tokenizer.h"

namespace inferscale::retrieval {

Bm25Index::Bm25Index(Bm25Params params) : params_(params) {
    IS_CHECK(params_.k1 >= 0.0 && params_.b >= 0.0 && params_.b <= 1.0)
        << "k1 " << params_.k1 << " b " << params_.b;
}

void Bm25Index::upsert(std::string_view user, FactId fact_id, std::string_view text) {
    Doc doc;
    for (auto& term : lexical_terms(text, {.stem = params_.stem})) {
        ++doc.term_freq[std::move(term)];
        ++doc.length;
    }
    std::unique_lock lock(mutex_);
    remove_locked(fact_id);
    UserIndex& index = users_[std::string(user)];
    for (const auto& [term, tf] : doc.term_freq) index.postings[term][fact_id] = tf;
    index.total_length += doc.length;
    index.docs.emplace(fact_id, std::move(doc));
    owner_.emplace(fact_id, std::string(user));
}

bool Bm25Index::remove(FactId fact_id) {
    std::unique_lock lock(mutex_);
    if (!owner_.contains(fact_id)) return false;
    remove_locked(fact_id);
    return true;
}

void Bm25Index::remove_locked(FactId fact_id) {
    auto owner = owner_.find(fact_id);
    if (owner == owner_.end()) return;
    auto user_it = users_.find(owner->second);
    IS_CHECK(user_it != users_.end()) << "fact " << fact_id << " has no user index";
    UserIndex& index = user_it->second;
    auto doc_it = index.docs.find(fact_id);
    IS_CHECK(doc_it != index.docs.end()) << "fact " << fact_id;
    for (const auto& [term, tf] : doc_it->second.term_freq) {
        auto posting = index.postings.find(term);
        posting->second.erase(fact_id);
        if (posting->second.empty()) index.postings.erase(posting);
    }
    index.total_length -= doc_it->second.length;
    index.docs.erase(doc_it);
    if (index.docs.empty()) users_.erase(user_it);
    owner_.erase(owner);
}

std::size_t Bm25Index::remove_user(std::string_view user) {
    std::unique_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return 0;
    const std::size_t n = it->second.docs.size();
    for (const auto& [fact_id, doc] : it->second.docs) owner_.erase(fact_id);
    users_.erase(it);
    return n;
}

std::size_t Bm25Index::size() const {
    std::shared_lock lock(mutex_);
    return owner_.size();
}

std::size_t Bm25Index::size(std::string_view user) const {
    std::shared_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    return it == users_.end() ? 0 : it->second.docs.size();
}

std::vector<Hit> Bm25Index::search(std::string_view user, std::string_view query,
                                   std::size_t k) const {
    if (k == 0) return {};
    const std::vector<std::string> terms = lexical_terms(query, {.stem = params_.stem});
    std::shared_lock lock(mutex_);
    auto user_it = users_.find(std::string(user));
    if (user_it == users_.end()) return {};
    const UserIndex& index = user_it->second;
    const double n_docs = static_cast<double>(index.docs.size());
    const double avgdl = static_cast<double>(index.total_length) / n_docs;

    std::unordered_map<FactId, double> scores;
    // Query terms in query order, repeats counted, so sums match a term-at-a-time reference.
    for (const std::string& term : terms) {
        auto posting = index.postings.find(term);
        if (posting == index.postings.end()) continue;
        const double df = static_cast<double>(posting->second.size());
        const double idf = std::log(1.0 + (n_docs - df + 0.5) / (df + 0.5));
        for (const auto& [fact_id, tf_int] : posting->second) {
            const double tf = tf_int;
            // avgdl > 0 here: a posting implies a document with at least one term.
            const double length = static_cast<double>(index.docs.at(fact_id).length);
            const double norm = params_.k1 * (1.0 - params_.b + params_.b * length / avgdl);
            scores[fact_id] += idf * (tf * (params_.k1 + 1.0) / (tf + norm));
        }
    }
    lock.unlock();

    std::vector<Hit> hits;
    hits.reserve(scores.size());
    for (const auto& [fact_id, score] : scores) hits.push_back({fact_id, score});
    auto better = [](const Hit& a, const Hit& b) {
        return a.score != b.score ? a.score > b.score : a.fact_id < b.fact_id;
    };
    if (hits.size() > k) {
        std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(k), hits.end(),
                          better);
        hits.resize(k);
    } else {
        std::sort(hits.begin(), hits.end(), better);
    }
    return hits;
}

}  // namespace inferscale::retrieval
