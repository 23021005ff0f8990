#include "bench/model_bench.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>

#include "backends/cuda/cuda_check.h"

namespace inferscale::bench {
namespace {

constexpr std::int64_t kBlockSize = 16;
constexpr int kDecodeWarmup = 3;
constexpr int kDecodeSingleSteps = 20;
constexpr int kDecodeBatchSteps = 10;
constexpr int kTtftWarmup = 2;
constexpr int kTtftSteps = 10;
constexpr int kPrefillWarmup = 1;
constexpr int kPrefillSteps = 3;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// f32 logits on the host; pinned where the device copies into them.
class HostLogits {
  public:
    HostLogits() = default;
    ~HostLogits() {
        if (pinned_ != nullptr) cudaFreeHost(pinned_);
    }
    HostLogits(const HostLogits&) = delete;
    HostLogits& operator=(const HostLogits&) = delete;

    Status allocate(std::size_t count, bool pinned) {
        if (!pinned) {
            plain_.assign(count, 0.0f);
            data_ = std::span<float>(plain_);
            return {};
        }
        void* p = nullptr;
        const cudaError_t err = cudaMallocHost(&p, count * sizeof(float));
        if (err != cudaSuccess) {
            cudaGetLastError();
            return make_error(std::string("pinned logits: ") + cudaGetErrorString(err));
        }
        pinned_ = static_cast<float*>(p);
        data_ = std::span<float>(pinned_, count);
        return {};
    }
    std::span<float> span() const { return data_; }

  private:
    std::vector<float> plain_;
    float* pinned_ = nullptr;
    std::span<float> data_;
};

// The arrays one ForwardBatch borrows.
struct BatchBuilder {
    std::vector<std::int32_t> tokens;
    std::vector<std::int32_t> positions;
    std::vector<model::BatchSequence> seqs;

    void clear() {
        tokens.clear();
        positions.clear();
        seqs.clear();
    }
    // `n` new tokens ending at KV length `kv_len`, on `pages`.
    void add(std::span<const std::int32_t> pages, std::int64_t n, std::int64_t kv_len,
             std::int64_t vocab) {
        for (std::int64_t j = kv_len - n; j < kv_len; ++j) {
            // Any valid ids do: the weights are random.
            tokens.push_back(static_cast<std::int32_t>((j * 7919 + seqs.size() * 104729) % vocab));
            positions.push_back(static_cast<std::int32_t>(j));
        }
        seqs.push_back(model::BatchSequence{static_cast<std::int32_t>(n),
                                            static_cast<std::int32_t>(kv_len), pages});
    }
    model::ForwardBatch batch() const {
        model::ForwardBatch b;
        b.token_ids = tokens;
        b.positions = positions;
        b.sequences = seqs;
        b.logits = model::LogitsSelection::LastPerSequence;
        return b;
    }
};

}  // namespace

struct ModelBench::Impl {
    tensor::Backend* backend = nullptr;
    StepTimer* timer = nullptr;
    ModelBenchOptions options;
    model::LlamaModel model;
    kv::KvStorage kv;
    model::ForwardWorkspace ws;
    HostLogits logits;
    std::vector<std::int32_t> page_ids;  // 0 .. num_blocks - 1
    std::int64_t pages_per_seq = 0;      // the page stride between sequences
    bool kv_random = false;
    BatchBuilder builder;
    std::optional<model::DecodeGraphRunner> runner;  // decode rows, when options.decode_runner
    std::vector<std::int32_t> ids;                   // [max batch] sampled by the runner
    std::function<void()> before_step, after_step;

    Impl(model::LlamaModel m, kv::KvStorage k, model::ForwardWorkspace w)
        : model(std::move(m)), kv(std::move(k)), ws(std::move(w)) {}

    // Sequence `s`'s pages: `count` blocks from s * pages_per_seq (sequences of one batch never
    // share blocks; the sizing in create guarantees the range exists).
    std::span<const std::int32_t> pages(std::int64_t s, std::int64_t count) const {
        IS_CHECK((s * pages_per_seq + count) <= static_cast<std::int64_t>(page_ids.size()))
            << "sequence " << s << " needs " << count << " pages";
        return std::span<const std::int32_t>(page_ids).subspan(s * pages_per_seq, count);
    }

