// Template renders the snippets of tools/make_template_fixtures.py exactly as Jinja2 in
// transformers' environment does, and rejects what it does not support when parsed, naming
// the line.

#include "template/template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "template/json_value.h"

namespace inferscale::jinja {
namespace {

nlohmann::ordered_json expected_json() {
    const char* root = std::getenv("INFERSCALE_FIXTURES");
    std::ifstream in(std::string(root ? root : "tests/fixtures") + "/templates/expected.json");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return nlohmann::ordered_json::parse(buffer.str());
}

std::string parse_error(std::string_view source) {
    auto t = Template::parse(source);
    return t.ok() ? "" : t.error().message;
}

TEST(Template, SnippetsMatchJinja2) {
    const auto expected = expected_json();
    const Value context = from_json(expected.at("snippet_context"));
    int checked = 0;
    for (const auto& s : expected.at("snippets")) {
        const std::string source = s.at("source");
        SCOPED_TRACE(source);
        auto t = Template::parse(source);
        ASSERT_TRUE(t.ok()) << t.error().message;
        const auto out = t->render(context.as_dict());
        ASSERT_TRUE(out.ok()) << out.error().message;
        EXPECT_EQ(*out, s.at("rendered").get<std::string>());
        ++checked;
    }
    EXPECT_EQ(checked, 14);
}

TEST(Template, UnsupportedConstructsFailWhenParsed) {
    EXPECT_EQ(parse_error("a\n{{ x | bogus }}"), "line 2: unsupported filter 'bogus'");
    EXPECT_EQ(parse_error("{% if x is frobnicated %}{% endif %}"),
              "line 1: unsupported test 'frobnicated'");
    EXPECT_EQ(parse_error("\n\n{% include 'other.jinja' %}"),
              "line 3: unsupported statement 'include'");
    EXPECT_EQ(parse_error("{% for x in y %}\n{{ x }}"), "line 2: missing {% endfor %}");
    EXPECT_EQ(parse_error("{{ 'open }}"), "line 1: unclosed string literal");
    EXPECT_EQ(parse_error("{{ x + }}"), "line 1: expected an expression, got '}}'");
    EXPECT_EQ(parse_error("{{ 'a {}'.format(1) }}"), "line 1: unsupported method 'format'");
    EXPECT_EQ(parse_error("{% set c = cycler('a') %}\n{{ joiner(',') }}"),
              "line 1: unsupported function 'cycler'");
    EXPECT_TRUE(
        parse_error("{% macro m(f) %}{{ f() }}{% endmacro %}{{ m(raise_exception) }}").empty());
}

TEST(Template, RunawayTemplatesFail) {
    auto recursive = Template::parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}");
    ASSERT_TRUE(recursive.ok());
    const auto deep = recursive->render(ValueDict{});
    ASSERT_FALSE(deep.ok());
    EXPECT_EQ(deep.error().message, "line 1: macro calls nest deeper than 200");
    auto huge = Template::parse("{{ range(1000000)|length }}");
    ASSERT_TRUE(huge.ok());
    EXPECT_FALSE(huge->render(ValueDict{}).ok());
}

// Number literals out of 64-bit range: an integer is an error (it threw past the parser, a
// fuzzer's find); a float is inf or 0.0, as in Python.
TEST(Template, NumberLiteralsOutOfRange) {
    EXPECT_EQ(parse_error("a\n{{ 99999999999999999999 }}"),
              "line 2: integer literal 99999999999999999999 does not fit in 64 bits");
    auto t = Template::parse("{{ 1e999 > 10 }} {{ 1e-999 }}");
    ASSERT_TRUE(t.ok()) << t.error().message;
    const auto out = t->render(ValueDict{});
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, "True 0.0");
}

// Escapes that are not hex digits end the parse (they threw past it, a fuzzer's find).
TEST(Template, BadEscapesFailWhenParsed) {
    EXPECT_EQ(parse_error("{{ '\\xZZ' }}"), "line 1: truncated \\x escape in string literal");
    EXPECT_EQ(parse_error("{{ '\\u12' }}"), "line 1: truncated \\u escape in string literal");
    EXPECT_EQ(parse_error("{{ '\\U00110000' }}"),
              "line 1: illegal Unicode character in string literal");
}

std::string rendered(std::string_view source) {
    auto t = Template::parse(source);
    if (!t.ok()) return "parse: " + t.error().message;
    auto out = t->render(ValueDict{});
    return out.ok() ? *out : "render: " + out.error().message;
}

std::string repeated(std::string_view piece, int times) {
    std::string out;
    for (int i = 0; i < times; ++i) out += piece;
    return out;
}

