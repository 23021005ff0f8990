// Matcher masks on SmolLM2's real vocabulary (49152 tokens, from the tokenizer fixture): at
// every step of random walks the fast mask (compiled tables + uncertain tokens) must equal a
// brute-force mask (every token's bytes tried on the current stacks), and walks that finish
// must produce JSON that parses and satisfies the schema.

#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "grammar/grammar.h"
#include "grammar/grammar_cache.h"
#include "schema_check.h"
#include "../tokenizer/fixture_util.h"
#include "tokenizer/tokenizer.h"

namespace inferscale::grammar {
namespace {

using nlohmann::json;

// What the engine does once per model (LocalModel::grammars): every token's bytes.
std::shared_ptr<const Vocabulary> smollm2_vocabulary() {
    static const std::shared_ptr<const Vocabulary> vocab = [] {
        auto tok = tokenizer::Tokenizer::from_vocab(tokenizer::testing::read_smollm2_vocab());
        IS_CHECK(tok.ok()) << tok.error().message;
        std::vector<std::string> bytes(tok->vocab_size());
        std::vector<bool> special(tok->vocab_size());
        std::vector<std::int32_t> ends;
        for (std::int32_t id = 0; id < tok->vocab_size(); ++id) {
            special[id] = tok->is_special(id);
            if (tok->is_end_of_generation(id)) ends.push_back(id);
            if (!special[id]) bytes[id] = tok->token_bytes(id);
        }
        return std::make_shared<const Vocabulary>(std::move(bytes), std::move(special), ends);
    }();
    return vocab;
}

bool bit(const std::vector<std::uint32_t>& mask, std::int32_t id) {
    return (mask[id / 32] >> (id % 32)) & 1;
}

// Fewer under AddressSanitizer, where each brute-force mask takes ~15x longer.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint32_t kBruteForceWalks = 2;
#else
constexpr std::uint32_t kBruteForceWalks = 6;
#endif

struct Walk {
    std::string text;
    bool finished = false;
};

// Samples allowed tokens until the matcher finishes or `cap` tokens; with `brute_force`, checks
// every mask. Without brute force, and with even seeds, it favours tokens that start with a
// closing character or a digit, so walks end; odd seeds sample uniformly (long strings, odd
// tokens).
Walk random_walk(const std::shared_ptr<const CompiledGrammar>& compiled, std::uint32_t seed,
                 int cap, bool brute_force) {
    const Vocabulary& vocab = compiled->vocabulary();
    Matcher m(compiled);
    std::mt19937 rng(seed);
    std::vector<std::uint32_t> mask(mask_words(vocab.size()));
    Walk walk;
    std::vector<std::int32_t> allowed;
    std::vector<std::int32_t> closing;
    for (int step = 0; step < cap && !m.finished(); ++step) {
        m.fill_next_token_mask(mask);
        allowed.clear();
        closing.clear();
        int mismatches = 0;
        for (std::int32_t id = 0; id < vocab.size(); ++id) {
            bool fast = bit(mask, id);
            if (brute_force) {
                bool slow = m.token_allowed_slow(id);
                if (fast != slow && ++mismatches <= 5) {
                    ADD_FAILURE() << "step " << step << " after `" << walk.text << "`: token " << id
                                  << " `" << vocab.token_bytes(id) << "` fast " << fast << " slow "
                                  << slow;
                }
            }
            if (!fast) continue;
            allowed.push_back(id);
            const std::string& b = vocab.token_bytes(id);
            if (vocab.is_end_token(id) ||
                (!b.empty() &&
                 std::string_view("\"}],0123456789").find(b[0]) != std::string_view::npos)) {
                closing.push_back(id);
            }
        }
        if (mismatches > 0) break;
        EXPECT_FALSE(allowed.empty()) << "dead end after `" << walk.text << "`";
        if (allowed.empty()) break;
        const bool favour_closing = seed % 2 == 0 || !brute_force;
        const auto& pool =
            (favour_closing && !closing.empty() && rng() % 10 < 6) ? closing : allowed;
        std::int32_t id = pool[rng() % pool.size()];
        Status s = m.accept_token(id);
        EXPECT_TRUE(s.ok()) << s.error().message;
        if (!vocab.is_end_token(id)) walk.text += vocab.token_bytes(id);
    }
    walk.finished = m.finished();
    return walk;
}

const char* kRichSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "kind": {"enum": ["cat", "dog", "bird", 7]},
    "age": {"type": "integer"},
    "score": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "owner": {
      "type": "object",
      "properties": {"first": {"type": "string"}, "vip": {"type": "boolean"},
                     "nick": {"type": ["string", "null"]}},
      "required": ["first"]
    },
    "loc": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": false,
            "minItems": 2}
  },
  "required": ["name", "kind", "owner"]
})";

const char* kTreeSchema = R"({
  "$defs": {"node": {"type": "object",
    "properties": {"v": {"anyOf": [{"type": "integer"}, {"const": "leaf"}]},
                   "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    "required": ["v"], "additionalProperties": false}},
  "$ref": "#/$defs/node"
})";

const char* kExtrasSchema = R"({
  "type": "object",
  "properties": {"id": {"type": "string", "minLength": 2, "maxLength": 5},
                 "when": {"type": "string", "format": "date-time"},
                 "code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}(x|yz)?$"},
                 "tail": {"type": "string", "pattern": "[0-9]$"},
                 "n": {"type": "array", "items": {"type": "integer"}, "minItems": 1}},
  "required": ["id", "code", "tail"],
  "additionalProperties": {"type": ["number", "boolean"]}
})";

