#pragma once
// Bm25Index: Okapi BM25 over each user's facts, in memory, updated one fact at a time.
//
//   score(q, d) = sum over query terms t (repeats counted) of
//                 idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
//   idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))
//
// N, n(t) and avgdl are per user: one user's facts never change another user's scores. The idf
// is Lucene's (and Elasticsearch's) rather than Robertson's ln((N - n + 0.5) / (n + 0.5)): a
// user's memory is a small corpus in which the user's own name appears in most facts, and the
// classic idf goes negative there, ranking a fact that matches such a term below one that
// matches nothing. Defaults k1 = 1.2, b = 0.75 (Lucene, Elasticsearch, Robertson & Zaragoza).
// Terms come from lexical_terms(), with Porter stemming unless `stem` is off; facts and
// queries go through the same options, and the index is rebuilt from the stored facts' text at
// every start (FactIndexer), so no stored state predates the options. Only facts that share a
// term with the query are returned.

#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "retrieval/hit.h"

namespace inferscale::retrieval {

struct Bm25Params {
    double k1 = 1.2;
    double b = 0.75;
    bool stem = true;  // lexical_terms' option, for facts and queries alike
};

class Bm25Index {
  public:
    explicit Bm25Index(Bm25Params params = {});

    // Adds the fact, or replaces its text (and user) when the id is already indexed.
    void upsert(std::string_view user, FactId fact_id, std::string_view text);
    // Returns false when the id was not indexed.
    bool remove(FactId fact_id);
    // Drops every fact of `user`; returns how many there were.
    std::size_t remove_user(std::string_view user);

    std::size_t size() const;                       // facts over all users
    std::size_t size(std::string_view user) const;  // facts of one user

    // The at most k best facts of `user` for `query`, best first, ties by ascending fact id;
    // only facts sharing a term with the query. Safe to call concurrently with updates.
    std::vector<Hit> search(std::string_view user, std::string_view query, std::size_t k) const;

  private:
    // A user's facts live in dense slots so that a search scores into a flat array; postings
    // hold the slot and the term frequency, so scoring touches no hash table per posting.
    struct Posting {
        std::uint32_t slot;
        std::uint32_t tf;
    };
    struct Doc {
        FactId fact_id = 0;
        std::uint32_t length = 0;                     // terms, repeats counted
        std::vector<std::string> terms;               // distinct, to find its postings
    };
    struct UserIndex {
        std::vector<Doc> slots;                       // fact_id 0: a free slot
        std::vector<std::uint32_t> free_slots;
        std::unordered_map<FactId, std::uint32_t> slot_of;
        std::unordered_map<std::string, std::vector<Posting>> postings;  // term -> its facts
        std::size_t total_length = 0;
    };

    void remove_locked(FactId fact_id);

    Bm25Params params_;
    mutable std::shared_mutex mutex_;
    std::unordered_map<std::string, UserIndex> users_;
    std::unordered_map<FactId, std::string> owner_;  // fact id -> user
};

}  // namespace inferscale::retrieval
