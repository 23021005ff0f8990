#include "tokenizer/chat_template.h"

#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

bool contains(std::string_view s, std::string_view what) {
    return s.find(what) != std::string_view::npos;
}

// Text after `marker` up to the first quote, backslash or newline.
std::string literal_after(std::string_view source, std::string_view marker) {
    const std::size_t at = source.find(marker);
    if (at == std::string_view::npos) return {};
    const std::size_t begin = at + marker.size();
    const std::size_t end = source.find_first_of("\"'\\\n", begin);
    return std::string(source.substr(begin, end == std::string_view::npos ? end : end - begin));
}

// A ChatML default system prompt is a string literal "<|im_start|>system\n...<|im_end|>"; the
// newline may be written as the Jinja escape \n or as a raw newline.
std::string chatml_default_system(std::string_view source) {
    constexpr std::string_view kHeader = "<|im_start|>system";
    for (std::size_t at = source.find(kHeader); at != std::string_view::npos;
         at = source.find(kHeader, at + 1)) {
        std::size_t begin = at + kHeader.size();
        if (source.substr(begin, 2) == "\\n") {
            begin += 2;
        } else if (source.substr(begin, 1) == "\n") {
            begin += 1;
        } else {
            continue;
        }
        const std::size_t end = source.find("<|im_end|>", begin);
        if (end == std::string_view::npos) continue;
        const std::string_view text = source.substr(begin, end - begin);
        // `'...system\n' + messages[0]['content'] + '<|im_end|>'` is the non-default branch.
        if (text.empty() || text.find_first_of("'\"{}") != std::string_view::npos) continue;
        return std::string(text);
    }
    return {};
}

}  // namespace

ChatTemplate ChatTemplate::of_kind(Kind kind) {
    ChatTemplate t;
    t.kind_ = kind;
    t.llama_dated_preamble_ = kind == Kind::Llama3;
    return t;
}

Result<ChatTemplate> ChatTemplate::detect(std::string_view source) {
    ChatTemplate t;
    if (contains(source, "<|start_header_id|>")) {
        t.kind_ = Kind::Llama3;
        t.llama_dated_preamble_ = contains(source, "Cutting Knowledge Date");
        if (t.llama_dated_preamble_) {
            const std::string knowledge = literal_after(source, "Cutting Knowledge Date: ");
            if (!knowledge.empty()) t.knowledge_date_ = knowledge;
            const std::string today = literal_after(source, "set date_string = \"");
            if (!today.empty()) t.today_date_ = today;
        }
        return t;
    }
    if (contains(source, "[INST]")) {
        t.kind_ = Kind::Mistral;
        if (contains(source, "' [INST] '") || contains(source, "\" [INST] \"")) {
            t.inst_open_ = " [INST] ";
        } else if (contains(source, "[INST] '") || contains(source, "[INST] \"")) {
            t.inst_open_ = "[INST] ";
        } else {
            t.inst_open_ = "[INST]";
        }
        t.inst_close_ = contains(source, " [/INST]") ? " [/INST]" : "[/INST]";
        t.system_in_last_user_ = !contains(source, "loop.first and system_message");
        return t;
    }
    if (contains(source, "<|im_start|>")) {
        t.kind_ = Kind::ChatML;
        t.default_system_ = chatml_default_system(source);
        return t;
    }
    return make_error("unrecognised chat template (expected Llama 3, Mistral or ChatML)");
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool gen) const {
    switch (kind_) {
        case Kind::Llama3: return render_llama3(messages, gen);
        case Kind::Mistral: return render_mistral(messages);
        case Kind::ChatML: return render_chatml(messages, gen);
    }
    return {};
}

std::string ChatTemplate::render_llama3(const std::vector<ChatMessage>& messages, bool gen) const {
    auto block = [](std::string_view role, const std::string& text) {
        return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n" + text +
               "<|eot_id|>";
    };
    std::string out = "<|begin_of_text|>";
    std::size_t first = 0;
    if (llama_dated_preamble_) {
        std::string system;
        if (!messages.empty() && messages[0].role == "system") {
            system = python_strip(messages[0].content);
            first = 1;
        }
        out += block("system", "Cutting Knowledge Date: " + knowledge_date_ + "\nToday Date: " +
                                   today_date_ + "\n\n" + system);
    }
    for (std::size_t i = first; i < messages.size(); ++i) {
        out += block(messages[i].role, python_strip(messages[i].content));
    }
    if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return out;
}

std::string ChatTemplate::render_mistral(const std::vector<ChatMessage>& messages) const {
    std::size_t first = 0;
    const std::string* system = nullptr;
    if (!messages.empty() && messages[0].role == "system") {
        system = &messages[0].content;
        first = 1;
    }
    std::string out = "<s>";
    for (std::size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
            const bool with_system =
                system != nullptr && (system_in_last_user_ ? i + 1 == messages.size() : i == first);
            out += inst_open_;
            if (with_system) out += *system + "\n\n";
            out += m.content + inst_close_;
        } else if (m.role == "assistant") {
            out += ' ';
            out += python_strip(m.content);
            out += "</s>";
        }
    }
    return out;  // the template has no generation prompt: [/INST] already ends the turn
}

std::string ChatTemplate::render_chatml(const std::vector<ChatMessage>& messages, bool gen) const {
    std::string out;
    if (!default_system_.empty() && !messages.empty() && messages[0].role != "system") {
        out += "<|im_start|>system\n" + default_system_ + "<|im_end|>\n";
    }
    for (const ChatMessage& m : messages) {
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    if (gen) out += "<|im_start|>assistant\n";
    return out;
}

}  // namespace inferscale::tokenizer
