#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace inferscale::tokenizer {
namespace {

std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    std::string out;
    std::size_t pos = 0;
    for (std::size_t hit = s.find(from); hit != std::string::npos; hit = s.find(from, pos)) {
        out.append(s, pos, hit - pos);
        out.append(to);
        pos = hit + from.size();
    }
    out.append(s, pos, std::string::npos);
    return out;
}

int byte_token_value(const std::string& t) {
    if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; ++i) {
        const char c = t[static_cast<std::size_t>(i)];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens, bool raw_bytes) {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
        if (pending.empty()) return;
        std::string text = raw_bytes ? pending : sanitize_utf8(pending);
        if (text == pending) {
            out.push_back(std::move(text));
        } else {
            // HF: any invalid byte run becomes one U+FFFD per byte token.
            for (std::size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
        }
        pending.clear();
    };
    for (std::string& t : tokens) {
        const int v = byte_token_value(t);
        if (v >= 0) {
            pending.push_back(static_cast<char>(v));
        } else {
            flush();
            out.push_back(std::move(t));
        }
    }
    flush();
    return out;
}

std::string strip_chars(const std::string& t, const std::string& content, std::size_t start,
                        std::size_t stop) {
    std::size_t begin = 0, end = t.size();
    for (std::size_t i = 0; i < start && t.compare(begin, content.size(), content) == 0 &&
                            begin + content.size() <= end;
         ++i) {
        begin += content.size();
    }
    for (std::size_t i = 0; i < stop && end >= begin + content.size() &&
                            t.compare(end - content.size(), content.size(), content) == 0;
         ++i) {
        end -= content.size();
    }
    return t.substr(begin, end - begin);
}

// HF's WordPiece cleanup: the spaces BERT's split put before punctuation and contractions.
std::string wordpiece_cleanup(std::string t) {
    static const std::pair<std::string, std::string> kFixes[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
    };
    for (const auto& [from, to] : kFixes) t = replace_all(t, from, to);
    return t;
}

}  // namespace

std::string Decoder::decode(std::vector<std::string> tokens, bool raw_bytes) const {
    if (steps_.empty()) {
        std::string joined;
        for (std::size_t i = 0; i < tokens.size(); ++i) joined += (i ? " " : "") + tokens[i];
        return joined;
    }
    for (const DecoderStep& step : steps_) {
        switch (step.kind) {
            case DecoderStep::Kind::ByteLevel: {
                std::string bytes;
                for (const std::string& t : tokens) {
                    if (!byte_level_decode(t, &bytes)) bytes += t;
                }
                tokens.assign(1, raw_bytes ? std::move(bytes) : sanitize_utf8(bytes));
                break;
            }
            case DecoderStep::Kind::Metaspace:
                for (std::size_t i = 0; i < tokens.size(); ++i) {
                    std::string t = replace_all(tokens[i], step.a, " ");
                    if (i == 0 && step.prepend_scheme != PrependScheme::Never && !t.empty() &&
                        t[0] == ' ') {
                        t.erase(0, 1);
                    }
                    tokens[i] = std::move(t);
                }
                break;
            case DecoderStep::Kind::Replace:
                for (std::string& t : tokens) t = replace_all(t, step.a, step.b);
                break;
            case DecoderStep::Kind::ByteFallback:
                tokens = byte_fallback(std::move(tokens), raw_bytes);
                break;
            case DecoderStep::Kind::Fuse: {
                std::string joined;
                for (const std::string& t : tokens) joined += t;
                tokens.assign(1, std::move(joined));
                break;
            }
            case DecoderStep::Kind::Strip:
                for (std::string& t : tokens) t = strip_chars(t, step.a, step.start, step.stop);
                break;
            case DecoderStep::Kind::WordPiece:
                for (std::size_t i = 0; i < tokens.size(); ++i) {
                    std::string& t = tokens[i];
                    if (i > 0) t = t.starts_with(step.a) ? t.substr(step.a.size()) : " " + t;
                    if (step.cleanup) t = wordpiece_cleanup(std::move(t));
                }
                break;
        }
    }
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
}

}  // namespace inferscale::tokenizer
