#include "bench/inject_bench_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "bench/profiling_backend.h"
#include "inject/inject_plan.h"
#include "model/forward_batch.h"

namespace inferscale::bench {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Host memory the device copies into or out of: pinned (cudaHostAlloc) on CUDA, so copies are
// true async DMA, plain otherwise.
class HostBytes {
  public:
    HostBytes() = default;
    ~HostBytes() {
        if (pinned_ != nullptr) cudaFreeHost(pinned_);
    }
    HostBytes(const HostBytes&) = delete;
    HostBytes& operator=(const HostBytes&) = delete;

    Status allocate(std::size_t bytes, bool pinned) {
        if (!pinned) {
            plain_.assign(bytes, std::byte{0});
            data_ = plain_.data();
            return {};
        }
        const cudaError_t err = cudaHostAlloc(&pinned_, bytes, cudaHostAllocDefault);
        if (err != cudaSuccess) {
            cudaGetLastError();
            pinned_ = nullptr;
            return make_error("pinned host memory (" + std::to_string(bytes >> 20) +
                              " MiB): " + cudaGetErrorString(err));
        }
        data_ = pinned_;
        return {};
    }
    void* data() const { return data_; }

  private:
    std::vector<std::byte> plain_;
    void* pinned_ = nullptr;
    void* data_ = nullptr;
};

// A chunk of `tokens` rows of random KV in the cache dtype, on the backend. Returns the chunk
// and (through `data`) its writable device address, for the host tier's staging copies.
Result<memory::KvChunk> random_chunk(tensor::Backend& backend, const model::ModelConfig& c,
                                     const std::string& id, std::vector<std::int32_t> tokens,
                                     std::uint64_t seed, void** data) {
    const tensor::DType dt = backend.kv_dtype();
    const std::int64_t elems = c.num_layers * 2 * static_cast<std::int64_t>(tokens.size()) *
                               c.num_kv_heads * c.head_dim;
    tensor::Buffer buf = IS_TRY(backend.allocate(static_cast<std::size_t>(elems) *
                                                 tensor::dtype_size(dt)));
    // Unit scale: the attention over injected keys sees spread-out scores, as with real ones.
    backend.fill_random(buf.view(dt, {elems}), seed, 1.0f, 0.0f);
    if (data != nullptr) *data = buf.data();
    memory::ChunkIdentity identity;
    identity.fact_id = id;
    identity.model = c.name;
    identity.text_hash = memory::text_hash(id);
    return memory::KvChunk(std::move(identity), std::move(tokens), c.num_layers, c.num_kv_heads,
                           c.head_dim, dt, std::move(buf));
}

// Distinct, valid ids per piece (any ids do: the weights are random).
std::vector<std::int32_t> token_run(std::int64_t n, std::int64_t salt, std::int64_t vocab) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
        t[static_cast<std::size_t>(i)] =
            static_cast<std::int32_t>((salt * 104729 + i * 7919 + 13) % vocab);
    return t;
}

}  // namespace

// ---- StepMarks ----

StepMarks::StepMarks(tensor::Backend& backend, cudaStream_t stream, bool use_events,
                     int max_marks)
    : backend_(backend), stream_(stream), use_events_(use_events) {
    if (use_events_) {
        events_.resize(static_cast<std::size_t>(max_marks + 2), nullptr);
        for (cudaEvent_t& e : events_) IS_CUDA_CHECK(cudaEventCreate(&e));
    } else {
        host_ms_.resize(static_cast<std::size_t>(max_marks + 2), 0.0);
    }
}

StepMarks::~StepMarks() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

void StepMarks::start() {
    used_ = 0;
    mark();
}

void StepMarks::mark() {
    const std::size_t cap = use_events_ ? events_.size() : host_ms_.size();
    IS_CHECK(static_cast<std::size_t>(used_) < cap) << "StepMarks: more than " << cap << " marks";
    if (use_events_) {
        IS_CUDA_CHECK(cudaEventRecord(events_[static_cast<std::size_t>(used_)], stream_));
    } else {
        backend_.synchronize();
        if (used_ == 0) clock_.reset();
        host_ms_[static_cast<std::size_t>(used_)] = clock_.millis();
    }
    ++used_;
}

