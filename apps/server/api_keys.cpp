#include "apps/server/api_keys.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace inferscale::server {

bool ApiKey::may_access(std::string_view user) const {
    return std::any_of(users.begin(), users.end(),
                       [&](const std::string& u) { return u == "*" || u == user; });
}

Result<ApiKeys> ApiKeys::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error("cannot read the API key file " + path);
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("keys") || !doc["keys"].is_array())
        return make_error(path + ": expected {\"keys\": [{\"key\": ..., \"users\": [...]}, ...]}");
    ApiKeys out;
    for (const nlohmann::json& k : doc["keys"]) {
        if (!k.is_object() || !k.contains("key") || !k["key"].is_string() ||
            k["key"].get<std::string>().empty() || !k.contains("users") || !k["users"].is_array())
            return make_error(path + ": every key needs a non-empty \"key\" and a \"users\" list");
        ApiKey key;
        key.key = k["key"].get<std::string>();
        for (const nlohmann::json& u : k["users"]) {
            if (!u.is_string()) return make_error(path + ": users must be strings");
            key.users.push_back(u.get<std::string>());
        }
        if (!out.keys_.emplace(key.key, key).second)
            return make_error(path + ": a key appears twice");
    }
    return out;
}

Result<const ApiKey*> ApiKeys::authenticate(std::string_view header) const {
    if (open()) return &everyone_;
    constexpr std::string_view kBearer = "Bearer ";
    if (header.substr(0, kBearer.size()) != kBearer)
        return make_error("missing API key: send it as 'Authorization: Bearer <key>'");
    auto it = keys_.find(std::string(header.substr(kBearer.size())));
    if (it == keys_.end()) return make_error("invalid API key");
    return &it->second;
}

}  // namespace inferscale::server
