#pragma once
// Backend: the compute interface the model runs on. The model only calls these ops on Tensor
// views of backend memory and never reads or writes tensor memory itself, so a CUDA backend can
// implement the same interface. Ops are enqueued in call order; results are visible to the host
// after `synchronize` (the CPU backend runs them eagerly). Shape and dtype mismatches are bugs
// (IS_CHECK); running out of memory is an Error.
// Activations are `activation_dtype()` (f32 on CPU). Weights go through `upload_weight`, which
// picks the backend's own storage form (the CPU keeps f32), so ops accept what it returned.
// A backend is used from one thread at a time.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include "base/result.h"
#include "tensor/buffer.h"
#include "tensor/ops.h"
#include "tensor/ops_checks.h"
#include "tensor/tensor.h"

namespace inferscale::tensor {

// A weight in the backend's storage form; `tensor` points into `storage`.
// Backend::transfer_totals: bytes and seconds, host to device (up) and device to host (down).
struct TransferTotals {
    std::uint64_t up_bytes = 0, down_bytes = 0;
    double up_seconds = 0, down_seconds = 0;
};

struct DeviceWeight {
    Buffer storage;
    Tensor tensor;
};

// A recorded sequence of ops that Backend::replay runs again as one unit (a CUDA graph). It
// bakes in every address and launch size it saw; the backend must outlive it.
class CapturedGraph {
  public:
    virtual ~CapturedGraph() = default;
};

class Backend : public BufferOwner {
  public:
    virtual ~Backend() = default;

    virtual std::string_view name() const = 0;
    virtual Device device() const = 0;
    virtual DType activation_dtype() const = 0;
    // The dtype of KV pages (f32 on CPU, bf16 on CUDA); write_kv, paged_attention and
    // inject_chunks also take FP8 pages (F8_E4M3 with per-head scales, tensor::KvPages).
    virtual DType kv_dtype() const = 0;

    // ---- memory -------------------------------------------------------------------------
    // An Error when the device is out of memory. Contents are uninitialized.
    virtual Result<Buffer> allocate(std::size_t bytes) = 0;
    void free_buffer(void* data, std::size_t bytes) override = 0;
    virtual void copy_from_host(Tensor dst, const void* src, std::size_t bytes) = 0;
    virtual void copy_to_host(void* dst, const Tensor& src, std::size_t bytes) = 0;
    virtual void fill_zero(Tensor t) = 0;
    // t[i] = offset + scale * u_i, u_i uniform in [-1, 1), a function of (seed, i) alone (see
    // tensor/random_fill.h), rounded to t's dtype (f32, f16 or bf16). Makes benchmark weights
    // where they live, without a host copy; scale 0 fills with `offset`. A block-quantized t
    // gets random quants whose blocks span about +-scale (tensor::random_block_byte; offset
    // 0), and is from then on a weight of this backend, as upload_weight's are. Other dtypes
    // are a bug.
    virtual void fill_random(Tensor t, std::uint64_t seed, float scale, float offset) = 0;
    virtual void synchronize() = 0;
    // Host memory that copy_from_host/copy_to_host move without an extra staging copy (pinned
    // on CUDA, plain elsewhere), 64-byte aligned; null when none is left. Free with free_host.
    virtual void* allocate_host(std::size_t bytes) {
        return ::operator new(bytes, std::align_val_t{64}, std::nothrow);
    }
    virtual void free_host(void* p) { ::operator delete(p, std::align_val_t{64}); }
    // The device's memory, total and free now (free counts every process's allocations); nullopt
    // where the backend has no memory of its own to share out (the CPU).
    struct MemoryInfo {
        std::size_t total_bytes = 0;
        std::size_t free_bytes = 0;
    };
    virtual std::optional<MemoryInfo> memory_info() { return std::nullopt; }

    // Converts a host weight (f32, f16 or bf16, any rank) into the backend's storage form.
    // `host` is only read during the call.
    virtual Result<DeviceWeight> upload_weight(const Tensor& host) = 0;

    // ---- ops ----------------------------------------------------------------------------
    // out[i] = table[ids[i]]; ids out of range are a bug.
    //   table [vocab, hidden] weight, ids [n] i32, out [n, hidden]
    virtual void embedding(const Tensor& table, const Tensor& ids, Tensor out) = 0;

    // out[i] = rows of x at `rows[i]`.  x [n, k], rows [m] i32, out [m, k]
    virtual void gather_rows(const Tensor& x, const Tensor& rows, Tensor out) = 0;

    // out = x / sqrt(mean(x^2) + eps) * weight, row-wise, statistics in f32. out may alias x.
    //   x [n, hidden], weight [hidden], out [n, hidden]
    virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) = 0;