std::vector<double> StepMarks::finish() {
    mark();
    std::vector<double> out;
    if (use_events_) {
        IS_CUDA_CHECK(cudaEventSynchronize(events_[static_cast<std::size_t>(used_ - 1)]));
        for (int i = 1; i < used_; ++i) {
            float ms = 0.0f;
            IS_CUDA_CHECK(
                cudaEventElapsedTime(&ms, events_[0], events_[static_cast<std::size_t>(i)]));
            out.push_back(ms);
        }
    } else {
        for (int i = 1; i < used_; ++i) out.push_back(host_ms_[static_cast<std::size_t>(i)]);
    }
    return out;
}

// ---- InjectBenchHarness ----

struct InjectBenchHarness::Impl {
    tensor::Backend* backend = nullptr;
    bool cuda = false;
    model::LlamaModel model;
    kv::KvStorage kv;
    model::ForwardWorkspace ws;
    kv::BlockPool pool;
    inject::Injector injector;
    std::unique_ptr<inject::Injector> prof_injector;  // over the ProfilingBackend, when given
    ProfilingBackend* prof = nullptr;

    memory::KvChunk header, footer;
    std::vector<memory::KvChunk> facts;    // [pool_facts] resident (the GPU tier)
    std::vector<memory::KvChunk> staging;  // [max_k] device slots the host tier copies into
    std::vector<void*> staging_data;       // their device addresses
    HostBytes host_slab;                   // [pool_facts][chunk bytes] the host tier
    HostBytes logits;                      // [vocab] f32
    std::vector<std::int32_t> query;       // [query_tokens]

    // Per-request scratch (reused, so a request allocates little on the host).
    std::vector<const memory::KvChunk*> selected;
    std::vector<kv::BlockId> blocks;
    std::vector<std::int32_t> tokens, positions;

    Impl(tensor::Backend& be, model::LlamaModel m, kv::KvStorage k, model::ForwardWorkspace w,
         std::int32_t num_blocks)
        : backend(&be),
          model(std::move(m)),
          kv(std::move(k)),
          ws(std::move(w)),
          pool(num_blocks),
          injector(be, model.rope_tables()) {}

    std::int64_t vocab() const { return model.config().vocab_size; }
    std::span<float> logits_span() const {
        return std::span<float>(static_cast<float*>(logits.data()),
                                static_cast<std::size_t>(vocab()));
    }

    // Facts offset .. offset + k - 1 of the pool (wrapping), in prompt order.
    void select(std::int64_t k, std::int64_t offset, bool from_staging) {
        selected.clear();
        const auto n = static_cast<std::int64_t>(facts.size());
        for (std::int64_t i = 0; i < k; ++i) {
            selected.push_back(from_staging ? &staging[static_cast<std::size_t>(i)]
                                            : &facts[static_cast<std::size_t>((offset + i) % n)]);
        }
    }

    // Blocks for `tokens` KV entries; an Error (never expected: the pool is sized for the
    // largest request and every request gives its blocks back) when the pool is short.
    Status take_blocks(std::int64_t kv_tokens, std::int64_t block_size) {
        blocks.clear();
        if (!pool.allocate(static_cast<std::int32_t>(ceil_div(kv_tokens, block_size)), blocks))
            return make_error("block pool exhausted (" + std::to_string(pool.num_free()) +
                              " free)");
        return {};
    }
    void give_back_blocks() {
        if (!blocks.empty()) pool.release(blocks);
        blocks.clear();
    }

    // Host tier: each selected chunk's bytes are copied up layer group by layer group
    // (memory::kLayerGroups, as ChunkPool promotes) on the transfer stream; group_tickets[g] is
    // the last copy of group g (transfers finish in ticket order, so every chunk's group g has
    // landed then).
    std::vector<std::uint64_t> group_tickets;

    // Issues the copies of layer group g of chunks offset .. offset + k - 1 of the host slab
    // into staging slots 0 .. k - 1.
    void issue_group(std::int64_t g, std::int64_t k, std::int64_t offset,
                     std::int64_t chunk_bytes) {
        const memory::LayerGroupBytes range = memory::layer_group_bytes(
            g, model.config().num_layers, static_cast<std::size_t>(chunk_bytes));
        const auto n = static_cast<std::int64_t>(facts.size());
        for (std::int64_t i = 0; i < k; ++i) {
            const std::int64_t src = (offset + i) % n;
            const memory::KvChunk& slot = staging[static_cast<std::size_t>(i)];
            const std::size_t esize = tensor::dtype_size(slot.dtype());
            const tensor::Tensor dst(
                static_cast<std::byte*>(staging_data[static_cast<std::size_t>(i)]) + range.offset,
                slot.dtype(), {static_cast<std::int64_t>(range.size / esize)}, backend->device());
            group_tickets[static_cast<std::size_t>(g)] = backend->copy_from_host_async(
                dst,
                static_cast<const std::byte*>(host_slab.data()) + src * chunk_bytes + range.offset,
                range.size);
        }
    }

