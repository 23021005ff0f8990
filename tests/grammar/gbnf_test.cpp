// GBNF parsing and acceptance: errors name line and column; grammars accept and reject strings
// byte for byte (UTF-8 classes, repetition bounds, recursion, llama.cpp's json.gbnf); tokens
// split anywhere, even inside a UTF-8 sequence, advance a matcher the same way.

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace inferscale::grammar {
namespace {

std::shared_ptr<const Grammar> parse(const std::string& text) {
    auto g = Grammar::from_gbnf(text);
    EXPECT_TRUE(g.ok()) << g.error().message;
    return g.ok() ? *g : nullptr;
}

std::string parse_error(const std::string& text) {
    auto g = Grammar::from_gbnf(text);
    EXPECT_FALSE(g.ok()) << text;
    return g.ok() ? "" : g.error().message;
}

TEST(GbnfTest, ErrorsNameLineAndColumn) {
    EXPECT_EQ(parse_error("root ::= \"abc"), "GBNF line 1, column 10: unterminated literal");
    EXPECT_EQ(parse_error("root ::= \"a\"\n  foo"), "GBNF line 2, column 3: undefined rule `foo`");
    EXPECT_EQ(parse_error("root ::= [z-a]"), "GBNF line 1, column 13: character range is reversed");
    EXPECT_EQ(parse_error("root ::= (\"a\" | \"b\"\n"), "GBNF line 2, column 1: expected `)`");
    EXPECT_EQ(parse_error("root ::= \"a\" )"), "GBNF line 1, column 14: unexpected `)`");
    EXPECT_EQ(parse_error("root ::= \"\\q\""), "GBNF line 1, column 11: unknown escape `\\q`");
    EXPECT_EQ(parse_error("root ::= \"a\"{3,2}"),
              "GBNF line 1, column 13: repetition {m,n} with n < m");
    EXPECT_EQ(parse_error("item ::= \"a\""),
              "GBNF line 1, column 1: the grammar has no `root` rule");
    EXPECT_EQ(parse_error("root ::= \"a\"\nroot ::= \"b\""),
              "GBNF line 2, column 1: rule `root` is defined twice");
    EXPECT_EQ(parse_error("root ::= x \"a\"\nx ::= root \"b\" | \"c\""),
              "grammar rule `root` is left-recursive");
}

// Stacked repetitions double the rule per operator; building one took minutes, clearing a
// million-state table per state and then determinizing sets of thousands of states (a fuzzer's
// find). Now the epsilon removal and the subset construction give up early.
TEST(GbnfTest, StackedRepetitionsBuildQuickly) {
    const std::string ops(40, '+');
    EXPECT_EQ(parse_error("root ::= [a-z\\u15e9\\U0001F600] " + ops),
              "grammar rule `root` is too large");
    auto small = Grammar::from_gbnf("root ::= \"a\"+++ \"b\"**");
    ASSERT_TRUE(small.ok()) << small.error().message;
    EXPECT_TRUE((*small)->accepts("aaab"));
    EXPECT_FALSE((*small)->accepts("b"));
}

// A fuzzer's 108-byte grammar: a class then 28 stacked `+` (the rest is a comment). It built a
// million states before being refused (seconds under ASan); the sizes are now counted first.
TEST(GbnfTest, StackedRepetitionsAreRefusedBeforeBuilding) {
    const std::string text(
        "root ::= [2)\x00\x00\x00\x61'rray\x0a\x00\x00\x00+\x00\x00\x00\x62-d]?++"
        "++++++++++++++++++++++++++#+++++++)*"
        " +++++++++++++\xd2\xd4++++++++++] ) {0,3}\x0a",
        108);
    EXPECT_EQ(parse_error(text), "grammar rule `root` is too large");
}

// Rules that each call the previous one twice: sizing them for inlining took time exponential in
// their number, and rules each under the limit may not add up past it.
TEST(GbnfTest, GrammarSizeIsCountedOnce) {
    std::string chain = "root ::= r40\nr0 ::= \"a\"\n";
    for (int i = 1; i <= 40; ++i) {
        chain += "r" + std::to_string(i) + " ::= r" + std::to_string(i - 1) + " r" +
                 std::to_string(i - 1) + "\n";
    }
    auto g = parse(chain);
    ASSERT_NE(g, nullptr);
    EXPECT_FALSE(g->accepts("aa"));

    std::string wide = "root ::= w1 w2 w3 w4 w5 w6\n";
    for (int i = 1; i <= 6; ++i) wide += "w" + std::to_string(i) + " ::= [a-z]{0,100000}\n";
    EXPECT_EQ(parse_error(wide), "grammar is too large");
    EXPECT_NE(parse("root ::= w\nw ::= [a-z]{0,100000}\n"), nullptr);
}

TEST(GbnfTest, LiteralsClassesAndRepetition) {
    auto g = parse("root ::= \"a\" [b-d]+ \"e\"?  # comment\n");
    EXPECT_TRUE(g->accepts("ab"));
    EXPECT_TRUE(g->accepts("abcdbe"));
    EXPECT_FALSE(g->accepts("a"));
    EXPECT_FALSE(g->accepts("ae"));
    EXPECT_FALSE(g->accepts("abx"));
    EXPECT_FALSE(g->accepts("abee"));

    auto digits = parse("root ::= [0-9]{2,3} x{2} y{1,}\nx ::= \"x\"\ny ::= \"y\"");
    EXPECT_TRUE(digits->accepts("12xxy"));
    EXPECT_TRUE(digits->accepts("123xxyyy"));
    EXPECT_FALSE(digits->accepts("1xxy"));
    EXPECT_FALSE(digits->accepts("1234xxy"));
    EXPECT_FALSE(digits->accepts("12xy"));
    EXPECT_FALSE(digits->accepts("12xx"));

    auto esc = parse(R"(root ::= "\x41\n\u00e9\"\\" [\]\-] [\x00-\x1F])");
    EXPECT_TRUE(esc->accepts("A\n\xC3\xA9\"\\]\x01"));
    EXPECT_TRUE(esc->accepts(std::string("A\n\xC3\xA9\"\\-\0", 8)));
    EXPECT_FALSE(esc->accepts("A\n\xC3\xA9\"\\] "));
}

TEST(GbnfTest, Utf8Classes) {
    auto greek = parse("root ::= [α-ω]+ \"é\"");
    EXPECT_TRUE(greek->accepts("αβγé"));
    EXPECT_FALSE(greek->accepts("aé"));
    EXPECT_FALSE(greek->accepts("\xCE\xB1\xCE"));  // a cut code point

    auto not_a = parse("root ::= [^a]");
    EXPECT_TRUE(not_a->accepts("b"));
    EXPECT_TRUE(not_a->accepts("é"));
    EXPECT_TRUE(not_a->accepts("€"));
    EXPECT_TRUE(not_a->accepts("😀"));
    EXPECT_FALSE(not_a->accepts("a"));
    EXPECT_FALSE(not_a->accepts("\xC3"));
    EXPECT_FALSE(not_a->accepts("\xFF"));
    EXPECT_FALSE(not_a->accepts("\xED\xA0\x80"));  // a surrogate is not UTF-8
    EXPECT_FALSE(not_a->accepts("bb"));

    auto any = parse("root ::= . .");
    EXPECT_TRUE(any->accepts("a😀"));
    EXPECT_TRUE(any->accepts("\n\xF4\x8F\xBF\xBF"));  // U+10FFFF
    EXPECT_FALSE(any->accepts("a"));
    EXPECT_FALSE(
        any->accepts("\xF4\x90\x80\x80"
                     "a"));  // above U+10FFFF
}

TEST(GbnfTest, RecursionAndEmpty) {
    auto parens = parse("root ::= (\"(\" root \")\")*");
    EXPECT_TRUE(parens->accepts(""));
    EXPECT_TRUE(parens->accepts("(())()"));
    EXPECT_FALSE(parens->accepts("(()"));
    EXPECT_FALSE(parens->accepts(")("));
    auto right = parse("root ::= \"a\" root | \"b\"");
    EXPECT_TRUE(right->accepts(std::string(5000, 'a') + "b"));
    EXPECT_FALSE(right->accepts(std::string(50, 'a')));
    auto nullable = parse("root ::= x* \"!\"\nx ::= \"\" | \"x\"");
    EXPECT_TRUE(nullable->accepts("xx!"));
    EXPECT_TRUE(nullable->accepts("!"));
}

// llama.cpp's grammars/json.gbnf, as the server documents it.
const char* kJsonGbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(GbnfTest, LlamaCppJsonGrammar) {
    auto g = parse(kJsonGbnf);
    EXPECT_TRUE(g->accepts(R"({"a": [1, 2.5e3, true, null], "b": {"c": "d\u00e9\n"}})"));
    EXPECT_TRUE(g->accepts("{\n  \"x\": \"é😀\"\n}"));
    EXPECT_TRUE(g->accepts("{}"));
    EXPECT_FALSE(g->accepts(R"({"a": })"));
    EXPECT_FALSE(g->accepts(R"({"a": "b\x"})"));
    EXPECT_FALSE(g->accepts("{\"a\": \"\x01\"}"));
    EXPECT_FALSE(g->accepts("[1]"));
}

// A vocabulary of the 256 single bytes plus the pieces of `text` cut at random points.
TEST(GbnfTest, TokensSplitAnywhere) {
    auto g = parse(kJsonGbnf);
    const std::string text = R"({"name": "Zoë 😀", "tags": ["a", "b"], "n": -12.5})";
    std::mt19937 rng(7);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::string> tokens;
        for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
        tokens.emplace_back("");  // the end token
        std::vector<std::int32_t> pieces;
        for (std::size_t pos = 0; pos < text.size();) {
            std::size_t len = 1 + rng() % 5;
            len = std::min(len, text.size() - pos);
            pieces.push_back(static_cast<std::int32_t>(tokens.size()));
            tokens.push_back(text.substr(pos, len));
            pos += len;
        }
        std::vector<bool> special(tokens.size(), false);
        auto vocab =
            std::make_shared<const Vocabulary>(tokens, special, std::vector<std::int32_t>{256});
        Matcher m(CompiledGrammar::compile(g, vocab));
        std::vector<std::uint32_t> mask(mask_words(vocab->size()));
        for (std::int32_t id : pieces) {
            m.fill_next_token_mask(mask);
            ASSERT_TRUE((mask[id / 32] >> (id % 32)) & 1) << vocab->token_bytes(id);
            ASSERT_TRUE(m.accept_token(id).ok()) << vocab->token_bytes(id);
            ASSERT_FALSE(m.finished());
        }
        EXPECT_TRUE(m.can_end());
        EXPECT_FALSE(m.accept_token('x').ok());
        EXPECT_TRUE(m.accept_token(256).ok());
        EXPECT_TRUE(m.finished());
    }
}

