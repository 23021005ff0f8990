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
    std::unordered_map<std::string, std::uint32_t> term_freq;
    std::uint32_t length = 0;
    for (auto& term : lexical_terms(text, {.stem = params_.stem})) {
        ++term_freq[std::move(term)];
        ++length;
    }
    std::unique_lock lock(mutex_);
    remove_locked(fact_id);
    UserIndex& index = users_[std::string(user)];
    std::uint32_t slot;
    if (index.free_slots.empty()) {
        slot = static_cast<std::uint32_t>(index.slots.size());
        index.slots.emplace_back();
    } else {
        slot = index.free_slots.back();
        index.free_slots.pop_back();
    }
    Doc& doc = index.slots[slot];
    doc.fact_id = fact_id;
    doc.length = length;
    doc.terms.reserve(term_freq.size());
    for (auto& [term, tf] : term_freq) {
        index.postings[term].push_back({slot, tf});
        doc.terms.push_back(term);
    }
    index.total_length += length;
    index.slot_of.emplace(fact_id, slot);
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
    auto slot_it = index.slot_of.find(fact_id);
    IS_CHECK(slot_it != index.slot_of.end()) << "fact " << fact_id;
    const std::uint32_t slot = slot_it->second;
    Doc& doc = index.slots[slot];
    for (const std::string& term : doc.terms) {
        auto posting = index.postings.find(term);
        std::vector<Posting>& list = posting->second;
        auto entry = std::find_if(list.begin(), list.end(),
                                  [slot](const Posting& p) { return p.slot == slot; });
        IS_CHECK(entry != list.end()) << "fact " << fact_id << " missing from '" << term << "'";
        *entry = list.back();
        list.pop_back();
        if (list.empty()) index.postings.erase(posting);
    }
    index.total_length -= doc.length;
    doc = Doc{};
    index.free_slots.push_back(slot);
    index.slot_of.erase(slot_it);
    if (index.slot_of.empty()) users_.erase(user_it);
    owner_.erase(owner);
}

std::size_t Bm25Index::remove_user(std::string_view user) {
    std::unique_lock lock(mutex_);
    auto it = users_.find(std::string(user));
    if (it == users_.end()) return 0;
    const std::size_t n = it->second.slot_of.size();
    for (const auto& [fact_id, slot] : it->second.slot_of) owner_.erase(fact_id);
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
    return it == users_.end() ? 0 : it->second.slot_of.size();
}

std::vector<Hit> Bm25Index::search(std::string_view user, std::string_view query,
                                   std::size_t k) const {
    if (k == 0) return {};
    const std::vector<std::string> terms = lexical_terms(query, {.stem = params_.stem});
    std::shared_lock lock(mutex_);
    auto user_it = users_.find(std::string(user));
    if (user_it == users_.end()) return {};
    const UserIndex& index = user_it->second;
    const double n_docs = static_cast<double>(index.slot_of.size());
    const double avgdl = static_cast<double>(index.total_length) / n_docs;

    // Every term's contribution is positive (idf > 0, tf >= 1), so a slot whose score is still
    // zero has not been seen yet.
    std::vector<double> scores(index.slots.size(), 0.0);
    std::vector<std::uint32_t> touched;
    // Query terms in query order, repeats counted, so sums match a term-at-a-time reference.
    for (const std::string& term : terms) {
        auto posting = index.postings.find(term);
        if (posting == index.postings.end()) continue;
        const double df = static_cast<double>(posting->second.size());
        const double idf = std::log(1.0 + (n_docs - df + 0.5) / (df + 0.5));
        for (const Posting& p : posting->second) {
            const double tf = p.tf;
            // avgdl > 0 here: a posting implies a document with at least one term.
            const double length = index.slots[p.slot].length;
            const double norm = params_.k1 * (1.0 - params_.b + params_.b * length / avgdl);
            if (scores[p.slot] == 0.0) touched.push_back(p.slot);
            scores[p.slot] += idf * (tf * (params_.k1 + 1.0) / (tf + norm));
        }
    }

    std::vector<Hit> hits;
    hits.reserve(touched.size());
    for (const std::uint32_t slot : touched) hits.push_back({index.slots[slot].fact_id, scores[slot]});
    lock.unlock();

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
