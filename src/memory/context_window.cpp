#include "memory/context_window.h"

#include <algorithm>
#include <numeric>

namespace inferscale::memory {

std::string format_turn_for_memory(const Turn& turn) {
    std::string out = turn.speaker + ": " + turn.text;
    std::string tag;
    if (!turn.image_query.empty() && !turn.image_caption.empty()) {
        tag = "[Sharing image - query: " + turn.image_query +
              ". The image shows: " + turn.image_caption + "]";
    } else if (!turn.image_query.empty()) {
        tag = "[Sharing image - query for: " + turn.image_query + "]";
    } else if (!turn.image_caption.empty()) {
        tag = "[Sharing image that shows: " + turn.image_caption + "]";
    }
    if (!tag.empty()) {
        if (!turn.text.empty()) out += ' ';
        out += tag;
    }
    return out;
}

Result<std::vector<Turn>> select_context_turns(const std::vector<Turn>& turns,
                                               const TurnRef& source, std::size_t w) {
    std::vector<const Turn*> order;
    order.reserve(turns.size());
    for (const Turn& turn : turns) order.push_back(&turn);
    // Stable, so equal keys (which a valid store never holds) keep the caller's order.
    std::stable_sort(order.begin(), order.end(), [](const Turn* a, const Turn* b) {
        return a->session_index != b->session_index ? a->session_index < b->session_index
                                                    : a->turn_index < b->turn_index;
    });
    auto at = std::find_if(order.begin(), order.end(),
                           [&](const Turn* t) { return t->ref() == source; });
    if (at == order.end())
        return make_error("source turn " + source.session_id + ":" +
                          std::to_string(source.turn_index) + " is not in the conversation");
    const auto available = static_cast<std::size_t>(at - order.begin());
    const std::size_t n = std::min(w, available);
    std::vector<Turn> context;
    context.reserve(n);
    for (auto it = at - static_cast<std::ptrdiff_t>(n); it != at; ++it) context.push_back(**it);
    return context;
}

Result<ContextTruncation> plan_context_truncation(std::span<const std::size_t> context_turn_tokens,
                                                  std::size_t target_tokens,
                                                  std::size_t max_tokens) {
    if (target_tokens == 0) return make_error("the fact encodes to no tokens");
    if (target_tokens > max_tokens)
        return make_error("the fact has " + std::to_string(target_tokens) +
                          " tokens, more than the limit of " + std::to_string(max_tokens));
    const std::size_t total =
        std::accumulate(context_turn_tokens.begin(), context_turn_tokens.end(), std::size_t{0});
    ContextTruncation plan;
    plan.kept_tokens = std::min(total, max_tokens - target_tokens);
    plan.dropped_tokens = total - plan.kept_tokens;
    // Walk whole turns off the front while tokens remain to drop; the rest land in one turn.
    std::size_t left = plan.dropped_tokens;
    std::size_t i = 0;
    while (i < context_turn_tokens.size() && left > 0 && left >= context_turn_tokens[i]) {
        left -= context_turn_tokens[i];
        ++i;
    }
    plan.first_turn = i;
    plan.first_turn_offset = left;
    return plan;
}

}  // namespace inferscale::memory
