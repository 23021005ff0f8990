#include "engine/memory_retrieval.h"

#include <optional>
#include <string>
#include <unordered_map>

#include "inject/memory_prompt.h"
#include "memory/context_window.h"

namespace inferscale::engine {
namespace {

// The fact's context tokens: each preceding turn as "speaker: text\n", tokenized on its own,
// concatenated oldest first, then cut from the front so that context + fact fit the model.
Result<std::vector<std::int32_t>> context_tokens(const LocalModel& lm,
                                                 const std::vector<memory::Turn>& turns,
                                                 const memory::TurnRef& source, int w,
                                                 std::size_t fact_tokens) {
    const auto context =
        IS_TRY(memory::select_context_turns(turns, source, static_cast<std::size_t>(w)));
    std::vector<std::vector<std::int32_t>> per_turn;
    std::vector<std::size_t> counts;
    for (const memory::Turn& turn : context) {
        const std::string text =
            inject::strip_whitespace(memory::format_turn_for_memory(turn)) + "\n";
        per_turn.push_back(
            lm.tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false));
        counts.push_back(per_turn.back().size());
    }
    const auto cut = IS_TRY(memory::plan_context_truncation(
        counts, fact_tokens, static_cast<std::size_t>(lm.max_context())));
    std::vector<std::int32_t> out;
    for (std::size_t i = cut.first_turn; i < per_turn.size(); ++i) {
        const std::size_t skip = i == cut.first_turn ? cut.first_turn_offset : 0;
        out.insert(out.end(), per_turn[i].begin() + static_cast<std::ptrdiff_t>(skip),
                   per_turn[i].end());
    }
    return out;
}

}  // namespace

Result<std::vector<MemoryFact>> memory_facts(const LocalModel& lm, memory::MemoryStore& store,
                                             std::string_view user,
                                             std::span<const memory::Fact> facts,
                                             int context_window) {
    if (context_window < 0)
        return make_error(ErrorKind::InvalidArgument, "context_window must be >= 0");
    std::optional<std::vector<memory::Turn>> turns;  // read once, only when a fact needs them
    std::vector<MemoryFact> out;
    for (const memory::Fact& fact : facts) {
        if (fact.user != user)
            return make_error("retrieval returned a fact of another user; refusing to serve it");
        MemoryFact m;
        m.id = std::to_string(fact.id);
        m.text = fact.text;
        m.window = context_window;
        if (context_window > 0 && fact.source) {
            if (!turns) turns = IS_TRY(store.list_turns(user));
            const auto fact_tokens = IS_TRY(inject::fact_token_ids(lm.tokenizer(), fact.text));
            m.context_tokens = IS_TRY(context_tokens(lm, *turns, *fact.source, context_window,
                                                     fact_tokens.size()));
        }
        out.push_back(std::move(m));
    }
    return out;
}

Result<std::vector<MemoryFact>> retrieve_memory_facts(const LocalModel& lm,
                                                      memory::MemoryStore& store,
                                                      const retrieval::FactRetriever& retriever,
                                                      std::string_view user,
                                                      std::string_view question,
                                                      const RetrievalOptions& options) {
    if (options.top_k < 0) return make_error(ErrorKind::InvalidArgument, "top_k must be >= 0");
    const std::vector<retrieval::Hit> hits = IS_TRY(
        retriever.search(user, question, static_cast<std::size_t>(options.top_k),
                         options.method.value_or(retriever.default_method())));
    std::vector<memory::FactId> ids;
    for (const retrieval::Hit& hit : hits) ids.push_back(hit.fact_id);
    const std::vector<memory::Fact> facts = IS_TRY(store.get_facts(ids));  // deleted ones skipped
    std::vector<MemoryFact> out =
        IS_TRY(memory_facts(lm, store, user, facts, options.context_window));
    std::unordered_map<std::string, double> scores;
    for (const retrieval::Hit& hit : hits) scores.emplace(std::to_string(hit.fact_id), hit.score);
    for (MemoryFact& f : out) f.score = scores.at(f.id);
    return out;
}

}  // namespace inferscale::engine
