#include "retrieval/porter_stemmer.h"

#include <algorithm>
#include <array>
#include <initializer_list>

namespace inferscale::retrieval {
namespace {

// A consonant-y is written 'Y' while the word is stemmed, so a vowel is one of "aeiouy".
bool is_vowel(char c) {
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

struct Rule {
    std::string_view suffix;
    std::string_view replacement;
};

class Stemmer {
  public:
    explicit Stemmer(std::string_view word) : w_(word) {
        for (std::size_t i = 0; i < w_.size(); ++i)
            if (w_[i] == 'y' && (i == 0 || is_vowel(w_[i - 1]))) w_[i] = 'Y';
        r1_ = region_after(0);
        r2_ = region_after(r1_);
    }

    std::string run() {
        step_1a();
        step_1b();
        step_1c();
        step_2();
        step_3();
        step_4();
        step_5();
        std::replace(w_.begin(), w_.end(), 'Y', 'y');
        return std::move(w_);
    }

  private:
    // The start of the region after the first vowel-then-non-vowel at or after `from`.
    std::size_t region_after(std::size_t from) const {
        std::size_t i = from;
        while (i < w_.size() && !is_vowel(w_[i])) ++i;
        while (i < w_.size() && is_vowel(w_[i])) ++i;
        return std::min(i + 1, w_.size());
    }

    bool ends_with(std::string_view suffix) const {
        return std::string_view(w_).ends_with(suffix);
    }
    std::size_t start_of(std::string_view suffix) const { return w_.size() - suffix.size(); }

    // The rule with the longest suffix that ends the word, or nullptr. Only that rule is tried:
    // when its condition fails, no shorter suffix gets a turn (Porter's "longest match").
    template <std::size_t N>
    const Rule* longest(const std::array<Rule, N>& rules) const {
        const Rule* best = nullptr;
        for (const Rule& rule : rules)
            if (ends_with(rule.suffix) && (!best || rule.suffix.size() > best->suffix.size()))
                best = &rule;
        return best;
    }

    void replace(const Rule& rule) {
        w_.resize(start_of(rule.suffix));
        w_.append(rule.replacement);
    }

    bool has_vowel_before(std::size_t end) const {
        return std::any_of(w_.begin(), w_.begin() + static_cast<std::ptrdiff_t>(end), is_vowel);
    }

    // *o: w_[0, end) ends consonant-vowel-consonant, the last consonant not w, x or Y.
    bool short_syllable_before(std::size_t end) const {
        if (end < 3) return false;
        const char last = w_[end - 1];
        return !is_vowel(last) && last != 'w' && last != 'x' && last != 'Y' &&
               is_vowel(w_[end - 2]) && !is_vowel(w_[end - 3]);
    }

    void step_1a() {
        static constexpr std::array<Rule, 4> kRules = {
            {{"sses", "ss"}, {"ies", "i"}, {"ss", "ss"}, {"s", ""}}};
        if (const Rule* rule = longest(kRules)) replace(*rule);
    }

    void step_1b() {
        static constexpr std::array<Rule, 3> kRules = {{{"eed", "ee"}, {"ed", ""}, {"ing", ""}}};
        const Rule* rule = longest(kRules);
        if (!rule) return;
        const std::size_t start = start_of(rule->suffix);
        if (rule->suffix == "eed") {
            if (start >= r1_) replace(*rule);
            return;
        }
        if (!has_vowel_before(start)) return;
        w_.resize(start);
        if (ends_with("at") || ends_with("bl") || ends_with("iz")) {
            w_.push_back('e');
            return;
        }
        static constexpr std::string_view kUndoubled = "bdfgmnprt";
        const std::size_t n = w_.size();
        if (n >= 2 && w_[n - 1] == w_[n - 2] &&
            kUndoubled.find(w_[n - 1]) != std::string_view::npos) {
            w_.pop_back();
        } else if (n == r1_ && short_syllable_before(n)) {
            w_.push_back('e');
        }
    }

    void step_1c() {
        if (w_.empty() || (w_.back() != 'y' && w_.back() != 'Y')) return;
        if (has_vowel_before(w_.size() - 1)) w_.back() = 'i';
    }

    void step_2() {
        static constexpr std::array<Rule, 20> kRules = {{
            {"ational", "ate"}, {"tional", "tion"}, {"enci", "ence"},   {"anci", "ance"},
            {"izer", "ize"},    {"abli", "able"},   {"alli", "al"},     {"entli", "ent"},
            {"eli", "e"},       {"ousli", "ous"},   {"ization", "ize"}, {"ation", "ate"},
            {"ator", "ate"},    {"alism", "al"},    {"iveness", "ive"}, {"fulness", "ful"},
            {"ousness", "ous"}, {"aliti", "al"},    {"iviti", "ive"},   {"biliti", "ble"},
        }};
        const Rule* rule = longest(kRules);
        if (rule && start_of(rule->suffix) >= r1_) replace(*rule);
    }

    void step_3() {
        static constexpr std::array<Rule, 7> kRules = {{
            {"icate", "ic"}, {"ative", ""}, {"alize", "al"}, {"iciti", "ic"},
            {"ical", "ic"},  {"ful", ""},   {"ness", ""},
        }};
        const Rule* rule = longest(kRules);
        if (rule && start_of(rule->suffix) >= r1_) replace(*rule);
    }

    void step_4() {
        static constexpr std::array<Rule, 19> kRules = {{
            {"al", ""},  {"ance", ""}, {"ence", ""}, {"er", ""},  {"ic", ""},  {"able", ""},
            {"ible", ""}, {"ant", ""}, {"ement", ""}, {"ment", ""}, {"ent", ""}, {"ion", ""},
            {"ou", ""},  {"ism", ""},  {"ate", ""},  {"iti", ""}, {"ous", ""}, {"ive", ""},
            {"ize", ""},
        }};
        const Rule* rule = longest(kRules);
        if (!rule) return;
        const std::size_t start = start_of(rule->suffix);
        if (start < r2_) return;
        if (rule->suffix == "ion" && (start == 0 || (w_[start - 1] != 's' && w_[start - 1] != 't')))
            return;
        replace(*rule);
    }

    void step_5() {
        // 5a: (m > 1) E -> ; (m = 1 and not *o) E -> .
        if (ends_with("e")) {
            const std::size_t start = w_.size() - 1;
            if (start >= r2_ || (start >= r1_ && !short_syllable_before(start))) w_.pop_back();
        }
        // 5b: (m > 1 and *d and *L) -> single letter.
        const std::size_t n = w_.size();
        if (n >= 2 && w_[n - 1] == 'l' && w_[n - 2] == 'l' && n - 1 >= r2_) w_.pop_back();
    }

    std::string w_;
    std::size_t r1_ = 0;
    std::size_t r2_ = 0;
};

}  // namespace

std::string porter_stem(std::string_view word) {
    const bool letters_only =
        std::all_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (!letters_only) return std::string(word);
    return Stemmer(word).run();
}

}  // namespace inferscale::retrieval