    // Forward of stream tokens [first, total) of `stream` ‖ query (KV indices and positions
    // first..total-1), the last token's logits to the host. Synchronizes.
    Status forward_from(const std::vector<std::int32_t>& stream, std::int64_t first,
                        const model::LayerHook* before_layer = nullptr) {
        tokens.clear();
        positions.clear();
        const auto m = static_cast<std::int64_t>(stream.size());
        const std::int64_t total = m + static_cast<std::int64_t>(query.size());
        for (std::int64_t p = first; p < total; ++p) {
            tokens.push_back(p < m ? stream[static_cast<std::size_t>(p)]
                                   : query[static_cast<std::size_t>(p - m)]);
            positions.push_back(static_cast<std::int32_t>(p));
        }
        const model::BatchSequence seq{static_cast<std::int32_t>(total - first),
                                       static_cast<std::int32_t>(total), blocks};
        model::ForwardBatch b;
        b.token_ids = tokens;
        b.positions = positions;
        b.sequences = std::span<const model::BatchSequence>(&seq, 1);
        b.logits = model::LogitsSelection::LastPerSequence;
        b.before_layer = before_layer;
        return model.forward(b, kv, ws, logits_span());
    }
};

InjectBenchHarness::InjectBenchHarness(std::unique_ptr<Impl> impl, const InjectShape& shape)
    : impl_(std::move(impl)), shape_(shape) {}

InjectBenchHarness::~InjectBenchHarness() = default;

std::int64_t InjectBenchHarness::kv_bytes_per_token() const {
    const model::ModelConfig& c = impl_->model.config();
    return 2 * c.num_layers * c.num_kv_heads * c.head_dim *
           static_cast<std::int64_t>(tensor::dtype_size(impl_->kv.dtype()));
}

