#include "tensor/ops_checks.h"

#include "base/check.h"

namespace inferscale::tensor {
namespace {

void check_arg(const Tensor& t, DType dtype, int rank, const char* what) {
    IS_CHECK(t.dtype == dtype) << what << " dtype " << dtype_name(t.dtype) << " expected "
                               << dtype_name(dtype);
    IS_CHECK(t.rank == rank) << what << " rank " << t.rank << " expected " << rank;
}

void check_pages(const KvPages& pages, DType kv) {
    check_arg(pages.k, kv, 4, "k pages");
    check_arg(pages.v, kv, 4, "v pages");
    IS_CHECK(pages.k.shape == pages.v.shape) << "k and v pages differ in shape";
    if (kv != DType::F8_E4M3) return;
    check_arg(pages.k_scale, DType::F32, 1, "k scales");
    check_arg(pages.v_scale, DType::F32, 1, "v scales");
    IS_CHECK(pages.k_scale.shape[0] == pages.k.shape[2] &&
             pages.v_scale.shape[0] == pages.k.shape[2])
        << "one K and one V scale per KV head";
}

}  // namespace

void check_write_kv_args(const Tensor& k, const Tensor& v, const Tensor& slots,
                         const KvPages& pages, DType activation, DType kv) {
    check_pages(pages, kv);
    check_arg(k, activation, 3, "write_kv k");
    check_arg(v, activation, 3, "write_kv v");
    check_arg(slots, DType::I32, 1, "write_kv slots");
    IS_CHECK(k.shape == v.shape && k.shape[0] == slots.shape[0] &&
             k.shape[1] == pages.k.shape[2] && k.shape[2] == pages.k.shape[3])
        << "write_kv shapes";
}

void check_paged_attention_args(const Tensor& q, const KvPages& pages,
                                const PagedAttentionArgs& args, const Tensor& out,
                                DType activation, DType kv) {
    check_pages(pages, kv);
    check_arg(q, activation, 3, "attention q");
    check_arg(out, activation, 3, "attention out");
    IS_CHECK(q.shape == out.shape && q.shape[2] == pages.k.shape[3]) << "attention shapes";
    check_arg(args.qo_indptr, DType::I32, 1, "qo_indptr");
    check_arg(args.indptr, DType::I32, 1, "indptr");
    check_arg(args.indices, DType::I32, 1, "indices");
    check_arg(args.last_page_len, DType::I32, 1, "last_page_len");
    const int num_seqs = args.num_seqs;
    IS_CHECK(args.qo_indptr.shape[0] >= num_seqs + 1 && args.indptr.shape[0] >= num_seqs + 1 &&
             args.last_page_len.shape[0] >= num_seqs)
        << "attention metadata sizes";
}

void check_linear_epilogue(const LinearArgs& args) {
    const std::span<const LinearTarget> t = args.targets;
    const RopeArgs* r = args.rope;
    const auto views = [](const Tensor& y, const Tensor& heads) {
        return heads.data == y.data && heads.numel() == y.numel();
    };
    const bool gated =
        args.epilogue == LinearEpilogue::SwiGLU || args.epilogue == LinearEpilogue::GeGLU;
    IS_CHECK(!gated || (t.size() == 2 && t[0].y.shape == t[1].y.shape))
        << "a gated epilogue takes a gate and an up target of one shape";
    IS_CHECK(args.epilogue != LinearEpilogue::RopeAttention ||
             (t.size() == 3 && r != nullptr && r->attention != nullptr && views(t[0].y, r->q) &&
              views(t[1].y, r->k) && views(t[2].y, r->v)))
        << "the RopeAttention epilogue takes q, k and v targets whose outputs its rope views, "
           "and an attention";
}

void check_dot_top_k_args(const Tensor& matrix, const Tensor& query, const Tensor& rows,
                          const Tensor& scores, std::int64_t max_k) {
    IS_CHECK(matrix.rank == 2 && (matrix.dtype == DType::F32 || matrix.dtype == DType::F16))
        << "dot_top_k: the matrix is not [n, dim] f32 or f16";
    IS_CHECK(query.rank == 1 && query.dtype == DType::F32 && query.shape[0] == matrix.shape[1])
        << "dot_top_k: the query is not [dim] f32";
    IS_CHECK(rows.rank == 1 && rows.dtype == DType::I32 && scores.rank == 1 &&
             scores.dtype == DType::F32 && rows.shape[0] == scores.shape[0])
        << "dot_top_k: rows and scores are not [k] i32 and [k] f32";
    IS_CHECK(rows.shape[0] >= 1 && rows.shape[0] <= max_k) << "dot_top_k: k " << rows.shape[0];
    IS_CHECK(matrix.shape[1] >= 1) << "dot_top_k: dim 0";
}

}  // namespace inferscale::tensor
