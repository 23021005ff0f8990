#include "template/template.h"

#include "template/error.h"
#include "template/parser.h"
#include "template/renderer.h"

namespace inferscale::jinja {
namespace {

Error located(const TemplateError& e) {
    return make_error(ErrorKind::InvalidArgument,
                      "line " + std::to_string(e.line) + ": " + e.message);
}

}  // namespace

Result<Template> Template::parse(std::string_view source) {
    try {
        Template t;
        t.body_ = std::make_shared<const Body>(jinja::parse(lex(source)));
        return t;
    } catch (const TemplateError& e) {
        return located(e);
    }
}

Result<std::string> Template::render(const ValueDict& context) const {
    try {
        std::string out;
        Renderer(context).render(*body_, out);
        return out;
    } catch (const TemplateError& e) {
        return located(e);
    }
}

}  // namespace inferscale::jinja
