#pragma once
// ApiError: an HTTP error answer in the OpenAI shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

#include <optional>
#include <string>

#include "base/result.h"

namespace inferscale::server {

struct ApiError {
    int status = 400;
    std::string message;
    std::string type = "invalid_request_error";
    std::optional<std::string> param;
    std::optional<std::string> code;

    std::string body() const;
};

ApiError bad_request(std::string message, std::optional<std::string> param = std::nullopt);
ApiError not_found(std::string message, std::string code = "not_found");
// The status an engine or store Error deserves, by its kind.
ApiError from_error(const Error& error);

}  // namespace inferscale::server
