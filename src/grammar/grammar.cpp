// Grammar: GBNF -> AST -> RuleSet; the JSON object grammar; whole-string acceptance.

#include "grammar/grammar.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/rule_set.h"
#include "grammar/stack_state.h"

namespace inferscale::grammar {

Grammar::Grammar(std::string gbnf, std::shared_ptr<const RuleSet> rules)
    : gbnf_(std::move(gbnf)), rules_(std::move(rules)) {}

Result<std::shared_ptr<const Grammar>> Grammar::from_gbnf(std::string_view text) {
    AstGrammar ast = IS_TRY(parse_gbnf(text));
    RuleSet rules = IS_TRY(build_rule_set(ast));
    return std::make_shared<const Grammar>(std::string(text),
                                           std::make_shared<const RuleSet>(std::move(rules)));
}

Result<std::shared_ptr<const Grammar>> Grammar::from_json_schema(const nlohmann::json& schema) {
    std::string gbnf = IS_TRY(json_schema_to_gbnf(schema, "root"));
    return from_gbnf(gbnf);
}

Result<std::shared_ptr<const Grammar>> Grammar::from_json_schema(
    const nlohmann::ordered_json& schema) {
    std::string gbnf = IS_TRY(json_schema_to_gbnf(schema, "root"));
    return from_gbnf(gbnf);
}

std::shared_ptr<const Grammar> Grammar::any_json_object() {
    static const std::shared_ptr<const Grammar> grammar = [] {
        auto g = from_gbnf(json_object_gbnf());
        IS_CHECK(g.ok()) << g.error().message;
        return std::move(g).value();
    }();
    return grammar;
}

bool Grammar::accepts(std::string_view bytes) const {
    StackState state(*rules_);
    return state.advance(bytes) && state.can_end();
}

}  // namespace inferscale::grammar