TEST(GbnfTest, MatcherFinishesWhenNothingCanFollow) {
    auto g = parse("root ::= \"ab\" | \"abc\"");
    std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc", ""};
    auto vocab = std::make_shared<const Vocabulary>(tokens, std::vector<bool>(6, false),
                                                    std::vector<std::int32_t>{5});
    Matcher m(CompiledGrammar::compile(g, vocab));
    std::vector<std::uint32_t> mask(1);
    m.fill_next_token_mask(mask);
    EXPECT_EQ(mask[0], 0b1001u);  // a, ab
    EXPECT_FALSE(m.accept_token(1).ok());
    ASSERT_TRUE(m.accept_token(3).ok());
    EXPECT_TRUE(m.can_end());
    EXPECT_FALSE(m.finished());
    m.fill_next_token_mask(mask);
    EXPECT_EQ(mask[0], 0b100100u);  // c, end
    ASSERT_TRUE(m.accept_token(2).ok());
    EXPECT_TRUE(m.finished());
    m.fill_next_token_mask(mask);
    EXPECT_EQ(mask[0], 0b100000u);
    m.reset();
    ASSERT_TRUE(m.accept_bytes("abc").ok());
    EXPECT_TRUE(m.finished());
}

}  // namespace
}  // namespace inferscale::grammar
