// JSON schema -> grammar on the committed cases (tests/fixtures/grammar/schemas.json): each
// schema accepts its valid documents and rejects its invalid ones, or fails with the expected
// error naming the keyword and its JSON pointer. Plus json_object and composition by rule name.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "grammar/grammar.h"
#include "grammar/integer_range.h"

namespace inferscale::grammar {
namespace {

nlohmann::ordered_json read_cases() {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    std::ifstream in(std::string(root ? root : "tests/fixtures") + "/grammar/schemas.json");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return nlohmann::ordered_json::parse(buffer.str());
}

TEST(JsonSchemaTest, CommittedCases) {
    const nlohmann::ordered_json cases = read_cases();
    ASSERT_GE(cases.size(), 10u);
    for (const auto& c : cases) {
        SCOPED_TRACE(c.at("name").get<std::string>());
        auto g = Grammar::from_json_schema(c.at("schema"));
        if (c.contains("error")) {
            ASSERT_FALSE(g.ok());
            EXPECT_EQ(g.error().message, c.at("error").get<std::string>());
            EXPECT_EQ(g.error().kind, ErrorKind::InvalidArgument);
            continue;
        }
        ASSERT_TRUE(g.ok()) << g.error().message;
        for (const auto& doc : c.at("valid")) {
            EXPECT_TRUE((*g)->accepts(doc.get<std::string>())) << doc.get<std::string>() << "\n"
                                                               << (*g)->gbnf();
        }
        for (const auto& doc : c.at("invalid")) {
            EXPECT_FALSE((*g)->accepts(doc.get<std::string>())) << doc.get<std::string>();
        }
    }
}

// Every integer in a window, and zero-padded forms, against the range's definition.
TEST(JsonSchemaTest, IntegerRangesExactly) {
    using Bound = std::optional<std::int64_t>;
    const std::pair<Bound, Bound> ranges[] = {
        {0, 130},     {-10, 10},  {1000, std::nullopt},         {std::nullopt, -37}, {7, 7},
        {-999, -100}, {19, 2021}, {std::nullopt, std::nullopt}, {-5, std::nullopt},  {0, 0},
        {99, 100}};
    for (const auto& [lo, hi] : ranges) {
        std::string expr = integer_range_gbnf(lo, hi);
        SCOPED_TRACE(expr);
        auto g = Grammar::from_gbnf("root ::= " + expr);
        ASSERT_TRUE(g.ok()) << g.error().message;
        for (std::int64_t x = -2100; x <= 2100; ++x) {
            bool in = (!lo || x >= *lo) && (!hi || x <= *hi);
            ASSERT_EQ((*g)->accepts(std::to_string(x)), in) << x;
        }
        EXPECT_FALSE((*g)->accepts("007"));
        EXPECT_FALSE((*g)->accepts("-0"));
        EXPECT_FALSE((*g)->accepts(""));
        EXPECT_EQ((*g)->accepts("1234567890123456"), !hi || *hi >= 1234567890123456);
        EXPECT_FALSE((*g)->accepts("12345678901234567"));  // 17 digits
    }
}

TEST(JsonSchemaTest, AnyJsonObject) {
    auto g = Grammar::any_json_object();
    EXPECT_EQ(g.get(), Grammar::any_json_object().get());
    EXPECT_TRUE(g->accepts(R"({"a": [1, {"b": null}], "c": "d"})"));
    EXPECT_TRUE(g->accepts("{}"));
    EXPECT_FALSE(g->accepts("[]"));
    EXPECT_FALSE(g->accepts("\"s\""));
    EXPECT_FALSE(g->accepts(R"({"a" 1})"));
}

TEST(JsonSchemaTest, ComposesUnderARuleName) {
    nlohmann::json schema = {{"type", "object"},
                             {"properties", {{"city", {{"type", "string"}}}}},
                             {"required", {"city"}}};
    auto rules = json_schema_to_gbnf(schema, "call");
    ASSERT_TRUE(rules.ok()) << rules.error().message;
    EXPECT_EQ(rules->find("root"), std::string::npos);
    std::istringstream lines(*rules);
    for (std::string line; std::getline(lines, line);) {
        EXPECT_TRUE(line.rfind("call ::= ", 0) == 0 || line.rfind("call-", 0) == 0) << line;
    }
    auto g = Grammar::from_gbnf("root ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n" + *rules);
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_TRUE((*g)->accepts("<tool_call>\n{\"city\": \"Paris\"}\n</tool_call>"));
    EXPECT_FALSE((*g)->accepts("<tool_call>\n{}\n</tool_call>"));
    EXPECT_FALSE(json_schema_to_gbnf(schema, "bad name").ok());
}

}  // namespace
}  // namespace inferscale::grammar