    // One timed forward of the builder's batch; `hooked` steps run the step hooks.
    Result<double> timed_forward(bool hooked = false) {
        const model::ForwardBatch b = builder.batch();
        if (hooked && before_step) before_step();
        timer->start();
        IS_RETURN_IF_ERROR(model.forward(b, kv, ws, logits.span()));
        const double ms = timer->stop_ms();
        if (hooked && after_step) after_step();
        return ms;
    }

    // One timed decode step of the builder's batch: through the runner (device argmax, ids
    // only) when there is one, else a plain forward.
    Result<double> timed_decode(bool hooked) {
        if (!runner) return timed_forward(hooked);
        const model::ForwardBatch b = builder.batch();
        if (hooked && before_step) before_step();
        timer->start();
        IS_RETURN_IF_ERROR(runner->decode(b, ids));
        const double ms = timer->stop_ms();
        if (hooked && after_step) after_step();
        return ms;
    }

    // Reruns the last decode step (same KV slots, so idempotent) with its logits copied out,
    // so the finiteness check sees what the timed steps computed.
    Status refresh_decode_logits() {
        if (!runner) return {};
        const model::ForwardBatch b = builder.batch();
        return runner->decode(b, ids, logits.span());
    }

    bool logits_finite(std::int64_t rows) const {
        const std::span<float> l =
            logits.span().first(static_cast<std::size_t>(rows * model.config().vocab_size));
        return std::all_of(l.begin(), l.end(), [](float x) { return std::isfinite(x); });
    }
};

ModelBench::ModelBench(std::unique_ptr<Impl> impl, const ModelCost& cost)
    : impl_(std::move(impl)), cost_(cost) {}

ModelBench::~ModelBench() = default;

std::int64_t ModelBench::kv_bytes() const {
    return static_cast<std::int64_t>(impl_->kv.layout().bytes_per_layer(impl_->kv.dtype()) * 2 *
                                     impl_->kv.layout().num_layers);
}

Result<std::unique_ptr<ModelBench>> ModelBench::create(tensor::Backend& backend, StepTimer& timer,
                                                       const model::ModelConfig& config,
                                                       const ModelBenchOptions& o,
                                                       const Progress& progress) {
    Timer clock;
    const std::int64_t max_batch =
        o.decode_batches.empty()
            ? 1
            : *std::max_element(o.decode_batches.begin(), o.decode_batches.end());
    const std::int64_t decode_steps =
        kDecodeWarmup + std::max(kDecodeSingleSteps, kDecodeBatchSteps);
    // Every sequence gets a stride of pages big enough for the longest thing it does.
    const std::int64_t batched_prefill_kv = o.prefill_context + o.prefill_seq_len;
    const std::int64_t pages_per_seq =
        ceil_div(std::max({o.context + decode_steps, o.prompt, batched_prefill_kv}), kBlockSize);
    const std::int64_t num_blocks =
        std::max({max_batch * pages_per_seq, o.prefill_seqs * pages_per_seq,
                  ceil_div(o.prefill_len, kBlockSize), ceil_div(o.kv_tokens, kBlockSize)});
    const std::int64_t max_positions =
        std::max({o.context + decode_steps, o.prefill_len, batched_prefill_kv, o.prompt}) + 1;

    model::LlamaModelOptions mo;
    mo.max_positions = max_positions;
    mo.random_quant = o.quant;
    progress("creating random weights%s",
             o.quant == model::WeightQuant::None ? "" : " (llama.cpp's Q4_K_M mix)");
    model::LlamaModel m = IS_TRY(model::LlamaModel::create_random(backend, config, o.seed, mo));
    progress("weights ready; allocating KV: %lld blocks of %lld tokens",
             static_cast<long long>(num_blocks), static_cast<long long>(kBlockSize));
    kv::KvStorage kv =
        IS_TRY(kv::KvStorage::create(backend, m.kv_layout(num_blocks, kBlockSize), o.kv_dtype));

    model::WorkspaceLimits lim;
    // Decode batches run padded to the next power of two (the runner's buckets); each padding
    // sequence takes one page entry.
    const auto padded_batch = static_cast<std::int64_t>(
        std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(max_batch, 1))));
    lim.max_tokens = std::max({o.prefill_seqs * o.prefill_seq_len, o.prefill_len, o.context,
                               o.prompt, padded_batch});
    lim.max_seqs = std::max(padded_batch, o.prefill_seqs);
    lim.max_pages = std::max({max_batch * pages_per_seq + padded_batch,
                              o.prefill_seqs * pages_per_seq, ceil_div(o.prefill_len, kBlockSize)});
    lim.max_logit_rows = lim.max_seqs;
    model::ForwardWorkspace ws = IS_TRY(m.create_workspace(lim));
    progress("workspace: %lld tokens, %lld seqs, %.2f GB", static_cast<long long>(lim.max_tokens),
             static_cast<long long>(lim.max_seqs), static_cast<double>(ws.buffer.bytes()) / 1e9);

    auto impl = std::make_unique<Impl>(std::move(m), std::move(kv), std::move(ws));
    impl->backend = &backend;
    impl->timer = &timer;
    impl->options = o;
    impl->pages_per_seq = pages_per_seq;
    impl->page_ids.resize(static_cast<std::size_t>(num_blocks));
    std::iota(impl->page_ids.begin(), impl->page_ids.end(), 0);
    if (o.shuffle_pages) {
        std::shuffle(impl->page_ids.begin(), impl->page_ids.end(), std::mt19937_64(o.seed));
    }
    IS_RETURN_IF_ERROR(impl->logits.allocate(
        static_cast<std::size_t>(lim.max_logit_rows * config.vocab_size), o.pinned_logits));

    impl->ids.resize(static_cast<std::size_t>(lim.max_seqs));
    if (o.decode_runner) {
        model::DecodeGraphOptions go;
        go.max_kv_len = static_cast<std::int32_t>(
            std::max(pages_per_seq * kBlockSize, o.decode_max_kv_len));
        impl->runner.emplace(IS_TRY(
            model::DecodeGraphRunner::create(impl->model, impl->kv, impl->ws, go)));
    }

    const ModelCost cost(config, static_cast<double>(impl->model.weight_bytes()),
                         static_cast<double>(impl->model.embedding_bytes()),
                         tensor::dtype_size(impl->kv.dtype()));
    std::unique_ptr<ModelBench> bench(new ModelBench(std::move(impl), cost));
    bench->create_seconds_ = clock.seconds();
    return bench;
}

