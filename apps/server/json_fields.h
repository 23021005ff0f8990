#pragma once
// Reading request bodies: optional fields with their types checked, and the rule that a field
// the server does not implement is a 400 naming it, never ignored.

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"

namespace inferscale::server {

// Reads optional fields of a JSON object (null counts as absent), recording the first type
// error.
class Fields {
  public:
    explicit Fields(const nlohmann::json& obj) : obj_(obj) {}

    const nlohmann::json* get(const char* name) const {
        auto it = obj_.find(name);
        return it == obj_.end() || it->is_null() ? nullptr : &*it;
    }
    template <class T>
    void read(const char* name, T& out, const char* type_name,
              bool (nlohmann::json::*check)() const noexcept) {
        const nlohmann::json* v = get(name);
        if (!v || error) return;
        if (!((*v).*check)()) {
            error = bad_request(std::string("'") + name + "' must be " + type_name, name);
            return;
        }
        out = v->get<T>();
    }
    std::optional<ApiError> error;

  private:
    const nlohmann::json& obj_;
};

// A 400 naming the first non-null field of `obj` outside `known` (`prefix` goes before the
// name: "stream_options." for a nested object).
std::optional<ApiError> unsupported_field(const nlohmann::json& obj,
                                          std::initializer_list<std::string_view> known,
                                          std::string_view prefix = "");

// The JSON object a request body holds, or a 400 saying why it is not one.
std::optional<ApiError> parse_object(std::string_view body, nlohmann::json& out);

// The body again with its keys in the order sent (nlohmann::json sorts them), for what must keep
// it: tools and schemas, whose properties the model sees in order. Parsed on first use, once
// per request, after parse_object accepted the body.
class OrderedBody {
  public:
    explicit OrderedBody(std::string_view body) : body_(body) {}
    const nlohmann::ordered_json& get() {
        if (!doc_) doc_ = nlohmann::ordered_json::parse(body_);
        return *doc_;
    }

  private:
    std::string_view body_;
    std::optional<nlohmann::ordered_json> doc_;
};

}  // namespace inferscale::server