    // The targets' linears, then the epilogue (see LinearArgs; a y may be f32 even where
    // activations are not: logits are always f32); what a backend does not fuse it runs
    // through run_unfused.  x [n, in]; w [out, in] weight, bias [out] or empty, y [n, out]
    virtual void linear(const LinearArgs& args) = 0;
    // One target, no epilogue.
    void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor y) {
        const LinearTarget target{w, bias, y};
        linear(LinearArgs{x, {&target, 1}});
    }

    // x += y.  x, y [n, k]
    virtual void add(Tensor x, const Tensor& y) = 0;

    // The residual add and the norm after it: x += y, then out = rms_norm(x, weight, eps),
    // with exactly their results (this default runs the two; a backend may fuse them).
    // out may alias y.  x, y, out [n, hidden], weight [hidden]
    virtual void add_rms_norm(Tensor x, const Tensor& y, const Tensor& weight, float eps,
                              Tensor out) {
        add(x, y);
        rms_norm(x, weight, eps, out);
    }

    // out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, row-wise (LayerNorm, the
    // biased variance), statistics in f32. out may alias x.
    //   x [n, hidden], weight [hidden], bias [hidden], out [n, hidden]
    virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                            Tensor out) = 0;

    // dst = src element-wise in dst's dtype (f32 <-> bf16; one dtype copies).  src, dst of one
    // element count
    virtual void convert(const Tensor& src, Tensor dst) = 0;

    // x = gelu(x), the exact form x * (1 + erf(x / sqrt(2))) / 2 (BERT's "gelu").  x [n, k]
    virtual void gelu(Tensor x) = 0;

    // Non-causal attention within packed sequences (see SequenceAttentionArgs), softmax in f32.
    //   q, k, v, out [n, h, d]
    virtual void sequence_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SequenceAttentionArgs& args, Tensor out) = 0;

    // out = silu(gate) * up.  gate, up, out [n, ffn]; out may alias gate.
    virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor out) = 0;
    // out = gelu(gate) * up, gelu's tanh approximation (Gemma).  As swiglu.
    virtual void geglu(const Tensor& gate, const Tensor& up, Tensor out) = 0;

    // x *= factor.  x [n, k]
    virtual void scale(Tensor x, float factor) = 0;

    // The rotation, then the KV write and attention where `args` has them (see RopeArgs); what
    // a backend does not fuse it runs through run_unfused.
    virtual void rope(const RopeArgs& args) = 0;

    // Writes token i's K and V into flat slot slots[i] = block * bs + offset of the pages;
    // slot -1 marks a padding row and writes nothing.  k, v [n, kvh, d], slots [n] i32
    virtual void write_kv(const Tensor& k, const Tensor& v, const Tensor& slots,
                          const KvPages& pages) = 0;

    // Causal grouped-query attention of q over the paged KV (see PagedAttentionArgs); query
    // head j reads kv head j / (h / kvh).  q [n, h, d], out [n, h, d]
    virtual void paged_attention(const Tensor& q, const KvPages& pages,
                                 const PagedAttentionArgs& args, Tensor out) = 0;

    // Memory injection, all layers in one op: for every token i of `args` and layer l, reads
    // row src_row[i] of chunk src_chunk[i], rotates its K to positions[i] (the same math as
    // `rope`, f32) and writes K and V to slot slots[i] of layer l's pages. Indices outside the
    // chunks, pages or tables are bugs.
    virtual void inject_chunks(const InjectArgs& args, const RopeTables& tables) = 0;

    // Greedy sampling where the logits are: ids[r] = index of the largest logits[r, :], the
    // first on ties; NaNs never win (a row of NaNs gives 0).  logits [rows, vocab] f32,
    // ids [rows] i32. With `allowed` (constrained decoding; empty: every token): a bitmask
    // [rows, (vocab + 31) / 32] i32, token t of row r allowed iff bit t % 32 of word t / 32 is
    // set; only allowed tokens are candidates, and a row that allows none gives -1.
    virtual void argmax(const Tensor& logits, const Tensor& allowed, Tensor ids) = 0;

    // Dense retrieval's scan: score_i = matrix[i, :] . query (f32 sums), then the k best rows,
    // best first, ties by the lower row; a NaN score ranks below every number. Places past n
    // (k > n) get row -1 and score -inf. One read of the matrix: memory-bound.
    //   matrix [n, dim] f32 or f16 (n may be 0), query [dim] f32, rows [k] i32, scores [k] f32,
    //   1 <= k <= kDotTopKMax
    static constexpr std::int64_t kDotTopKMax = 1024;
    virtual void dot_top_k(const Tensor& matrix, const Tensor& query, Tensor rows,
                           Tensor scores) = 0;

    // ---- copies beside compute (optional) ------------------------------------------------
    // Starts copying `bytes` from `src` (from allocate_host) into `dst` on a transfer stream,
    // so the copy overlaps the compute ops; returns its ticket, 0 when it is already done.
    // `src` must stay untouched until transfer_done(ticket). Transfers finish in ticket order.
    // Backends without such a stream copy at once.
    virtual std::uint64_t copy_from_host_async(Tensor dst, const void* src, std::size_t bytes) {
        copy_from_host(dst, src, bytes);
        synchronize();
        return 0;
    }
    // As copy_from_host_async, with no ticket of its own: the ticket of a later copy covers it
    // (transfers finish in order). Saves the bookkeeping of copies nobody waits for one by one.
    virtual void copy_from_host_untracked(Tensor dst, const void* src, std::size_t bytes) {
        copy_from_host_async(dst, src, bytes);
    }
    // Whether the transfer (and every earlier one) has finished; never waits.
    virtual bool transfer_done(std::uint64_t ticket) { return true; }
    // Compute ops issued after this run after the transfer, without the host waiting for it.
    virtual void order_after(std::uint64_t ticket) {}
    // Starts copying `bytes` of device memory `src` into `dst` (from allocate_host) on the
    // transfer stream, after every compute op issued so far; returns its ticket (0: done).
    // `dst` holds the bytes, and `src` may be overwritten, once transfer_done(ticket).
    virtual std::uint64_t copy_to_host_async(void* dst, const Tensor& src, std::size_t bytes) {
        copy_to_host(dst, src, bytes);
        synchronize();
        return 0;
    }
    // A mark after the compute ops issued so far (0 when they are all done already, as on
    // backends that run ops at once). Marks are increasing; a later mark's being done implies
    // every earlier one is.
    virtual std::uint64_t compute_fence() { return 0; }
    // Transfers issued after this wait, on the device, for the mark's ops.
    virtual void transfer_after(std::uint64_t fence) {}
    // Waits on the host until the mark's ops and the transfer (0: none) are done.
    virtual void wait_for(std::uint64_t fence, std::uint64_t ticket) {}
    // What the transfer stream has copied so far, per direction, and the time it spent on
    // those copies (device time, measured by events): the achieved bandwidth of promotions and
    // copies down. Any thread may ask. Backends without a transfer stream report zeros.
    virtual TransferTotals transfer_totals() const { return {}; }

    // ---- graph capture (optional) ------------------------------------------------------
    // Between begin_capture and end_capture ops are recorded, not run; replay then runs the
    // recording with whatever the captured buffers hold at that time. Inside a capture no op
    // may allocate, synchronize or copy from the host. Backends without graphs return Errors
    // (and replay is a bug).
    virtual bool supports_graphs() const { return false; }
    virtual Status begin_capture() { return make_error(std::string(name()) + ": no graphs"); }
    virtual Result<std::unique_ptr<CapturedGraph>> end_capture() {
        return make_error(std::string(name()) + ": no graphs");
    }
    virtual void replay(const CapturedGraph& graph) {
        (void)graph;
        IS_CHECK(false) << name() << " cannot replay graphs";
    }

    // Whether the first step of a new shape is slow here (plans tuned, graphs recorded), so a
    // server should run its step shapes once before taking requests (engine/warm_up.h).
    virtual bool wants_warm_up() const { return false; }

  protected:
    // The ops a linear's epilogue or a rope's KV write and attention stand for, one by one
    // (their results are what a fusion must give): the linear with no epilogue, then swiglu,
    // geglu or rope; the rotation alone, then write_kv, then paged_attention. Every backend runs a
    // plain linear and a plain rotation itself.
    void run_unfused(const LinearArgs& args) {
        check_linear_epilogue(args);
        linear(LinearArgs{args.x, args.targets});
        switch (args.epilogue) {
            case LinearEpilogue::None: return;
            case LinearEpilogue::SwiGLU:
                swiglu(args.targets[0].y, args.targets[1].y, args.targets[0].y);
                return;
            case LinearEpilogue::GeGLU:
                geglu(args.targets[0].y, args.targets[1].y, args.targets[0].y);
                return;
            case LinearEpilogue::RopeAttention: rope(*args.rope); return;
        }
    }
    void run_unfused(const RopeArgs& args) {
        rope(RopeArgs{args.q, args.k, args.positions, args.tables});
        write_kv(args.k, args.v, args.slots, args.pages);
        if (args.attention == nullptr) return;
        paged_attention(args.q, args.pages, *args.attention, args.out);
    }
};

}  // namespace inferscale::tensor
