#include "backends/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_kernels.h"
#include "tensor/ops_checks.h"

namespace inferscale::backends::cpu {
namespace {

using tensor::DType;
using tensor::Tensor;

constexpr std::size_t kAlignment = 64;

void check_on_host(const Tensor& t, const char* what) {
    IS_CHECK(t.device == tensor::Device::Cpu) << what << " is not host memory";
    IS_CHECK(t.data != nullptr || t.numel() == 0) << what << " is null";
}

void check_host(const Tensor& t, DType dtype, int rank, const char* what) {
    check_on_host(t, what);
    IS_CHECK(t.dtype == dtype) << what << " dtype " << tensor::dtype_name(t.dtype);
    IS_CHECK(t.rank == rank) << what << " rank " << t.rank << " expected " << rank;
}

void check_weight(const Tensor& w, int rank, const char* what) {
    IS_CHECK(w.device == tensor::Device::Cpu) << what;
    IS_CHECK(w.rank == rank) << what << " rank " << w.rank;
    IS_CHECK(w.dtype == DType::F32 || w.dtype == DType::BF16 || w.dtype == DType::F16 ||
             tensor::is_block_quantized(w.dtype))
        << what << " dtype " << tensor::dtype_name(w.dtype);
    IS_CHECK(!tensor::is_block_quantized(w.dtype) ||
             w.shape[w.rank - 1] % tensor::dtype_block_elems(w.dtype) == 0)
        << what << " rows of " << w.shape[w.rank - 1] << " are not whole blocks";
}

// The CPU's pages: f32, or FP8 with their scales.
DType pages_dtype(const tensor::KvPages& pages) {
    return pages.k.dtype == DType::F8_E4M3 ? DType::F8_E4M3 : DType::F32;
}

PagedKvView kv_view(const tensor::KvPages& pages) {
    const DType dtype = pages_dtype(pages);
    check_host(pages.k, dtype, 4, "k pages");
    check_host(pages.v, dtype, 4, "v pages");
    for (int i = 0; i < 4; ++i) IS_CHECK_EQ(pages.k.shape[i], pages.v.shape[i]);
    PagedKvView view{pages.k.data,     pages.v.data,     pages.k.shape[0],
                     pages.k.shape[1], pages.k.shape[2], pages.k.shape[3]};
    if (dtype == DType::F8_E4M3) {
        check_host(pages.k_scale, DType::F32, 1, "k scales");
        check_host(pages.v_scale, DType::F32, 1, "v scales");
        view.k_scale = pages.k_scale.as<const float>();
        view.v_scale = pages.v_scale.as<const float>();
    }
    return view;
}

}  // namespace

CpuBackend::CpuBackend(CpuBackendOptions options)
    : options_(options),
      ggml_(options.arithmetic == Arithmetic::Ggml),
      isa_(options.ggml_isa.value_or(host_ggml_isa())) {
    if (options.num_threads > 0) omp_set_num_threads(options.num_threads);
    // sgemm runs inside our OpenMP team (see matmul.cpp), so OpenBLAS itself stays serial.
    // This is a process-wide OpenBLAS setting; the CPU backend is its only user.
    openblas_set_num_threads(1);
}

Result<tensor::Buffer> CpuBackend::allocate(std::size_t bytes) {
    const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (p == nullptr) {
        return make_error("cpu backend: out of memory allocating " + std::to_string(bytes) +
                          " bytes");
    }
    return tensor::Buffer(this, p, bytes, tensor::Device::Cpu);
}

void CpuBackend::free_buffer(void* data, std::size_t) { std::free(data); }

void CpuBackend::copy_from_host(Tensor dst, const void* src, std::size_t bytes) {
    IS_CHECK(bytes <= dst.nbytes()) << bytes << " bytes into " << dst.nbytes();
    if (bytes > 0) std::memcpy(dst.data, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const Tensor& src, std::size_t bytes) {
    IS_CHECK(bytes <= src.nbytes()) << bytes << " bytes from " << src.nbytes();
    if (bytes > 0) std::memcpy(dst, src.data, bytes);
}

void CpuBackend::fill_zero(Tensor t) {
    if (t.nbytes() > 0) std::memset(t.data, 0, t.nbytes());
}

Result<tensor::DeviceWeight> CpuBackend::upload_weight(const Tensor& host) {
    IS_CHECK(host.device == tensor::Device::Cpu) << "weights arrive in host memory";
    IS_CHECK(host.rank >= 1 && host.rank <= 2) << "weight rank " << host.rank;
    if (options_.arithmetic == Arithmetic::Auto && tensor::is_block_quantized(host.dtype)) {
        ggml_ = true;
    }
    // Matrices keep their stored precision (block-quantized ones their blocks); everything else
    // is read as f32 by the kernels.
    DType dtype = host.rank == 2 ? host.dtype : DType::F32;
    if (dtype == DType::F32 && host.rank == 2 && options_.narrow_f32_matrices) {
        dtype = DType::BF16;
    }
    tensor::Tensor shaped = host;
    shaped.dtype = dtype;
    const std::size_t bytes = shaped.nbytes();
    tensor::DeviceWeight w;
    w.storage = IS_TRY(allocate(bytes));
    w.tensor = host;
    w.tensor.data = w.storage.data();
    w.tensor.dtype = dtype;
    if (dtype == host.dtype) {
        std::memcpy(w.tensor.data, host.data, bytes);
    } else if (dtype == DType::BF16) {
        tensor::convert_from_f32(DType::BF16, host.as<float>(), w.tensor.data,
                                 static_cast<std::size_t>(host.numel()));
    } else {
        tensor::convert_to_f32(host.dtype, host.data, w.tensor.as<float>(),
                               static_cast<std::size_t>(host.numel()));
    }
    return w;
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
    check_weight(table, 2, "embedding table");
    check_host(ids, DType::I32, 1, "ids");
    check_host(out, DType::F32, 2, "embedding out");
    IS_CHECK(out.shape[0] == ids.shape[0] && out.shape[1] == table.shape[1]) << "embedding shape";
    cpu::embedding(table.data, table.dtype, table.shape[0], table.shape[1], ids.as<std::int32_t>(),
                   ids.shape[0], out.as<float>());
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor out) {
    check_host(x, DType::F32, 2, "gather x");
    check_host(rows, DType::I32, 1, "gather rows");
    check_host(out, DType::F32, 2, "gather out");
    IS_CHECK(out.shape[0] == rows.shape[0] && out.shape[1] == x.shape[1]) << "gather shape";
    cpu::gather_rows(x.as<float>(), x.shape[0], x.shape[1], rows.as<std::int32_t>(), rows.shape[0],
                     out.as<float>());
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) {
    check_host(x, DType::F32, 2, "rms_norm x");
    check_host(weight, DType::F32, 1, "rms_norm weight");
    check_host(out, DType::F32, 2, "rms_norm out");
    IS_CHECK(x.shape == out.shape && weight.shape[0] == x.shape[1]) << "rms_norm shape";
    if (ggml_) {
        cpu::rms_norm_ggml(x.as<float>(), weight.as<float>(), eps, x.shape[0], x.shape[1],
                           out.as<float>());
        return;
    }
    cpu::rms_norm(x.as<float>(), weight.as<float>(), eps, x.shape[0], x.shape[1], out.as<float>());
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                            Tensor out) {
    check_host(x, DType::F32, 2, "layer_norm x");
    check_host(weight, DType::F32, 1, "layer_norm weight");
    check_host(bias, DType::F32, 1, "layer_norm bias");
    check_host(out, DType::F32, 2, "layer_norm out");
    IS_CHECK(x.shape == out.shape && weight.shape[0] == x.shape[1] && bias.shape[0] == x.shape[1])
        << "layer_norm shape";
    cpu::layer_norm(x.as<float>(), weight.as<float>(), bias.as<float>(), eps, x.shape[0],
                    x.shape[1], out.as<float>());
}

void CpuBackend::convert(const Tensor& src, Tensor dst) {
    check_on_host(src, "convert src");
    check_on_host(dst, "convert dst");
    IS_CHECK(src.numel() == dst.numel()) << "convert sizes";
    const auto count = static_cast<std::size_t>(src.numel());
    if (src.dtype == dst.dtype) {
        std::memmove(dst.data, src.data, src.nbytes());
    } else if (src.dtype == DType::F32) {
        tensor::convert_from_f32(dst.dtype, src.as<float>(), dst.data, count);
    } else {
        IS_CHECK(dst.dtype == DType::F32) << "convert " << tensor::dtype_name(src.dtype) << " to "
                                          << tensor::dtype_name(dst.dtype);
        tensor::convert_to_f32(src.dtype, src.data, dst.as<float>(), count);
    }
}

void CpuBackend::gelu(Tensor x) {
    check_on_host(x, "gelu x");
    IS_CHECK(x.dtype == DType::F32) << "gelu dtype " << tensor::dtype_name(x.dtype);
    cpu::gelu_erf(x.as<float>(), x.numel());
}

void CpuBackend::sequence_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const tensor::SequenceAttentionArgs& args, Tensor out) {
    check_host(q, DType::F32, 3, "sequence_attention q");
    check_host(k, DType::F32, 3, "sequence_attention k");
    check_host(v, DType::F32, 3, "sequence_attention v");
    check_host(out, DType::F32, 3, "sequence_attention out");
    IS_CHECK(q.shape == k.shape && q.shape == v.shape && q.shape == out.shape)
        << "sequence_attention shape";
    const std::int32_t* indptr = args.host_seq_indptr;
    IS_CHECK(indptr != nullptr && args.num_seqs >= 0 && indptr[0] == 0 &&
             indptr[args.num_seqs] == q.shape[0])
        << "sequence_attention seq_indptr";
    for (int s = 0; s < args.num_seqs; ++s) {
        IS_CHECK(indptr[s + 1] >= indptr[s] && indptr[s + 1] - indptr[s] <= args.max_seq_len)
            << "sequence_attention sequence " << s;
    }
    cpu::sequence_attention(q.as<float>(), k.as<float>(), v.as<float>(), q.shape[1], q.shape[2],
                            indptr, args.num_seqs, args.scale, out.as<float>());
}

void CpuBackend::linear(const tensor::LinearArgs& args) {
    if (args.epilogue != tensor::LinearEpilogue::None) {
        run_unfused(args);
        return;
    }
    const Tensor& x = args.x;
    check_host(x, DType::F32, 2, "linear x");
    for (const auto& [w, bias, y] : args.targets) {
        check_weight(w, 2, "linear w");
        check_host(y, DType::F32, 2, "linear y");
        IS_CHECK(x.shape[1] == w.shape[1] && y.shape[0] == x.shape[0] && y.shape[1] == w.shape[0])
            << "linear shapes x [" << x.shape[0] << "," << x.shape[1] << "] w [" << w.shape[0]
            << "," << w.shape[1] << "] y [" << y.shape[0] << "," << y.shape[1] << "]";
        const float* b = nullptr;
        if (!bias.empty()) {
            check_host(bias, DType::F32, 1, "linear bias");
            IS_CHECK_EQ(bias.shape[0], w.shape[0]);
            b = bias.as<float>();
        }
        if (tensor::is_block_quantized(w.dtype)) {
            cpu::linear_quantized(x.as<float>(), x.shape[0], x.shape[1], w.data, w.dtype,
                                  w.shape[0], b, y.as<float>(), quant_scratch_);
        } else {
            cpu::linear(x.as<float>(), x.shape[0], x.shape[1], w.data, w.dtype, w.shape[0], b,
                        y.as<float>(), convert_scratch_);
        }
    }
}

void CpuBackend::add(Tensor x, const Tensor& y) {
    IS_CHECK(x.dtype == DType::F32 && y.dtype == DType::F32 && x.numel() == y.numel()) << "add";
    cpu::add(x.as<float>(), y.as<float>(), x.numel());
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, Tensor out) {
    IS_CHECK(gate.dtype == DType::F32 && up.dtype == DType::F32 && out.dtype == DType::F32);
    IS_CHECK(gate.numel() == up.numel() && gate.numel() == out.numel()) << "swiglu";
    if (ggml_) {
        cpu::swiglu_ggml(gate.as<float>(), up.as<float>(), gate.numel(), out.as<float>(), isa_);
        return;
    }
    cpu::swiglu(gate.as<float>(), up.as<float>(), gate.numel(), out.as<float>());
}

void CpuBackend::geglu(const Tensor& gate, const Tensor& up, Tensor out) {
    IS_CHECK(gate.dtype == DType::F32 && up.dtype == DType::F32 && out.dtype == DType::F32);
    IS_CHECK(gate.numel() == up.numel() && gate.numel() == out.numel()) << "geglu";
    if (ggml_) {
        cpu::geglu_ggml(gate.as<float>(), up.as<float>(), gate.numel(), out.as<float>());
        return;
    }
    cpu::geglu(gate.as<float>(), up.as<float>(), gate.numel(), out.as<float>());
}

void CpuBackend::scale(Tensor x, float factor) {
    check_on_host(x, "scale x");
    IS_CHECK(x.dtype == DType::F32) << "scale dtype " << tensor::dtype_name(x.dtype);
    cpu::scale(x.as<float>(), x.numel(), factor);
}

void CpuBackend::rope(const tensor::RopeArgs& args) {
    if (!args.pages.k.empty() || args.attention != nullptr) {
        run_unfused(args);
        return;
    }
    const Tensor& positions = args.positions;
    const tensor::RopeTables& tables = args.tables;
    const auto rotate = [&](const Tensor& x) {
        check_host(x, DType::F32, 3, "rope x");
        check_host(positions, DType::I32, 1, "rope positions");
        check_host(tables.cos, DType::F32, 2, "rope cos");
        check_host(tables.sin, DType::F32, 2, "rope sin");
        IS_CHECK(positions.shape[0] == x.shape[0] && tables.cos.shape[1] * 2 == x.shape[2] &&
                 tables.cos.shape == tables.sin.shape)
            << "rope shapes";
        cpu::rope(x.as<float>(), x.shape[0], x.shape[1], x.shape[2], positions.as<std::int32_t>(),
                  tables.cos.as<float>(), tables.sin.as<float>(), tables.cos.shape[0], ggml_);
    };
    rotate(args.q);
    if (!args.k.empty()) rotate(args.k);
}

void CpuBackend::write_kv(const Tensor& k, const Tensor& v, const Tensor& slots,
                          const tensor::KvPages& pages) {
    const PagedKvView view = kv_view(pages);
    tensor::check_write_kv_args(k, v, slots, pages, DType::F32, pages_dtype(pages));
    check_on_host(k, "write_kv k");
    check_on_host(v, "write_kv v");
    check_on_host(slots, "write_kv slots");
    cpu::write_kv(k.as<float>(), v.as<float>(), k.shape[0], slots.as<std::int32_t>(), view);
}

void CpuBackend::paged_attention(const Tensor& q, const tensor::KvPages& pages,
                                 const tensor::PagedAttentionArgs& args, Tensor out) {
    const PagedKvView view = kv_view(pages);
    tensor::check_paged_attention_args(q, pages, args, out, DType::F32, pages_dtype(pages));
    check_on_host(q, "attention q");
    check_on_host(out, "attention out");
    check_on_host(args.qo_indptr, "qo_indptr");
    check_on_host(args.indptr, "indptr");
    check_on_host(args.indices, "indices");
    check_on_host(args.last_page_len, "last_page_len");
    AttentionMeta meta{args.qo_indptr.as<std::int32_t>(),
                       args.indptr.as<std::int32_t>(),
                       args.indices.as<std::int32_t>(),
                       args.last_page_len.as<std::int32_t>(),
                       args.num_seqs,
                       args.scale,
                       args.qk_ggml_interleaved,
                       args.window};
    if (ggml_ && !view.fp8()) {  // llama.cpp has no FP8 cache to match
        cpu::paged_attention_ggml(q.as<float>(), q.shape[0], q.shape[1], view, meta,
                                  out.as<float>(), isa_);
        return;
    }
    cpu::paged_attention(q.as<float>(), q.shape[0], q.shape[1], view, meta, out.as<float>());
}

void CpuBackend::argmax(const Tensor& logits, const Tensor& allowed, Tensor ids) {
    check_host(logits, DType::F32, 2, "argmax logits");
    check_host(ids, DType::I32, 1, "argmax ids");
    IS_CHECK_EQ(ids.shape[0], logits.shape[0]);
    const std::int64_t vocab = logits.shape[1], words = (vocab + 31) / 32;
    const bool masked = !allowed.empty();
    if (masked) {
        check_host(allowed, DType::I32, 2, "argmax allowed");
        IS_CHECK(allowed.shape[0] == logits.shape[0] && allowed.shape[1] == words)
            << "argmax: the mask is not [rows, (vocab + 31) / 32]";
    }
    for (std::int64_t r = 0; r < logits.shape[0]; ++r) {
        const float* row = logits.as<float>() + r * vocab;
        const auto* bits = masked ? allowed.as<std::uint32_t>() + r * words : nullptr;
        std::int64_t best = -1;
        bool any = !masked;
        for (std::int64_t i = 0; i < vocab; ++i) {
            if (masked && ((bits[i / 32] >> (i % 32)) & 1u) == 0) continue;
            any = true;
            // Strict >: the first maximum wins; NaN compares false and never wins.
            if (!std::isnan(row[i]) && (best < 0 || row[i] > row[best])) best = i;
        }
        ids.as<std::int32_t>()[r] = static_cast<std::int32_t>(!any ? -1 : best < 0 ? 0 : best);
    }
}

}  // namespace inferscale::backends::cpu
