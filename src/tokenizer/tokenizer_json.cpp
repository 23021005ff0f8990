// Tokenizer::from_json: reads a Hugging Face tokenizer.json into a TokenizerModel. Only the
// pieces our model families use are accepted; anything else is an Error naming the type.

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer_model.h"
#include "tokenizer/wordpiece_model.h"

namespace inferscale::tokenizer {
namespace {

using nlohmann::json;

std::string type_of(const json& j) { return j.value("type", std::string()); }

// An integer field that fits T. nlohmann's get<T> also takes a float, and converting one out of
// T's range is undefined behaviour; from_json turns the exception into an Error.
template <class T>
T integer(const json& v, const char* what) {
    const bool fits = v.is_number_unsigned()
                          ? std::in_range<T>(v.get<std::uint64_t>())
                          : v.is_number_integer() && std::in_range<T>(v.get<std::int64_t>());
    if (!fits)
        throw std::out_of_range(std::string(what) + " must be an integer in range, got " +
                                v.dump());
    return v.is_number_unsigned() ? static_cast<T>(v.get<std::uint64_t>())
                                  : static_cast<T>(v.get<std::int64_t>());
}

template <class T>
T integer_or(const json& j, const char* key, T fallback) {
    return j.contains(key) ? integer<T>(j.at(key), key) : fallback;
}

// A "pattern" field: {"String": "..."} or {"Regex": "..."}.
Result<std::pair<std::string, bool>> read_pattern(const json& j) {
    if (j.contains("String")) return std::make_pair(j.at("String").get<std::string>(), false);
    if (j.contains("Regex")) return std::make_pair(j.at("Regex").get<std::string>(), true);
    return make_error("pattern must be String or Regex");
}

Result<PrependScheme> read_prepend_scheme(const json& j) {
    if (j.contains("prepend_scheme")) {
        const std::string s = j.at("prepend_scheme").get<std::string>();
        if (s == "always") return PrependScheme::Always;
        if (s == "first") return PrependScheme::First;
        if (s == "never") return PrependScheme::Never;
        return make_error("unknown prepend_scheme " + s);
    }
    // Older files: add_prefix_space true/false.
    return j.value("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
}

Status read_normalizer(const json& j, Normalizer& out) {
    if (j.is_null()) return {};
    const std::string type = type_of(j);
    NormalizerStep step;
    if (type == "Sequence") {
        for (const json& n : j.at("normalizers")) IS_RETURN_IF_ERROR(read_normalizer(n, out));
        return {};
    }
    if (type == "NFC") {
        step.kind = NormalizerStep::Kind::Nfc;
    } else if (type == "NFD") {
        step.kind = NormalizerStep::Kind::Nfd;
    } else if (type == "NFKC") {
        step.kind = NormalizerStep::Kind::Nfkc;
    } else if (type == "NFKD") {
        step.kind = NormalizerStep::Kind::Nfkd;
    } else if (type == "Lowercase") {
        step.kind = NormalizerStep::Kind::Lowercase;
    } else if (type == "Prepend") {
        step.kind = NormalizerStep::Kind::Prepend;
        step.a = j.at("prepend").get<std::string>();
    } else if (type == "Replace") {
        auto [pattern, is_regex] = IS_TRY(read_pattern(j.at("pattern")));
        if (is_regex) return make_error("Replace normalizer with a Regex pattern is not supported");
        step.kind = NormalizerStep::Kind::Replace;
        step.a = pattern;
        step.b = j.at("content").get<std::string>();
    } else if (type == "BertNormalizer") {
        step.kind = NormalizerStep::Kind::Bert;
        step.bert.clean_text = j.value("clean_text", true);
        step.bert.handle_chinese_chars = j.value("handle_chinese_chars", true);
        step.bert.lowercase = j.value("lowercase", true);
        // strip_accents null (the usual value) follows lowercase, as in HF.
        const json& strip_accents = j.value("strip_accents", json());
        step.bert.strip_accents =
            strip_accents.is_null() ? step.bert.lowercase : strip_accents.get<bool>();
    } else if (type == "Strip") {
        step.kind = NormalizerStep::Kind::Strip;
        step.left = j.value("strip_left", true);
        step.right = j.value("strip_right", true);
    } else {
        return make_error("unsupported normalizer type '" + type + "'");
    }
    out.add(std::move(step));
    return {};
}

Result<SplitBehavior> read_behavior(const std::string& s) {
    if (s == "Removed") return SplitBehavior::Removed;
    if (s == "Isolated") return SplitBehavior::Isolated;
    if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (s == "Contiguous") return SplitBehavior::Contiguous;
    return make_error("unknown split behavior " + s);
}

std::string escape_literal(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos)
            out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

Status read_pre_tokenizer(const json& j, PreTokenizer& out) {
    if (j.is_null()) return {};
    const std::string type = type_of(j);
    PreTokenizerStep step;
    if (type == "Sequence") {
        for (const json& p : j.at("pretokenizers")) IS_RETURN_IF_ERROR(read_pre_tokenizer(p, out));
        return {};
    }
    if (type == "Split") {
        auto [pattern, is_regex] = IS_TRY(read_pattern(j.at("pattern")));
        step.kind = PreTokenizerStep::Kind::Split;
        step.regex = IS_TRY(SplitRegex::compile(is_regex ? pattern : escape_literal(pattern)));
        step.behavior = IS_TRY(read_behavior(j.at("behavior").get<std::string>()));
        step.invert = j.value("invert", false);
    } else if (type == "Digits") {
        step.kind = PreTokenizerStep::Kind::Digits;
        step.individual_digits = j.value("individual_digits", false);
    } else if (type == "ByteLevel") {
        step.kind = PreTokenizerStep::Kind::ByteLevel;
        step.add_prefix_space = j.value("add_prefix_space", false);
        step.use_regex = j.value("use_regex", true);
        if (step.use_regex) step.regex = IS_TRY(SplitRegex::compile(kGpt2Pattern));
    } else if (type == "BertPreTokenizer") {
        step.kind = PreTokenizerStep::Kind::Bert;
    } else if (type == "Metaspace") {
        step.kind = PreTokenizerStep::Kind::Metaspace;
        step.replacement = j.value("replacement", std::string("\xE2\x96\x81"));
        step.prepend_scheme = IS_TRY(read_prepend_scheme(j));
        step.split = j.value("split", true);
    } else {
        return make_error("unsupported pre_tokenizer type '" + type + "'");
    }
    out.add(std::move(step));
    return {};
}

Status read_decoder(const json& j, Decoder& out) {
    if (j.is_null()) return {};
    const std::string type = type_of(j);
    DecoderStep step;
    if (type == "Sequence") {
        for (const json& d : j.at("decoders")) IS_RETURN_IF_ERROR(read_decoder(d, out));
        return {};
    }
    if (type == "ByteLevel") {
        step.kind = DecoderStep::Kind::ByteLevel;
    } else if (type == "Metaspace") {
        step.kind = DecoderStep::Kind::Metaspace;
        step.a = j.value("replacement", std::string("\xE2\x96\x81"));
        step.prepend_scheme = IS_TRY(read_prepend_scheme(j));
    } else if (type == "Replace") {
        auto [pattern, is_regex] = IS_TRY(read_pattern(j.at("pattern")));
        if (is_regex) return make_error("Replace decoder with a Regex pattern is not supported");
        step.kind = DecoderStep::Kind::Replace;
        step.a = pattern;
        step.b = j.at("content").get<std::string>();
    } else if (type == "ByteFallback") {
        step.kind = DecoderStep::Kind::ByteFallback;
    } else if (type == "Fuse") {
        step.kind = DecoderStep::Kind::Fuse;
    } else if (type == "WordPiece") {
        step.kind = DecoderStep::Kind::WordPiece;
        step.a = j.value("prefix", std::string("##"));
        step.cleanup = j.value("cleanup", true);
    } else if (type == "Strip") {
        step.kind = DecoderStep::Kind::Strip;
        step.a = j.at("content").get<std::string>();
        step.start = integer_or(j, "start", 0u);
        step.stop = integer_or(j, "stop", 0u);
    } else {
        return make_error("unsupported decoder type '" + type + "'");
    }
    out.add(std::move(step));
    return {};
}

// Reads the single-sequence template of a TemplateProcessing (possibly inside a Sequence).
Status read_post_processor(const json& j, TokenizerModel& m) {
    if (j.is_null()) return {};
    const std::string type = type_of(j);
    if (type == "Sequence") {
        for (const json& p : j.at("processors")) IS_RETURN_IF_ERROR(read_post_processor(p, m));
        return {};
    }
    if (type == "ByteLevel") return {};  // only adjusts offsets
    if (type == "BertProcessing") {      // [CLS] text [SEP], each given as [token, id]
        m.prefix_ids.push_back(integer<std::int32_t>(j.at("cls").at(1), "cls id"));
        m.suffix_ids.push_back(integer<std::int32_t>(j.at("sep").at(1), "sep id"));
        return {};
    }
    if (type != "TemplateProcessing") {
        return make_error("unsupported post_processor type '" + type + "'");
    }
    const json& specials = j.at("special_tokens");
    bool seen_sequence = false;
    for (const json& item : j.at("single")) {
        if (item.contains("Sequence")) {
            seen_sequence = true;
            continue;
        }
        const std::string name = item.at("SpecialToken").at("id").get<std::string>();
        if (!specials.contains(name)) return make_error("template token '" + name + "' has no ids");
        for (const json& id : specials.at(name).at("ids")) {
            (seen_sequence ? m.suffix_ids : m.prefix_ids)
                .push_back(integer<std::int32_t>(id, "special token id"));
        }
    }
    return {};
}

Result<std::vector<std::string>> read_vocab(const json& vocab) {
    std::vector<std::string> tokens(vocab.size());
    for (const auto& [text, id_json] : vocab.items()) {
        const auto id = integer<std::int64_t>(id_json, "vocab id");
        if (id < 0 || id > 10'000'000) return make_error("vocab id out of range: " + text);
        if (static_cast<std::size_t>(id) >= tokens.size())
            tokens.resize(static_cast<std::size_t>(id) + 1);
        tokens[static_cast<std::size_t>(id)] = text;
    }
    return tokens;
}

Status read_wordpiece(const json& j, TokenizerModel& m) {
    std::vector<std::string> tokens = IS_TRY(read_vocab(j.at("vocab")));
    const std::string unk = j.value("unk_token", std::string("[UNK]"));
    const auto unk_it = std::find(tokens.begin(), tokens.end(), unk);
    if (unk_it == tokens.end())
        return make_error("WordPiece unk_token '" + unk + "' is not in the vocab");
    const auto unk_id = static_cast<std::int32_t>(unk_it - tokens.begin());
    m.subword = std::make_unique<WordPieceModel>(
        std::move(tokens), unk_id, j.value("continuing_subword_prefix", std::string("##")),
        integer_or(j, "max_input_chars_per_word", std::size_t{100}));
    return {};
}

Status read_model(const json& j, TokenizerModel& m) {
    const std::string type = j.value("type", std::string("BPE"));
    if (type == "WordPiece") return read_wordpiece(j, m);
    if (type != "BPE") return make_error("unsupported model type '" + type + "'");
    if (!j.value("continuing_subword_prefix", json()).is_null() &&
        !j.at("continuing_subword_prefix").get<std::string>().empty()) {
        return make_error("BPE continuing_subword_prefix is not supported");
    }
    auto bpe =
        std::make_unique<BpeModel>(IS_TRY(read_vocab(j.at("vocab"))), BpeModel::Mode::MergeRanks);
    for (const json& merge : j.at("merges")) {
        if (merge.is_string()) {
            const std::string s = merge.get<std::string>();
            const std::size_t space = s.find(' ', 1);  // a merge side is never empty
            if (space == std::string::npos) return make_error("bad merge '" + s + "'");
            IS_RETURN_IF_ERROR(bpe->add_merge(s.substr(0, space), s.substr(space + 1)));
        } else if (merge.is_array() && merge.size() == 2) {
            IS_RETURN_IF_ERROR(
                bpe->add_merge(merge[0].get<std::string>(), merge[1].get<std::string>()));
        } else {
            return make_error("bad merge entry");
        }
    }
    const json& unk = j.value("unk_token", json());
    if (unk.is_string()) {
        if (auto id = bpe->token_to_id(unk.get<std::string>())) bpe->set_unk_id(*id);
    }
    bpe->set_byte_fallback(j.value("byte_fallback", false));
    bpe->set_fuse_unk(j.value("fuse_unk", false));
    bpe->set_ignore_merges(j.value("ignore_merges", false));
    m.subword = std::move(bpe);
    return {};
}

// "truncation": {"max_length", "direction", ...}; only cutting at the end is supported.
Status read_truncation(const json& j, TokenizerModel& m) {
    if (j.is_null()) return {};
    if (j.value("direction", std::string("Right")) != "Right") {
        return make_error("truncation direction '" + j.at("direction").get<std::string>() +
                          "' is not supported");
    }
    m.truncation = integer<std::size_t>(j.at("max_length"), "truncation max_length");
    return {};
}

Result<Tokenizer> parse(std::string_view text) {
    const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
        return make_error("tokenizer.json is not a JSON object");
    if (!j.contains("model")) return make_error("tokenizer.json has no model");
    auto m = std::make_shared<TokenizerModel>();
    IS_RETURN_IF_ERROR(read_model(j.at("model"), *m));
    IS_RETURN_IF_ERROR(read_normalizer(j.value("normalizer", json()), m->normalizer));
    IS_RETURN_IF_ERROR(read_pre_tokenizer(j.value("pre_tokenizer", json()), m->pre_tokenizer));
    IS_RETURN_IF_ERROR(read_decoder(j.value("decoder", json()), m->decoder));
    IS_RETURN_IF_ERROR(read_post_processor(j.value("post_processor", json()), *m));
    IS_RETURN_IF_ERROR(read_truncation(j.value("truncation", json()), *m));
    if (!m->prefix_ids.empty()) m->bos_id = m->prefix_ids.front();
    for (const json& t : j.value("added_tokens", json::array())) {
        AddedToken token;
        token.id = integer<std::int32_t>(t.at("id"), "added token id");
        token.content = t.at("content").get<std::string>();
        token.special = t.value("special", false);
        token.lstrip = t.value("lstrip", false);
        token.rstrip = t.value("rstrip", false);
        token.single_word = t.value("single_word", false);
        token.normalized = t.value("normalized", !token.special);
        m->added.add(std::move(token));
    }
    return make_tokenizer(std::move(m));
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text) {
    // nlohmann reports wrong field types by throwing; keep that inside this component.
    try {
        return parse(json_text);
    } catch (const std::exception& e) {
        return make_error(std::string("malformed tokenizer.json: ") + e.what());
    }
}

Result<Tokenizer> Tokenizer::from_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error("cannot open tokenizer file " + path);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    auto result = from_json(buffer.str());
    if (!result.ok()) return make_error(path + ": " + result.error().message);
    return result;
}

}  // namespace inferscale::tokenizer
