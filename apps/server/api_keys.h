#pragma once
// ApiKeys: who may call the server and whose memories each caller may touch. Loaded from a
// JSON file:
//   {"keys": [{"key": "sk-alice", "users": ["alice"]},
//             {"key": "sk-admin", "users": ["*"]}]}
// A key's users are its tenants: it can read, search, change and have injected only their
// memories. Without a key file the server is open (every caller may touch every user), as a
// local development server is.

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace inferscale::server {

struct ApiKey {
    std::string key;
    std::vector<std::string> users;  // "*" covers every user
    bool may_access(std::string_view user) const;
};

class ApiKeys {
  public:
    // No keys: the open server.
    ApiKeys() = default;
    // An Error when the file is unreadable, not JSON of the shape above, or repeats a key.
    static Result<ApiKeys> load(const std::string& path);

    bool open() const { return keys_.empty(); }
    // The caller of an `Authorization: Bearer <key>` header value; an Error (the 401 message)
    // when the header is missing or names no key. On an open server: a key covering everyone.
    Result<const ApiKey*> authenticate(std::string_view authorization_header) const;

  private:
    std::unordered_map<std::string, ApiKey> keys_;
    ApiKey everyone_{"", {"*"}};
};

}  // namespace inferscale::server