void ModelBench::set_step_hooks(std::function<void()> before, std::function<void()> after) {
    impl_->before_step = std::move(before);
    impl_->after_step = std::move(after);
}

int ModelBench::graphs_captured() const {
    return impl_->runner ? impl_->runner->graphs_captured() : 0;
}

std::string ModelBench::graph_error() const {
    return impl_->runner ? impl_->runner->graph_error() : std::string();
}

Result<Measurement> ModelBench::decode_single(double* prefill_ms) {
    Impl& im = *impl_;
    const std::int64_t vocab = cost_.config.vocab_size, ctx = im.options.context;
    const std::int64_t steps = kDecodeWarmup + kDecodeSingleSteps;
    const std::span<const std::int32_t> pages = im.pages(0, im.pages_per_seq);
    im.builder.clear();
    im.builder.add(pages, ctx, ctx, vocab);
    *prefill_ms = IS_TRY(im.timed_forward());
    im.kv_random = false;  // sequence 0's blocks now hold real K/V

    Measurement m;
    m.new_tokens = 1;
    m.logit_rows = 1;
    m.kv_len = ctx + kDecodeWarmup + 1;
    for (std::int64_t step = 0; step < steps; ++step) {
        im.builder.clear();
        im.builder.add(pages, 1, ctx + step + 1, vocab);
        const double ms = IS_TRY(im.timed_decode(step >= kDecodeWarmup));
        if (step >= kDecodeWarmup) m.samples.ms.push_back(ms);
    }
    IS_RETURN_IF_ERROR(im.refresh_decode_logits());
    m.flops = cost_.sequence_flops(1, static_cast<double>(m.kv_len)) + cost_.logits_flops(1);
    m.bytes =
        cost_.step_weight_bytes() + cost_.kv_bytes_per_token() * static_cast<double>(m.kv_len);
    m.logits_finite = im.logits_finite(1);
    return m;
}

