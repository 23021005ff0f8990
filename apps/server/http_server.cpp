#include "apps/server/http_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "apps/server/access_log.h"
#include "apps/server/worker_pool.h"

namespace inferscale::server {
namespace {

constexpr int kListenBacklog = 4096;

// SO_REUSEADDR, so a restart right after a stop binds while the old connections sit in
// TIME_WAIT; not cpp-httplib's default SO_REUSEPORT, with which a second server binds a port in
// use and the kernel shares the connections between the two.
void allow_address_reuse(int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace

void send_json(httplib::Response& res, const std::string& body, int status) {
    res.status = status;
    res.set_content(body, "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
    send_json(res, error.body(), error.status);
}

const ApiKey* authenticate(const ServerContext& ctx, const httplib::Request& req,
                           httplib::Response& res) {
    auto key = ctx.keys.authenticate(req.get_header_value("Authorization"));
    if (key.ok()) return *key;
    send_error(res, {401, key.error().message, "invalid_request_error", std::nullopt,
                     "invalid_api_key"});
    return nullptr;
}

HttpServer::HttpServer(ServerContext& context)
    : ctx_(context), http_(std::make_unique<httplib::Server>()) {
    if (const auto& tmpl = ctx_.engine.model().chat_template())
        ctx_.tool_template = toolcall::detect_template_tools(*tmpl);
    httplib::Server& http = *http_;
    const std::size_t threads = ctx_.options.threads;
    http.new_task_queue = [threads] { return new WorkerPool(threads); };
    http.set_socket_options([this](socket_t sock) {
        allow_address_reuse(sock);
        listen_fd_ = sock;
    });
    http.set_payload_max_length(ctx_.options.max_body_bytes);
    http.set_keep_alive_max_count(1000);
    http.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
        begin_access_record();
        return httplib::Server::HandlerResponse::Unhandled;
    });
    http.set_logger(write_access_line);

    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_completion(req, res, true);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
        handle_completion(req, res, false);
    });
    http.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authenticate(ctx_, req, res)) return;
        auto data = nlohmann::json::array({model_object(ctx_.options.model_name)});
        if (ctx_.embeddings) data.push_back(model_object(ctx_.embeddings->id()));
        send_json(res, nlohmann::json{{"object", "list"}, {"data", std::move(data)}}.dump());
    });
    // Model ids may hold slashes ("org/name").
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
        if (!authenticate(ctx_, req, res)) return;
        const std::string id = req.matches[1];
        const bool embedding = ctx_.embeddings && id == ctx_.embeddings->id();
        if (id != ctx_.options.model_name && !embedding)
            return send_error(res, not_found("the model '" + id + "' does not exist",
                                             "model_not_found"));
        send_json(res, model_object(id).dump());
    });
    http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
        send_json(res, R"({"status":"ok"})");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        std::optional<engine::EngineStats> extraction;
        if (ctx_.extraction_engine) extraction = ctx_.extraction_engine->stats();
        res.set_content(ctx_.metrics.render(ctx_.engine.stats(), ctx_.options.model_name,
                                            extraction ? &*extraction : nullptr),
                        "text/plain; version=0.0.4");
    });
    add_tokenize_routes(http, ctx_);
    add_web_page_routes(http);
    if (ctx_.store) {
        add_memory_routes(http, ctx_);
        add_mem0_routes(http, ctx_);
    }
    if (ctx_.embeddings) add_embedding_routes(http, ctx_);

    // Whatever httplib answers on its own (unknown route 404, body too large 413, bad
    // request 400) gets an OpenAI error body too.
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
        ctx_.metrics.count_http_error(res.status);
        if (!res.body.empty()) return;
        std::string message = "HTTP " + std::to_string(res.status);
        if (res.status == 404) message = "no route " + req.method + " " + req.path;
        if (res.status == 413)
            message = "the request body is larger than " +
                      std::to_string(ctx_.options.max_body_bytes) + " bytes";
        send_error(res, {res.status, message, "invalid_request_error", std::nullopt, std::nullopt});
    });
    http.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
            std::string what = "internal error";
            try {
                std::rethrow_exception(ep);
            } catch (const std::exception& e) {
                what = e.what();
            } catch (...) {
            }
            send_error(res, {500, what, "server_error", std::nullopt, std::nullopt});
        });
}

HttpServer::~HttpServer() = default;

nlohmann::json HttpServer::model_object(const std::string& id) const {
    return {{"id", id}, {"object", "model"}, {"created", 0}, {"owned_by", "inferscale"}};
}

Status check_port_free(const std::string& host, int port) {
    if (port == 0) return {};
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr)
        return make_error("cannot listen on " + host + ":" + service);
    int err = 0;
    const int sock = ::socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    if (sock >= 0) {
        allow_address_reuse(sock);
        if (::bind(sock, found->ai_addr, found->ai_addrlen) != 0) err = errno;
        ::close(sock);
    }
    ::freeaddrinfo(found);
    if (err == EADDRINUSE) return make_error("port " + service + " is in use");
    return {};
}

Result<int> HttpServer::bind() {
    const ServerOptions& o = ctx_.options;
    errno = 0;
    const int port = o.port == 0 ? http_->bind_to_any_port(o.host)
                                 : (http_->bind_to_port(o.host, o.port) ? o.port : -1);
    if (port < 0) {
        // After a failed bind() cpp-httplib only closes the socket and frees the address list,
        // which leave errno as bind() set it.
        if (errno == EADDRINUSE && o.port != 0)
            return make_error("port " + std::to_string(o.port) + " is in use");
        return make_error("cannot listen on " + o.host + ":" + std::to_string(o.port));
    }
    // cpp-httplib listens with its build's backlog (5 in Debian's shared library): a burst of
    // clients connecting at once overflows it, the kernel drops their SYNs and they retry a
    // second later (100 users starting together saw p99 TTFT 1.09 s against 0.49 s). Listening
    // again on the bound socket raises the backlog in place (capped by net.core.somaxconn).
    if (listen_fd_ >= 0 && ::listen(listen_fd_, kListenBacklog) != 0)
        return make_error("cannot raise the listen backlog on " + o.host + ":" +
                          std::to_string(port));
    return port;
}

Status HttpServer::serve() {
    if (!http_->listen_after_bind()) return make_error("the HTTP server stopped with an error");
    return {};
}

void HttpServer::stop() { http_->stop(); }

}  // namespace inferscale::server
