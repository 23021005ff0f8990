#include "apps/server/api_error.h"

#include <nlohmann/json.hpp>

namespace inferscale::server {

std::string ApiError::body() const {
    nlohmann::json e = {
        {"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (param) e["param"] = *param;
    if (code) e["code"] = *code;
    return nlohmann::json{{"error", e}}.dump();
}

ApiError bad_request(std::string message, std::optional<std::string> param) {
    return {400, std::move(message), "invalid_request_error", std::move(param), std::nullopt};
}

ApiError not_found(std::string message, std::string code) {
    return {404, std::move(message), "invalid_request_error", std::nullopt, std::move(code)};
}

ApiError from_error(const Error& error) {
    switch (error.kind) {
        case ErrorKind::InvalidArgument:
            return bad_request(error.message);
        case ErrorKind::NotFound:
            return not_found(error.message);
        case ErrorKind::Unavailable:
            return {503, error.message, "server_overloaded", std::nullopt, "overloaded"};
        case ErrorKind::Failed:
            break;
    }
    return {500, error.message, "server_error", std::nullopt, std::nullopt};
}

}  // namespace inferscale::server