Result<std::unique_ptr<InjectBenchHarness>> InjectBenchHarness::create(
    tensor::Backend& backend, bool cuda, const model::ModelConfig& config, const InjectShape& s,
    const Progress& progress) {
    if (s.footer_tokens < s.block_size - 1)
        return make_error("the footer must hold at least block_size - 1 tokens");
    if (s.pool_facts < s.max_k) return make_error("the fact pool is smaller than max k");
    const std::int64_t max_total = s.prompt_tokens(s.max_k);
    const std::int64_t num_blocks = ceil_div(max_total, s.block_size) + 4;

    model::LlamaModelOptions mo;
    mo.max_positions = max_total + s.block_size;
    progress("creating random weights: %s, %lld layers, hidden %lld, kv heads %lld x %lld",
             config.name.c_str(), static_cast<long long>(config.num_layers),
             static_cast<long long>(config.hidden_size),
             static_cast<long long>(config.num_kv_heads),
             static_cast<long long>(config.head_dim));
    model::LlamaModel m = IS_TRY(model::LlamaModel::create_random(backend, config, s.seed, mo));
    kv::KvStorage kv =
        IS_TRY(kv::KvStorage::create(backend, m.kv_layout(num_blocks, s.block_size)));
    model::WorkspaceLimits lim;
    lim.max_tokens = max_total;
    lim.max_seqs = 1;
    lim.max_pages = num_blocks;
    lim.max_logit_rows = 1;
    model::ForwardWorkspace ws = IS_TRY(m.create_workspace(lim));
    progress("weights ready; KV %lld blocks of %lld tokens, workspace %.2f GB",
             static_cast<long long>(num_blocks), static_cast<long long>(s.block_size),
             static_cast<double>(ws.buffer.bytes()) / 1e9);

    auto impl = std::make_unique<Impl>(backend, std::move(m), std::move(kv), std::move(ws),
                                       static_cast<std::int32_t>(num_blocks));
    impl->cuda = cuda;
    const std::int64_t vocab = config.vocab_size;
    IS_RETURN_IF_ERROR(
        impl->logits.allocate(static_cast<std::size_t>(vocab) * sizeof(float), cuda));
    impl->query = token_run(s.query_tokens, 999'999, vocab);

    std::uint64_t seed = s.seed * 1000 + 17;
    impl->header = IS_TRY(random_chunk(backend, config, "scaffold:header",
                                       token_run(s.header_tokens, 1, vocab), seed++, nullptr));
    impl->footer = IS_TRY(random_chunk(backend, config, "scaffold:footer",
                                       token_run(s.footer_tokens, 2, vocab), seed++, nullptr));
    for (std::int64_t i = 0; i < s.pool_facts; ++i) {
        impl->facts.push_back(IS_TRY(random_chunk(backend, config, "fact:" + std::to_string(i),
                                                  token_run(s.fact_tokens, 100 + i, vocab),
                                                  seed++, nullptr)));
    }
    for (std::int64_t i = 0; i < s.max_k; ++i) {
        void* data = nullptr;
        impl->staging.push_back(IS_TRY(random_chunk(backend, config,
                                                    "staging:" + std::to_string(i),
                                                    token_run(s.fact_tokens, 100 + i, vocab),
                                                    seed++, &data)));
        impl->staging_data.push_back(data);
    }
    const std::int64_t chunk_bytes = static_cast<std::int64_t>(impl->facts.front().bytes());
    // The host tier holds the same bytes as the resident pool, so both tiers inject the same KV.
    IS_RETURN_IF_ERROR(impl->host_slab.allocate(
        static_cast<std::size_t>(chunk_bytes * s.pool_facts), cuda));
    for (std::int64_t i = 0; i < s.pool_facts; ++i) {
        const memory::KvChunk& f = impl->facts[static_cast<std::size_t>(i)];
        const auto elems = static_cast<std::int64_t>(f.bytes() / tensor::dtype_size(f.dtype()));
        const tensor::Tensor src(const_cast<void*>(f.data()), f.dtype(), {elems},
                                 backend.device());
        backend.copy_to_host(static_cast<std::byte*>(impl->host_slab.data()) + i * chunk_bytes,
                             src, f.bytes());
    }
    backend.synchronize();
    progress("chunks ready: %lld resident facts + %lld staging slots of %lld tokens (%.2f MB "
             "each), host slab %.0f MB%s",
             static_cast<long long>(s.pool_facts), static_cast<long long>(s.max_k),
             static_cast<long long>(s.fact_tokens), static_cast<double>(chunk_bytes) / 1e6,
             static_cast<double>(chunk_bytes * s.pool_facts) / 1e6, cuda ? " pinned" : "");

    std::unique_ptr<InjectBenchHarness> h(new InjectBenchHarness(std::move(impl), s));
    h->chunk_bytes_ = chunk_bytes;
    return h;
}

Result<KvRequestTimes> InjectBenchHarness::kv_request(std::int64_t k, std::int64_t offset,
                                                      bool host_tier, StepMarks& marks) {
    Impl& im = *impl_;
    if (k < 1 || k > shape_.max_k) return make_error("k outside 1..max_k");
    marks.start();
    im.select(k, offset, host_tier);
    const inject::InjectPlan plan = IS_TRY(
        inject::make_memory_plan(im.header, im.selected, im.footer, shape_.block_size));
    IS_RETURN_IF_ERROR(im.take_blocks(plan.memory_tokens + shape_.query_tokens, shape_.block_size));
    KvRequestTimes out;
    if (!host_tier) {
        if (Status st = im.injector.inject(plan, im.blocks, im.kv); !st.ok()) {
            im.give_back_blocks();
            return st.error();
        }
        marks.mark();
        const Status fw = im.forward_from(plan.token_ids, plan.loaded_tokens);
        const std::vector<double> t = marks.finish();
        im.give_back_blocks();
        IS_RETURN_IF_ERROR(fw);
        out.injected_ms = t[0];
        out.total_ms = t[1];
        return out;
    }
    // Host tier: the copies of layer group g + 2 are issued when the forward reaches group g,
    // and group g's injection waits on the device for its own copies only, so the transfer
    // overlaps the layers before it.
    constexpr std::int64_t kAhead = 2;
    const std::int64_t groups = memory::kLayerGroups;
    im.group_tickets.assign(static_cast<std::size_t>(groups), 0);
    for (std::int64_t g = 0; g < std::min(kAhead, groups); ++g)
        im.issue_group(g, k, offset, chunk_bytes_);
    if (Status st = im.injector.prepare(plan.spans, im.blocks, im.kv); !st.ok()) {
        im.backend->synchronize();  // the copies in flight target slots the next request reuses
        im.give_back_blocks();
        return st.error();
    }
    marks.mark();
    memory::LayerGroupWalk walk(im.model.config().num_layers);
    const model::LayerHook hook = [&](std::int64_t layer) {
        walk.reach(layer, [&](std::int64_t g, std::int64_t first, std::int64_t count) {
            // Empty groups (fewer layers than groups) still issue their look-ahead.
            if (g + kAhead < groups) im.issue_group(g + kAhead, k, offset, chunk_bytes_);
            im.backend->order_after(im.group_tickets[static_cast<std::size_t>(g)]);
            im.injector.inject_layers(first, count);
        });
    };
    const Status fw = im.forward_from(plan.token_ids, plan.loaded_tokens, &hook);
    const std::vector<double> t = marks.finish();
    im.give_back_blocks();
    IS_RETURN_IF_ERROR(fw);
    out.issued_ms = t[0];
    out.total_ms = t[1];
    return out;
}

Result<double> InjectBenchHarness::prompt_request(std::int64_t k, std::int64_t offset,
                                                  StepMarks& marks) {
    Impl& im = *impl_;
    if (k < 1 || k > shape_.max_k) return make_error("k outside 1..max_k");
    marks.start();
    // The facts as text: M's token ids, all of them prefilled.
    im.select(k, offset, false);
    std::vector<std::int32_t> stream = im.header.token_ids();
    for (const memory::KvChunk* f : im.selected)
        stream.insert(stream.end(), f->token_ids().begin(), f->token_ids().end());
    stream.insert(stream.end(), im.footer.token_ids().begin(), im.footer.token_ids().end());
    const auto m = static_cast<std::int64_t>(stream.size());
    IS_RETURN_IF_ERROR(im.take_blocks(m + shape_.query_tokens, shape_.block_size));
    const Status fw = im.forward_from(stream, 0);
    const std::vector<double> t = marks.finish();
    im.give_back_blocks();
    IS_RETURN_IF_ERROR(fw);
    return t.back();
}

Result<InjectOpTimes> InjectBenchHarness::inject_only(std::int64_t k, std::int64_t offset,
                                                      ProfilingBackend* prof, StepMarks& marks) {
    Impl& im = *impl_;
    if (k < 1 || k > shape_.max_k) return make_error("k outside 1..max_k");
    if (prof != nullptr && im.prof != prof) {
        im.prof_injector = std::make_unique<inject::Injector>(*prof, im.model.rope_tables());
        im.prof = prof;
    }
    inject::Injector& injector = prof != nullptr ? *im.prof_injector : im.injector;
    im.select(k, offset, false);
    const inject::InjectPlan plan = IS_TRY(
        inject::make_memory_plan(im.header, im.selected, im.footer, shape_.block_size));
    IS_RETURN_IF_ERROR(im.take_blocks(plan.memory_tokens, shape_.block_size));
    im.backend->synchronize();
    if (prof != nullptr) {
        prof->reset();
        prof->begin_step();
    }
    marks.start();
    const Status st = injector.inject(plan, im.blocks, im.kv);
    const std::vector<double> t = marks.finish();
    if (prof != nullptr) prof->end_step();
    im.give_back_blocks();
    IS_RETURN_IF_ERROR(st);
    InjectOpTimes out;
    out.call_ms = t.back();
    out.op_ms = out.call_ms;
    if (prof != nullptr) {
        out.op_ms = 0.0;
        for (const OpProfile& p : prof->totals())
            if (p.op == "inject_chunks") out.op_ms += p.ms;
    }
    out.bytes = injector.last_bytes_moved();
    out.tokens = plan.loaded_tokens;
    return out;
}

std::span<const float> InjectBenchHarness::logits() const { return impl_->logits_span(); }

bool InjectBenchHarness::logits_finite() const {
    const std::span<const float> l = logits();
    return std::all_of(l.begin(), l.end(), [](float x) { return std::isfinite(x); });
}

std::int64_t InjectBenchHarness::blocks_in_use() const {
    return impl_->pool.num_blocks() - impl_->pool.num_free();
}

}  // namespace inferscale::bench
