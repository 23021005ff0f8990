#include "apps/server/json_fields.h"

#include <algorithm>

namespace inferscale::server {

std::optional<ApiError> unsupported_field(const nlohmann::json& obj,
                                          std::initializer_list<std::string_view> known,
                                          std::string_view prefix) {
    for (const auto& [name, value] : obj.items()) {
        if (value.is_null() || std::find(known.begin(), known.end(), name) != known.end())
            continue;
        const std::string param = std::string(prefix) + name;
        return bad_request("'" + param + "' is not supported by this server", param);
    }
    return std::nullopt;
}

std::optional<ApiError> parse_object(std::string_view body, nlohmann::json& out) {
    out = nlohmann::json::parse(body, nullptr, false);
    if (out.is_discarded()) return bad_request("the request body is not valid JSON");
    if (!out.is_object()) return bad_request("the request body must be a JSON object");
    return std::nullopt;
}

}  // namespace inferscale::server
