// POST /v1/embeddings in OpenAI's shape:
//   {"model", "input": "text" | ["text", ...], "encoding_format"?: "float" | "base64",
//    "dimensions"?, "user"?}
//   -> {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
//       "usage": {"prompt_tokens", "total_tokens"}}
// `model` must be the embedding model's id (else a 404 model_not_found). Texts longer than the
// model's max_seq_length are truncated, as sentence-transformers does; token-id inputs, empty
// texts, more than kMaxEmbeddingInputs texts and `dimensions` other than the model's are 400s
// naming the field. base64 is the little-endian f32 bytes, as OpenAI's clients decode them.

#include <httplib.h>

#include <cstring>

#include "apps/server/http_server.h"
#include "apps/server/json_fields.h"

namespace inferscale::server {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit per request

struct EmbeddingCall {
    std::vector<std::string> texts;
    bool base64 = false;
};

std::string base64_encode(const void* data, std::size_t size) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto* bytes = static_cast<const unsigned char*>(data);
    std::string out;
    out.reserve((size + 2) / 3 * 4);
    for (std::size_t i = 0; i < size; i += 3) {
        const std::uint32_t b0 = bytes[i];
        const std::uint32_t b1 = i + 1 < size ? bytes[i + 1] : 0;
        const std::uint32_t b2 = i + 2 < size ? bytes[i + 2] : 0;
        const std::uint32_t triple = (b0 << 16) | (b1 << 8) | b2;
        out.push_back(kAlphabet[(triple >> 18) & 63]);
        out.push_back(kAlphabet[(triple >> 12) & 63]);
        out.push_back(i + 1 < size ? kAlphabet[(triple >> 6) & 63] : '=');
        out.push_back(i + 2 < size ? kAlphabet[triple & 63] : '=');
    }
    return out;
}

std::optional<ApiError> read_input(const json& input, std::vector<std::string>& texts) {
    const ApiError token_ids = bad_request(
        "'input' as token ids is not supported: send text (a string or a list of strings)",
        "input");
    if (input.is_string()) {
        texts.push_back(input.get<std::string>());
    } else if (input.is_array()) {
        if (input.empty()) return bad_request("'input' must not be an empty list", "input");
        if (input.size() > kMaxEmbeddingInputs)
            return bad_request("'input' holds " + std::to_string(input.size()) +
                                   " texts; at most " + std::to_string(kMaxEmbeddingInputs),
                               "input");
        for (const json& item : input) {
            if (item.is_number_integer() || item.is_array()) return token_ids;
            if (!item.is_string())
                return bad_request("'input' must be a string or a list of strings", "input");
            texts.push_back(item.get<std::string>());
        }
    } else {
        return bad_request("'input' must be a string or a list of strings", "input");
    }
    for (std::size_t i = 0; i < texts.size(); ++i) {
        if (texts[i].empty()) {
            const std::string where =
                input.is_string() ? "input" : "input[" + std::to_string(i) + "]";
            return bad_request("'" + where + "' is an empty string", where);
        }
    }
    return std::nullopt;
}

std::variant<EmbeddingCall, ApiError> parse_call(const std::string& body,
                                                 const EmbeddingModel& model) {
    json doc;
    if (auto e = parse_object(body, doc)) return *e;
    if (auto e =
            unsupported_field(doc, {"model", "input", "encoding_format", "dimensions", "user"}))
        return *e;
    Fields f(doc);
    std::string name, format = "float", user;
    std::int64_t dimensions = model.dim();
    f.read("model", name, "a string", &json::is_string);
    f.read("encoding_format", format, "a string", &json::is_string);
    f.read("dimensions", dimensions, "an integer", &json::is_number_integer);
    f.read("user", user, "a string", &json::is_string);
    if (f.error) return *f.error;
    if (!f.get("model")) return bad_request("'model' is required", "model");
    if (name != model.id())
        return not_found("the model '" + name + "' does not exist or is not an embedding model (" +
                             "embeddings: '" + model.id() + "')",
                         "model_not_found");
    if (format != "float" && format != "base64")
        return bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
    if (dimensions != model.dim())
        return bad_request("'dimensions' must be " + std::to_string(model.dim()) + ": " +
                               model.id() + " has embeddings of that size only",
                           "dimensions");
    const json* input = f.get("input");
    if (!input) return bad_request("'input' is required", "input");
    EmbeddingCall call;
    call.base64 = format == "base64";
    if (auto e = read_input(*input, call.texts)) return *e;
    return call;
}

}  // namespace

void add_embedding_routes(httplib::Server& http, ServerContext& ctx) {
    http.Post("/v1/embeddings", [&ctx](const httplib::Request& req, httplib::Response& res) {
        if (!authenticate(ctx, req, res)) return;
        EmbeddingModel& model = *ctx.embeddings;
        auto parsed = parse_call(req.body, model);
        if (auto* e = std::get_if<ApiError>(&parsed)) return send_error(res, *e);
        const EmbeddingCall& call = std::get<EmbeddingCall>(parsed);
        const auto ids = model.tokenize(call.texts);
        auto vectors = model.encode(ids);
        if (!vectors.ok()) return send_error(res, from_error(vectors.error()));
        const auto dim = static_cast<std::size_t>(model.dim());
        json data = json::array();
        std::size_t tokens = 0;
        for (std::size_t i = 0; i < ids.size(); ++i) {
            tokens += ids[i].size();
            const float* row = vectors->data() + i * dim;
            json embedding = call.base64 ? json(base64_encode(row, dim * sizeof(float)))
                                         : json(std::vector<float>(row, row + dim));
            data.push_back(
                {{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
        }
        send_json(res, json{{"object", "list"},
                            {"data", std::move(data)},
                            {"model", model.id()},
                            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}}
                           .dump());
    });
}

}  // namespace inferscale::server