// Nesting thousands deep (a fuzzer's find: 200 '[' overflowed the parser's stack) ends the
// parse with an error; the nesting real templates use still parses and renders.
TEST(Template, DeepNestingFailsWhenParsed) {
    const std::string message = "line 1: nested more than 256 levels deep";
    EXPECT_EQ(parse_error("{{ " + repeated("[", 5000) + repeated("]", 5000) + " }}"), message);
    EXPECT_EQ(parse_error("{{ " + repeated("(", 5000) + "1" + repeated(")", 5000) + " }}"),
              message);
    EXPECT_EQ(parse_error("{{ " + repeated("not ", 5000) + "x }}"), message);
    EXPECT_EQ(parse_error("{{ " + repeated("- ", 5000) + "1 }}"), message);
    EXPECT_EQ(parse_error(repeated("{% if x %}", 5000)), message);
    EXPECT_EQ(rendered(repeated("{% if true %}", 20) + "{{ " + repeated("(", 20) + "1 + 1" +
                       repeated(")", 20) + " }}" + repeated("{% endif %}", 20)),
              "2");
    EXPECT_EQ(rendered("{{ " + repeated("[", 20) + "7" + repeated("]", 20) + " | length }}"), "1");
}

// A number filter on another type fails the render (abs of a list threw past it, a fuzzer's
// find).
TEST(Template, NumberFiltersOnOtherTypesFail) {
    EXPECT_EQ(rendered("{{ [1] | abs }}"), "render: line 1: expected a number, got 'list'");
    EXPECT_EQ(rendered("{{ 'a' | round }}"), "render: line 1: expected a number, got 'str'");
}

// Arguments of the wrong type fail the render instead of terminating the process.
TEST(Template, ArgumentsOfOtherTypesFail) {
    EXPECT_EQ(rendered("{{ 'a b'.split(' ', 'x') }}"),
              "render: line 1: expected an integer, got 'str'");
    EXPECT_EQ(rendered("{{ 'aa'.replace('a', 'b', 1.5) }}"),
              "render: line 1: expected an integer, got 'float'");
    EXPECT_EQ(rendered("{{ 'a,b' | replace(',', ';', 'x') }}"),
              "render: line 1: expected an integer, got 'str'");
}

// Python's ints are unbounded; past 64 bits a render fails instead of wrapping (undefined
// behaviour) or looping for 2 ** 10**12 steps.
TEST(Template, IntegerOverflowFailsTheRender) {
    const std::pair<const char*, const char*> cases[] = {
        {"{{ 9223372036854775807 + 1 }}", "render: line 1: integer overflow in '+'"},
        {"{{ -9223372036854775807 - 2 }}", "render: line 1: integer overflow in '-'"},
        {"{{ 4294967296 * 4294967296 }}", "render: line 1: integer overflow in '*'"},
        {"{{ 3 ** 1000000000000 }}", "render: line 1: integer overflow in '**'"},
        {"{{ (-9223372036854775807 - 1) // -1 }}", "render: line 1: integer overflow in '//'"},
        {"{{ (-9223372036854775807 - 1) | abs }}", "render: line 1: integer overflow in abs"},
        {"{{ 1e300 | int }}", "render: line 1: cannot convert 1e+300 to a 64-bit int"},
        {"{{ 'ab' * 100000000 }}",
         "render: line 1: repetition is limited to 16777216 bytes or items"},
        {"{{ range(-9223372036854775807, 9223372036854775807) | length }}",
         "render: line 1: range() is limited to 100000 items"},
        {"{{ 2 ** 62 }} {{ 1 ** 1000000000000 }} {{ 7 % -1 }}", "4611686018427387904 1 0"},
        {"{{ range(5, 0, -9223372036854775807 - 1) | list }}", "[5]"},
        {"{{ [[7]] | join(',', attribute='99999999999999999999') }}|", "|"},
    };
    for (const auto& [source, expected] : cases) EXPECT_EQ(rendered(source), expected) << source;
}

// Filters over a string or a mapping iterate a list made for the loop; it was freed before the
// loop read it (a fuzzer's find, seen under AddressSanitizer).
TEST(Template, FiltersOverStringsAndMappingsKeepTheirItems) {
    EXPECT_EQ(rendered("{{ 'abc' | select | list }}"), "['a', 'b', 'c']");
    EXPECT_EQ(rendered("{{ {'k': 1, 'j': 2} | reject('equalto', 'k') | list }}"), "['j']");
    EXPECT_EQ(rendered("{{ 'ab' | map('upper') | join }}"), "AB");
    EXPECT_EQ(rendered("{{ 'ba' | unique | list }}"), "['b', 'a']");
}

TEST(Template, RenderErrorsNameTheLine) {
    auto t = Template::parse("ok\n{{ x.y.z }}");
    ASSERT_TRUE(t.ok());
    const auto out = t->render(ValueDict{});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error().message, "line 2: 'x' is undefined");
}

}  // namespace
}  // namespace inferscale::jinja
