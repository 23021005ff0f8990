#include "inject/memory_prompt.h"

namespace inferscale::inject {
namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string strip_whitespace(std::string_view text) {
    std::size_t b = 0, e = text.size();
    while (b < e && is_space(text[b])) ++b;
    while (e > b && is_space(text[e - 1])) --e;
    return std::string(text.substr(b, e - b));
}

Result<MemoryScaffold> build_memory_scaffold(const tokenizer::Tokenizer& tok,
                                             const jinja::ChatTemplate* tmpl,
                                             std::int64_t block_size) {
    if (block_size < 1) return make_error("memory scaffold: block size must be >= 1");
    MemoryScaffold s;
    s.block_size = block_size;
    const std::string content = std::string(kMemorySystemPrompt) + std::string(kMemoryPlaceholder);
    std::string rendered;
    if (tmpl != nullptr) {
        const std::vector<jinja::ChatMessage> system = {{"system", content}};
        rendered = IS_TRY(tmpl->render(system, /*add_generation_prompt=*/false));
    } else {
        rendered = "SYSTEM: " + content + "\n";
    }
    const std::size_t at = rendered.find(kMemoryPlaceholder);
    if (at == std::string::npos)
        return make_error("memory scaffold: the chat template removed the memory placeholder");
    s.header_text = rendered.substr(0, at);
    s.footer_text = rendered.substr(at + kMemoryPlaceholder.size());

    // Template text: special tokens written in it are meant (BOS, turn markers).
    s.header = tok.encode(s.header_text, /*add_special=*/false, /*parse_special=*/true);
    const std::vector<std::int32_t> close =
        tok.encode(s.footer_text, /*add_special=*/false, /*parse_special=*/true);
    s.empty_memory = tok.encode(kEmptyMemoryText, false, false);
    const std::vector<std::int32_t> nl = tok.encode("\n", false, false);
    if (s.header.empty() || s.empty_memory.empty())
        return make_error("memory scaffold: the header or the empty-memory text has no tokens");
    if (nl.size() != 1) return make_error("memory scaffold: \"\\n\" is not a single token");
    // Padding with separate newline tokens (not text) survives templates that trim content
    // and BPE merges of whitespace runs.
    const auto pads =
        std::max<std::int64_t>(0, block_size - 1 - static_cast<std::int64_t>(close.size()));
    s.footer.assign(static_cast<std::size_t>(pads), nl[0]);
    s.footer.insert(s.footer.end(), close.begin(), close.end());
    if (static_cast<std::int64_t>(s.footer.size()) < block_size - 1)
        return make_error("memory scaffold: the footer is shorter than a block minus one");
    return s;
}

Result<std::vector<std::int32_t>> fact_token_ids(const tokenizer::Tokenizer& tok,
                                                 std::string_view text) {
    const std::string stripped = strip_whitespace(text);
    if (stripped.empty()) return make_error("memory fact: the text is empty");
    return tok.encode(stripped + "\n", /*add_special=*/false, /*parse_special=*/false);
}

std::vector<MemoryPiece> memory_pieces(const MemoryScaffold& scaffold,
                                       std::span<const std::vector<std::int32_t>> facts) {
    using Kind = MemoryPiece::Kind;
    std::vector<MemoryPiece> pieces{{Kind::Header, 0, scaffold.header}};
    if (facts.empty()) pieces.push_back({Kind::EmptyMemory, 0, scaffold.empty_memory});
    for (std::size_t i = 0; i < facts.size(); ++i) pieces.push_back({Kind::Fact, i, facts[i]});
    pieces.push_back({Kind::Footer, 0, scaffold.footer});
    return pieces;
}

std::vector<std::int32_t> memory_stream(const MemoryScaffold& scaffold,
                                        std::span<const std::vector<std::int32_t>> facts) {
    std::vector<std::int32_t> m;
    for (const MemoryPiece& piece : memory_pieces(scaffold, facts))
        m.insert(m.end(), piece.tokens.begin(), piece.tokens.end());
    return m;
}

Result<std::vector<std::int32_t>> query_token_ids(const tokenizer::Tokenizer& tok,
                                                  const jinja::ChatTemplate* tmpl,
                                                  std::string_view question,
                                                  std::optional<std::int32_t> memory_first) {
    return conversation_token_ids(tok, tmpl, {{"user", std::string(question)}}, memory_first);
}

Result<std::vector<std::int32_t>> conversation_token_ids(const tokenizer::Tokenizer& tok,
                                                         const jinja::ChatTemplate* tmpl,
                                                         std::vector<jinja::ChatMessage> messages,
                                                         std::optional<std::int32_t> memory_first) {
    for (auto it = messages.rbegin(); it != messages.rend(); ++it)
        if (it->role == "user") {
            it->content = std::string(kQueryPrefix) + it->content;
            break;
        }
    std::string rendered;
    if (tmpl != nullptr) {
        rendered = IS_TRY(tmpl->render(messages, /*add_generation_prompt=*/true));
    } else {
        for (const jinja::ChatMessage& m : messages)
            rendered += (m.role == "assistant" ? "ASSISTANT: "
                         : m.role == "system"  ? "SYSTEM: "
                                               : "USER: ") +
                        m.content + "\n";
        rendered += "ASSISTANT:";
    }
    std::vector<std::int32_t> q =
        tok.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
    const std::int32_t bos = tok.bos_id();
    if (bos >= 0 && memory_first && *memory_first == bos && !q.empty() && q.front() == bos)
        q.erase(q.begin());
    return q;
}

}  // namespace inferscale::inject
