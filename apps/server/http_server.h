#pragma once
// HttpServer: the OpenAI-compatible API and the memory API over HTTP (cpp-httplib), on one
// Engine. Every answer is JSON; errors use the OpenAI error shape. Handlers run on a thread
// pool sized for many concurrent streams; a streaming handler holds its thread for the length
// of its answer and cancels the request when the client goes away.
//
// Routes: POST /v1/chat/completions, POST /v1/completions (completion_route.cpp), GET
// /v1/models, GET /v1/models/{id}, POST /tokenize, POST /detokenize (tokenize_api.cpp), GET
// /health, GET /metrics, the memory API: /v1/memories (memory_api.cpp) and Mem0's REST
// routes (mem0_api.cpp), POST /v1/embeddings (embeddings_api.cpp) when the server has an
// embedding model, and the web page: GET / and GET /web/<file> (web_page.cpp).

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/server/api_error.h"
#include "apps/server/api_keys.h"
#include "apps/server/embedding_model.h"
#include "apps/server/memory_api.h"
#include "apps/server/metrics.h"
#include "apps/server/openai_api.h"
#include "base/result.h"
#include "engine/engine.h"
#include "memory/memory_store.h"
#include "retrieval/fact_retriever.h"
#include "toolcall/template_tools.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace inferscale::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;
    std::string model_name;                    // what /v1/models lists and requests must name
    std::size_t max_body_bytes = 4u << 20;     // larger bodies are refused with 413
    std::size_t threads = 512;                 // HTTP worker threads (streams in flight)
    engine::MemoryDefaults memory;
};

// Everything a handler needs; borrowed from the serve command, which outlives the server.
class MemoryExtraction;

struct ServerContext {
    engine::Engine& engine;
    memory::MemoryStore* store;        // null: no memory API
    const retrieval::FactRetriever* retriever;  // set whenever `store` is
    ApiKeys keys;
    ServerOptions options;
    ServerMetrics metrics;
    // How the model's chat template takes tools: set by HttpServer from the template.
    toolcall::TemplateTools tool_template = {};
    // Fact extraction from added messages (memory_extraction.h); set whenever `store` is.
    MemoryExtraction* extraction = nullptr;
    // The engine extraction runs on when it is not `engine` (serve --memory-model); its
    // counters go to /metrics as inferscale_memory_model_*.
    engine::Engine* extraction_engine = nullptr;
    EmbeddingModel* embeddings = nullptr;  // null: no /v1/embeddings
    memory::FactEmbedder* embedder = nullptr;  // null: facts are not embedded
};

// Whether host:port can be bound now (as HttpServer::bind binds it), checked before a model
// load that may take long: "port P is in use" when another socket holds it. Port 0 always can.
Status check_port_free(const std::string& host, int port);

class HttpServer {
  public:
    explicit HttpServer(ServerContext& context);
    ~HttpServer();

    // Binds the address; returns the port bound (the chosen one with port 0), or an Error
    // ("port P is in use" when another socket holds it: ports are not shared).
    Result<int> bind();
    // Serves on the bound address until stop().
    Status serve();
    void stop();

  private:
    void handle_completion(const httplib::Request& req, httplib::Response& res, bool chat);
    // A served model as /v1/models lists it: the chat model, or the embedding model.
    nlohmann::json model_object(const std::string& id) const;

    ServerContext& ctx_;
    std::unique_ptr<httplib::Server> http_;
    int listen_fd_ = -1;  // the listening socket, once bound
};

// ---- helpers shared by the route files -------------------------------------------------
void send_json(httplib::Response& res, const std::string& body, int status = 200);
void send_error(httplib::Response& res, const ApiError& error);
// The caller's key, or a 401 sent and null returned.
const ApiKey* authenticate(const ServerContext& ctx, const httplib::Request& req,
                           httplib::Response& res);

void add_tokenize_routes(httplib::Server& http, ServerContext& ctx);
void add_embedding_routes(httplib::Server& http, ServerContext& ctx);
void add_web_page_routes(httplib::Server& http);

}  // namespace inferscale::server
