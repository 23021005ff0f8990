#include "apps/server/exchange_memory.h"

#include "apps/server/http_server.h"
#include "apps/server/memory_extraction.h"
#include "base/check.h"

namespace inferscale::server {

std::variant<std::unique_ptr<ExchangeMemory>, ApiError> ExchangeMemory::reserve(
    ServerContext& ctx, std::string user, std::string question) {
    IS_CHECK(ctx.extraction != nullptr) << "memory.store on a server without extraction";
    auto id = ctx.extraction->reserve(user);
    if (auto* error = std::get_if<ApiError>(&id)) return *error;
    return std::unique_ptr<ExchangeMemory>(
        new ExchangeMemory(ctx, std::get<std::uint64_t>(id), std::move(user), std::move(question)));
}

ExchangeMemory::~ExchangeMemory() {
    if (!done_)
        ctx_.extraction->fail_reserved(
            id_, "the chat answer did not complete (an error, or the client went away)");
}

void ExchangeMemory::store(const std::string& answer) {
    IS_CHECK(!done_) << "exchange " << id_ << " stored twice";
    done_ = true;
    const nlohmann::json messages = {{{"role", "user"}, {"content", question_}},
                                     {{"role", "assistant"}, {"content", answer}}};
    auto turns = store_turns(ctx_, user_, "api", messages);
    if (!turns.ok()) return ctx_.extraction->fail_reserved(id_, turns.error().message);
    ExtractRequest request{
        {user_, "", ""}, std::move(turns).value(), nlohmann::json::object(), true};
    ctx_.extraction->submit_reserved(id_, request);
}

}  // namespace inferscale::server