Result<Measurement> ModelBench::ttft() {
    Impl& im = *impl_;
    const std::int64_t n = im.options.prompt;
    Measurement m;
    m.new_tokens = n;
    m.logit_rows = 1;
    m.kv_len = n;
    im.builder.clear();
    im.builder.add(im.pages(0, ceil_div(n, kBlockSize)), n, n, cost_.config.vocab_size);
    for (int step = 0; step < kTtftWarmup + kTtftSteps; ++step) {
        const double ms = IS_TRY(im.timed_forward(step >= kTtftWarmup));
        if (step >= kTtftWarmup) m.samples.ms.push_back(ms);
    }
    m.flops = cost_.sequence_flops(static_cast<double>(n), static_cast<double>(n)) +
              cost_.logits_flops(1);
    m.bytes = cost_.step_weight_bytes() + cost_.kv_bytes_per_token() * static_cast<double>(n);
    m.logits_finite = im.logits_finite(1);
    return m;
}

Result<Measurement> ModelBench::prefill(std::int64_t seqs, std::int64_t len,
                                        std::int64_t context) {
    Impl& im = *impl_;
    const std::int64_t kv_len = context + len;
    const std::int64_t needed = ceil_div(kv_len, kBlockSize);
    im.builder.clear();
    for (std::int64_t s = 0; s < seqs; ++s) {
        // One long sequence may run over the stride: it is alone in its batch.
        im.builder.add(seqs == 1 ? im.pages(0, needed) : im.pages(s, needed), len, kv_len,
                       cost_.config.vocab_size);
    }
    if (seqs > 1 && needed > im.pages_per_seq) {
        return make_error("prefill: sequences of " + std::to_string(len) +
                          " tokens overrun the page stride");
    }
    Measurement m;
    m.new_tokens = seqs * len;
    m.logit_rows = seqs;
    m.kv_len = kv_len;
    for (int step = 0; step < kPrefillWarmup + kPrefillSteps; ++step) {
        const double ms = IS_TRY(im.timed_forward(step >= kPrefillWarmup));
        if (step >= kPrefillWarmup) m.samples.ms.push_back(ms);
    }
    const double s = static_cast<double>(seqs), l = static_cast<double>(len);
    m.flops = s * cost_.sequence_flops(l, static_cast<double>(kv_len)) + cost_.logits_flops(s);
    m.bytes = cost_.step_weight_bytes() +
              s * static_cast<double>(kv_len) * cost_.kv_bytes_per_token();
    m.logits_finite = im.logits_finite(seqs);
    return m;
}

Result<Measurement> ModelBench::decode_batch(std::int64_t batch) {
    Impl& im = *impl_;
    if (!im.kv_random) {
        // Unit-scale K and V: the softmax sees spread-out scores, as with real activations.
        for (std::int64_t layer = 0; layer < cost_.config.num_layers; ++layer) {
            const tensor::KvPages p = im.kv.pages(layer);
            im.backend->fill_random(p.k, im.options.seed * 2 + 101 + 2 * layer, 1.0f, 0.0f);
            im.backend->fill_random(p.v, im.options.seed * 2 + 102 + 2 * layer, 1.0f, 0.0f);
        }
        im.backend->synchronize();
        im.kv_random = true;
    }
    const std::int64_t ctx = im.options.context;
    Measurement m;
    m.new_tokens = batch;
    m.logit_rows = batch;
    m.kv_len = ctx + kDecodeWarmup + 1;
    for (std::int64_t step = 0; step < kDecodeWarmup + kDecodeBatchSteps; ++step) {
        im.builder.clear();
        const std::int64_t kv_len = ctx + step + 1;
        for (std::int64_t s = 0; s < batch; ++s) {
            im.builder.add(im.pages(s, ceil_div(kv_len, kBlockSize)), 1, kv_len,
                           cost_.config.vocab_size);
        }
        const double ms = IS_TRY(im.timed_decode(step >= kDecodeWarmup));
        if (step >= kDecodeWarmup) m.samples.ms.push_back(ms);
    }
    IS_RETURN_IF_ERROR(im.refresh_decode_logits());
    const double b = static_cast<double>(batch), kv_len = static_cast<double>(m.kv_len);
    m.flops = b * cost_.sequence_flops(1, kv_len) + cost_.logits_flops(b);
    m.bytes = cost_.step_weight_bytes() + b * kv_len * cost_.kv_bytes_per_token();
    m.logits_finite = im.logits_finite(batch);
    return m;
}

}  // namespace inferscale::bench