// Long bounded strings: their positions share token sets once far enough from the bounds.
const char* kLongSchema = R"({
  "type": "array",
  "items": {"type": "string", "minLength": 90, "maxLength": 120},
  "minItems": 1, "maxItems": 2
})";

// llama.cpp's grammars/json.gbnf (as in gbnf_test.cpp).
const char* kLlamaJson = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

struct Case {
    std::string name;
    std::shared_ptr<const Grammar> grammar;
    json schema;  // null: only "parses as JSON" when is_json
    bool is_json = true;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    out.push_back({"json_object", Grammar::any_json_object(), json(), true});
    for (auto [name, text] : {std::pair{"rich", kRichSchema}, std::pair{"tree", kTreeSchema},
                              std::pair{"extras", kExtrasSchema}, std::pair{"long", kLongSchema}}) {
        nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
        json schema = json::parse(text);
        auto g = Grammar::from_json_schema(ordered);
        IS_CHECK(g.ok()) << g.error().message;
        out.push_back({name, *g, schema, true});
    }
    auto llama = Grammar::from_gbnf(kLlamaJson);
    IS_CHECK(llama.ok()) << llama.error().message;
    out.push_back({"llama_json", *llama, json(), true});
    auto utf8 = Grammar::from_gbnf(
        "root ::= \"« \" [à-ÿ]+ (\" \" [à-ÿ]+)* \" »\" | [0-9]{1,3} (\",\" [0-9]{3})*");
    IS_CHECK(utf8.ok()) << utf8.error().message;
    out.push_back({"utf8", *utf8, json(), false});
    auto list = Grammar::from_gbnf(
        "root ::= \"[\" item (\", \" item)* \"]\"\nitem ::= \"\\\"\" [a-z ]* \"\\\"\" | \"x\" "
        "item");
    IS_CHECK(list.ok()) << list.error().message;
    out.push_back({"list", *list, json(), false});
    return out;
}

TEST(MatcherTest, FastMaskEqualsBruteForce) {
    auto vocab = smollm2_vocabulary();
    ASSERT_EQ(vocab->size(), 49152);
    for (const Case& c : cases()) {
        SCOPED_TRACE(c.name);
        auto compiled = CompiledGrammar::compile(c.grammar, vocab);
        for (std::uint32_t seed = 0; seed < kBruteForceWalks; ++seed) {
            random_walk(compiled, seed, 60, true);
            if (HasFailure()) return;
        }
    }
}

TEST(MatcherTest, WalksProduceValidJson) {
    auto vocab = smollm2_vocabulary();
    for (const Case& c : cases()) {
        if (!c.is_json) continue;
        SCOPED_TRACE(c.name);
        auto compiled = CompiledGrammar::compile(c.grammar, vocab);
        int finished = 0;
        for (std::uint32_t seed = 100; seed < 140; ++seed) {
            Walk w = random_walk(compiled, seed, 400, false);
            if (!w.finished) continue;
            ++finished;
            EXPECT_TRUE(c.grammar->accepts(w.text)) << w.text;
            json doc = json::parse(w.text, nullptr, false);
            ASSERT_FALSE(doc.is_discarded()) << w.text;
            if (c.schema.is_null()) {
                EXPECT_TRUE(doc.is_object()) << w.text;
            } else {
                EXPECT_EQ(testing::schema_violation(doc, c.schema, c.schema), "") << w.text;
            }
        }
        EXPECT_GE(finished, 10) << "too few walks finished";
    }
}

TEST(MatcherTest, RejectedTokenLeavesStateUnchanged) {
    auto vocab = smollm2_vocabulary();
    auto compiled = CompiledGrammar::compile(Grammar::any_json_object(), vocab);
    Matcher m(compiled);
    std::vector<std::uint32_t> before(mask_words(vocab->size()));
    std::vector<std::uint32_t> after(before.size());
    ASSERT_TRUE(m.accept_bytes("{\"a\": [1").ok());
    m.fill_next_token_mask(before);
    EXPECT_FALSE(bit(before, vocab->end_tokens()[0]));
    for (std::int32_t id = 0; id < vocab->size(); ++id) {
        if (!bit(before, id)) {
            EXPECT_FALSE(m.accept_token(id).ok());
            break;
        }
    }
    EXPECT_FALSE(m.accept_bytes("}").ok());
    m.fill_next_token_mask(after);
    EXPECT_EQ(before, after);
    ASSERT_TRUE(m.accept_bytes("]}").ok());
    EXPECT_TRUE(m.can_end());
    EXPECT_TRUE(m.finished());
}

TEST(MatcherTest, CacheReusesCompiledGrammars) {
    GrammarCache cache(smollm2_vocabulary(), 2);
    json a = json::parse(R"({"type": "object", "properties": {"x": {"type": "integer"}}})");
    json b = json::parse(R"({"type": "array", "items": {"type": "boolean"}})");
    json c = json::parse(R"({"enum": ["p", "q"]})");
    auto first = cache.json_schema(a);
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(cache.json_schema(a)->get(), first->get());
    ASSERT_TRUE(cache.json_schema(b).ok());
    ASSERT_TRUE(cache.json_schema(c).ok());
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_NE(cache.json_schema(a)->get(), first->get());  // evicted, compiled again
    EXPECT_FALSE(cache.gbnf("root ::= nope").ok());
    EXPECT_EQ(cache.json_object().get(), cache.json_object().get());
}

}  // namespace
}  // namespace inferscale::grammar
