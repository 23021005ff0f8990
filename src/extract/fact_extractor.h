#pragma once
// FactExtractor: new conversation messages -> the changes they make to a user's
// stored facts. Step 1 asks the model for candidate facts (and facts to
// forget); step 2 takes each candidate in turn with the stored facts most like
// it (as earlier decisions of the batch left them) and asks for one decision:
// ADD, UPDATE, DELETE or NONE. A candidate that nothing stored resembles is
// added without asking, and one that repeats a fact word for word is dropped.
// The changes come back merged per fact (a fact updated twice is one UPDATE
// with the last text; added then deleted is nothing), ready to be applied in
// one transaction.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "extract/extraction_prompts.h"
#include "extract/json_llm.h"

namespace inferscale::extract {

using FactId = std::int64_t;  // the store's fact id

struct StoredFact {
    FactId id = 0;
    std::string text;
};

// The stored facts most like `text`, best first, at most `k`, of the user being
// extracted for.
using SimilarFacts =
    std::function<Result<std::vector<StoredFact>>(std::string_view text, std::size_t k)>;

struct FactChange {
    Event event = Event::Add;  // Add, Update or Delete (never None)
    std::optional<FactId> id;  // Update, Delete: the stored fact
    std::string text;          // Add, Update: the new text
    std::string old_text;      // Update, Delete: the stored text
    bool operator==(const FactChange&) const = default;
};

struct ExtractorOptions {
    int max_facts = 8;          // candidates per call
    std::size_t similar_k = 5;  // stored facts shown per decision
    int candidate_max_tokens = 384;
    int decision_max_tokens = 160;
};

class FactExtractor {
  public:
    // `llm` must outlive the extractor.
    explicit FactExtractor(JsonLlm& llm, ExtractorOptions options = {})
        : llm_(llm), options_(options) {}

    // Step 1: {facts, forget}. Empty strings and repeats are dropped.
    struct Candidates {
        std::vector<std::string> facts;
        std::vector<std::string> forget;
    };
    Result<Candidates> candidates(const std::vector<ConversationMessage>& messages,
                                  const std::string& date);

    // Step 2 for every candidate, in order; then the merged changes.
    Result<std::vector<FactChange>> decide(const Candidates& candidates,
                                           const SimilarFacts& similar);

    // Both steps.
    Result<std::vector<FactChange>> extract(const std::vector<ConversationMessage>& messages,
                                            const std::string& date, const SimilarFacts& similar);

  private:
    JsonLlm& llm_;
    ExtractorOptions options_;
};

}  // namespace inferscale::extract
