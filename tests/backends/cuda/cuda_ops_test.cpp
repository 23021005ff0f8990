// CUDA weight upload (f32/f16/bf16; GGUF blocks: cuda_quant_linear_test), element-wise, norm,
// RoPE, gather, linear, KV write and argmax ops against the CPU backend fed the same bf16-rounded
// inputs; fused ops against their parts.

#include <algorithm>
#include <numeric>
#include <tuple>
#include <utility>

#include "cuda_test_util.h"

namespace inferscale::cuda_test {
namespace {

class CudaOpsTest : public CudaTest {};

TEST_F(CudaOpsTest, FactoryReportsBackend) {
    auto be = backends::cuda::make_cuda_backend(0);
    ASSERT_TRUE(be.ok()) << be.error().message;
    EXPECT_EQ((*be)->name(), "cuda");
    EXPECT_EQ((*be)->activation_dtype(), DType::BF16);
    EXPECT_EQ((*be)->kv_dtype(), DType::BF16);
    EXPECT_FALSE(backends::cuda::make_cuda_backend(1 << 20).ok());
}

TEST_F(CudaOpsTest, UploadWeightConvertsToBf16) {
    for (DType from : {DType::F32, DType::F16, DType::BF16}) {
        std::vector<float> w = random_bf16(37 * 11, rng_);  // bf16-exact, so f16 is close
        std::vector<std::uint16_t> narrow(w.size());
        Tensor host = host_view(w, {37, 11});
        if (from != DType::F32) {
            tensor::convert_from_f32(from, w.data(), narrow.data(), w.size());
            host = Tensor(narrow.data(), from, {37, 11});
        }
        auto dw = gpu_->upload_weight(host);
        ASSERT_TRUE(dw.ok()) << dw.error().message;
        EXPECT_EQ(dw->tensor.dtype, DType::BF16);
        EXPECT_EQ(dw->tensor.device, tensor::Device::Cuda);
        EXPECT_LT(rel_error(download(*gpu_, dw->tensor), w), from == DType::F16 ? 1e-2 : 1e-7);
    }
}

TEST_F(CudaOpsTest, EmbeddingAndGatherRows) {
    const std::int64_t vocab = 50, hidden = 96, n = 13;
    std::vector<float> table = random_bf16(vocab * hidden, rng_);
    std::vector<std::int32_t> ids(n);
    for (auto& id : ids) id = static_cast<std::int32_t>(rng_() % vocab);
    auto dw = gpu_->upload_weight(host_view(table, {vocab, hidden}));
    ASSERT_TRUE(dw.ok());
    DeviceTensor d_ids = device_ints(*gpu_, ids);
    std::vector<float> ref(n * hidden);
    cpu_.embedding(host_view(table, {vocab, hidden}), host_view(ids, {n}),
                   host_view(ref, {n, hidden}));
    for (DType out_dtype : {DType::BF16, DType::F32}) {
        DeviceTensor out = device_empty(*gpu_, out_dtype, {n, hidden});
        poison(*gpu_, out.tensor);
        gpu_->embedding(dw->tensor, d_ids.tensor, out.tensor);
        EXPECT_EQ(rel_error(download(*gpu_, out.tensor), ref), 0.0);
    }

    // gather_rows on bf16 rows (16-byte path) and on odd-width f32 rows (4-byte path).
    for (auto [k, dtype] :
         {std::pair{std::int64_t{72}, DType::BF16}, std::pair{std::int64_t{5}, DType::F32}}) {
        const std::int64_t rows_in = 20, m = 9;
        std::vector<float> x = random_bf16(rows_in * k, rng_);
        std::vector<std::int32_t> rows(m);
        for (auto& r : rows) r = static_cast<std::int32_t>(rng_() % rows_in);
        DeviceTensor dx = device_from(*gpu_, x, dtype, {rows_in, k});
        DeviceTensor dr = device_ints(*gpu_, rows);
        DeviceTensor out = device_empty(*gpu_, dtype, {m, k});
        poison(*gpu_, out.tensor);
        gpu_->gather_rows(dx.tensor, dr.tensor, out.tensor);
        std::vector<float> g(m * k);
        cpu_.gather_rows(host_view(x, {rows_in, k}), host_view(rows, {m}), host_view(g, {m, k}));
        EXPECT_EQ(rel_error(download(*gpu_, out.tensor), g), 0.0);
    }
}

TEST_F(CudaOpsTest, RmsNormMatchesCpu) {
    // 16-byte vector kernel at 1, 2 and 4 groups per thread; 100 and 20004 take the scalar one.
    for (auto [hidden, n] : {std::pair<std::int64_t, std::int64_t>{64, 7}, {896, 7}, {4096, 7},
                             {4096, 1}, {4096, 64}, {100, 3}, {8200, 2}, {20000, 3}, {20004, 2}}) {
        std::vector<float> x = random_bf16(n * hidden, rng_, 3.0f), w = random_bf16(hidden, rng_);
        auto dw = gpu_->upload_weight(host_view(w, {hidden}));
        ASSERT_TRUE(dw.ok());
        std::vector<float> ref(n * hidden);
        cpu_.rms_norm(host_view(x, {n, hidden}), host_view(w, {hidden}), 1e-6f,
                      host_view(ref, {n, hidden}));
        for (DType dtype : {DType::BF16, DType::F32}) {
            DeviceTensor dx = device_from(*gpu_, x, dtype, {n, hidden});
            DeviceTensor out = device_empty(*gpu_, dtype, {n, hidden});
            poison(*gpu_, out.tensor);
            gpu_->rms_norm(dx.tensor, dw->tensor, 1e-6f, out.tensor);
            EXPECT_LT(rel_error(download(*gpu_, out.tensor), ref), kBf16Tolerance)
                << hidden << "x" << n;
            gpu_->rms_norm(dx.tensor, dw->tensor, 1e-6f, dx.tensor);  // in place
            EXPECT_EQ(download(*gpu_, dx.tensor), download(*gpu_, out.tensor));
        }
    }
}

// The fused residual add + norm equals add followed by rms_norm on the same backend bit for bit
// (both the stored sum and the normalized rows), with out aliasing y as the model calls it, and
// the CPU's add + rms_norm within bf16 tolerance. Same vector/scalar kernel split as above.
TEST_F(CudaOpsTest, AddRmsNormEqualsAddThenRmsNorm) {
    for (auto [hidden, n] : {std::pair<std::int64_t, std::int64_t>{4096, 1}, {4096, 33}, {896, 7},
                             {8200, 2}, {100, 3}}) {
        std::vector<float> x = random_bf16(n * hidden, rng_, 3.0f);
        std::vector<float> y = random_bf16(n * hidden, rng_, 3.0f), w = random_bf16(hidden, rng_);
        auto dw = gpu_->upload_weight(host_view(w, {hidden}));
        ASSERT_TRUE(dw.ok());
        std::vector<float> sum = x, ref(n * hidden);
        cpu_.add(host_view(sum, {n, hidden}), host_view(y, {n, hidden}));
        cpu_.rms_norm(host_view(sum, {n, hidden}), host_view(w, {hidden}), 1e-6f,
                      host_view(ref, {n, hidden}));
        for (DType dtype : {DType::BF16, DType::F32}) {
            DeviceTensor ux = device_from(*gpu_, x, dtype, {n, hidden});
            DeviceTensor uy = device_from(*gpu_, y, dtype, {n, hidden});
            DeviceTensor unfused = device_empty(*gpu_, dtype, {n, hidden});
            gpu_->add(ux.tensor, uy.tensor);
            gpu_->rms_norm(ux.tensor, dw->tensor, 1e-6f, unfused.tensor);

            DeviceTensor fx = device_from(*gpu_, x, dtype, {n, hidden});
            DeviceTensor fy = device_from(*gpu_, y, dtype, {n, hidden});
            gpu_->add_rms_norm(fx.tensor, fy.tensor, dw->tensor, 1e-6f, fy.tensor);
            EXPECT_EQ(download(*gpu_, fx.tensor), download(*gpu_, ux.tensor)) << hidden << "x" << n;
            EXPECT_EQ(download(*gpu_, fy.tensor), download(*gpu_, unfused.tensor))
                << hidden << "x" << n;
            EXPECT_LT(rel_error(download(*gpu_, fy.tensor), ref), kBf16Tolerance)
                << hidden << "x" << n;
        }
    }
}

TEST_F(CudaOpsTest, AddScaleAndGatedActivationsMatchCpu) {
  using GatedOp = void (tensor::Backend::*)(const Tensor&, const Tensor&, Tensor);
  // 5 x 1000 and 1 x 4096 take the 8-wide vector kernels, 3 x 37 the scalar ones.
  for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{5, 1000}, {1, 4096}, {3, 37}}) {
    std::vector<float> a = random_bf16(n * k, rng_, 2.0f), b = random_bf16(n * k, rng_, 2.0f);
    std::vector<float> sum = a, scaled = a;
    cpu_.add(host_view(sum, {n, k}), host_view(b, {n, k}));
    cpu_.scale(host_view(scaled, {n, k}), 25.3f);
    for (GatedOp op : {GatedOp{&tensor::Backend::swiglu}, GatedOp{&tensor::Backend::geglu}}) {
      std::vector<float> act(n * k);
      (cpu_.*op)(host_view(a, {n, k}), host_view(b, {n, k}), host_view(act, {n, k}));
      for (DType dtype : {DType::BF16, DType::F32}) {
        const double tol = dtype == DType::F32 ? 1e-6 : kBf16Tolerance;
        DeviceTensor da = device_from(*gpu_, a, dtype, {n, k});
        DeviceTensor db = device_from(*gpu_, b, dtype, {n, k});
        DeviceTensor out = device_empty(*gpu_, dtype, {n, k});
        poison(*gpu_, out.tensor);
        ((*gpu_).*op)(da.tensor, db.tensor, out.tensor);
        EXPECT_LT(rel_error(download(*gpu_, out.tensor), act), tol);
        ((*gpu_).*op)(da.tensor, db.tensor, da.tensor);  // out aliasing gate, as the model does
        EXPECT_LT(rel_error(download(*gpu_, da.tensor), act), tol);
      }
    }
    for (DType dtype : {DType::BF16, DType::F32}) {
        const double tol = dtype == DType::F32 ? 1e-6 : kBf16Tolerance;
        DeviceTensor db = device_from(*gpu_, b, dtype, {n, k});
        DeviceTensor dx = device_from(*gpu_, a, dtype, {n, k});
        gpu_->add(dx.tensor, db.tensor);
        EXPECT_LT(rel_error(download(*gpu_, dx.tensor), sum), tol);
        DeviceTensor ds = device_from(*gpu_, a, dtype, {n, k});
        gpu_->scale(ds.tensor, 25.3f);
        EXPECT_LT(rel_error(download(*gpu_, ds.tensor), scaled), tol);
    }
  }
}

TEST_F(CudaOpsTest, RopeMatchesCpu) {
  // d 128 and 80 take the 8-pair vector kernel, 20 (10 pairs) the scalar one.
  for (auto [n, heads, d] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{9, 4, 128},
                             {1, 32, 128}, {5, 3, 80}, {4, 2, 20}}) {
    const std::int64_t max_pos = 512;
    std::vector<float> cos_t(max_pos * d / 2), sin_t(max_pos * d / 2);
    for (std::int64_t p = 0; p < max_pos; ++p)
        for (std::int64_t i = 0; i < d / 2; ++i) {
            const double angle = p * std::pow(10000.0, -2.0 * i / d);
            cos_t[p * d / 2 + i] = static_cast<float>(std::cos(angle));
            sin_t[p * d / 2 + i] = static_cast<float>(std::sin(angle));
        }
    std::vector<std::int32_t> pos(n);
    for (auto& p : pos) p = static_cast<std::int32_t>(rng_() % max_pos);
    pos[0] = 0;
    pos[1] = max_pos - 1;
    std::vector<float> x = random_bf16(n * heads * d, rng_), ref = x;
    cpu_.rope({.q = host_view(ref, {n, heads, d}),
               .positions = host_view(pos, {n}),
               .tables = {host_view(cos_t, {max_pos, d / 2}), host_view(sin_t, {max_pos, d / 2})}});
    DeviceTensor dcos = device_from(*gpu_, cos_t, DType::F32, {max_pos, d / 2});
    DeviceTensor dsin = device_from(*gpu_, sin_t, DType::F32, {max_pos, d / 2});
    DeviceTensor dpos = device_ints(*gpu_, pos);
    // q and k rotated in one launch: each equals its own rope call bit for bit (k has another
    // head count, as under GQA).
    const std::int64_t k_heads = heads > 1 ? heads / 2 : 3;
    const std::vector<float> k = random_bf16(n * k_heads * d, rng_);
    const tensor::RopeTables tables{dcos.tensor, dsin.tensor};
    for (DType dtype : {DType::BF16, DType::F32}) {
        DeviceTensor dx = device_from(*gpu_, x, dtype, {n, heads, d});
        gpu_->rope({.q = dx.tensor, .positions = dpos.tensor, .tables = tables});
        EXPECT_LT(rel_error(download(*gpu_, dx.tensor), ref),
                  dtype == DType::F32 ? 1e-6 : kBf16Tolerance)
            << n << "x" << heads << "x" << d;
        DeviceTensor dk = device_from(*gpu_, k, dtype, {n, k_heads, d});
        gpu_->rope({.q = dk.tensor, .positions = dpos.tensor, .tables = tables});
        DeviceTensor pq = device_from(*gpu_, x, dtype, {n, heads, d});
        DeviceTensor pk = device_from(*gpu_, k, dtype, {n, k_heads, d});
        gpu_->rope({pq.tensor, pk.tensor, dpos.tensor, tables});
        EXPECT_EQ(download(*gpu_, pq.tensor), download(*gpu_, dx.tensor))
            << n << "x" << heads << "x" << d;
        EXPECT_EQ(download(*gpu_, pk.tensor), download(*gpu_, dk.tensor))
            << n << "x" << k_heads << "x" << d;
    }
  }
}

// Both scans: 16-byte loads (vocab a multiple of 4) and single floats (32003).
TEST_F(CudaOpsTest, ArgmaxMatchesMaxElement) {
    for (const std::int64_t vocab : {std::int64_t{32003}, std::int64_t{32000}}) {
        const std::int64_t rows = 6;
        std::vector<float> logits = random_bf16(rows * vocab, rng_, 4.0f);
        logits[2 * vocab + 7] = 100.0f;          // a clear winner early in a row
        logits[3 * vocab + vocab - 1] = 100.0f;  // and at the very end
        logits[4 * vocab + 10] = 50.0f;          // a tie: the first one wins
        logits[4 * vocab + 20000] = 50.0f;
        logits[5 * vocab + 13] = 60.0f;  // a tie inside one 16-byte load
        logits[5 * vocab + 14] = 60.0f;
        DeviceTensor dl = device_from(*gpu_, logits, DType::F32, {rows, vocab});
        DeviceTensor ids = device_empty(*gpu_, DType::I32, {rows});
        poison(*gpu_, ids.tensor);
        gpu_->argmax(dl.tensor, Tensor(), ids.tensor);
        std::vector<std::int32_t> got(rows);
        gpu_->copy_to_host(got.data(), ids.tensor, rows * 4);
        gpu_->synchronize();
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto begin = logits.begin() + r * vocab;
            EXPECT_EQ(got[r], std::max_element(begin, begin + vocab) - begin)
                << "vocab " << vocab << " row " << r;
        }
    }
}

// Constrained decoding: the masked argmax against the largest allowed logit found on the host,
// at both scans, with a row that allows nothing (-1) and one that allows a single token.
TEST_F(CudaOpsTest, MaskedArgmaxTakesTheBestAllowedToken) {
    for (const std::int64_t vocab : {std::int64_t{32003}, std::int64_t{32000}}) {
        const std::int64_t rows = 5, words = (vocab + 31) / 32;
        const std::vector<float> logits = random_bf16(rows * vocab, rng_, 4.0f);
        std::vector<std::uint32_t> allowed(rows * words);
        std::uniform_int_distribution<std::uint32_t> bits;
        for (std::uint32_t& w : allowed) w = bits(rng_) & bits(rng_);  // about a quarter set
        std::fill_n(allowed.begin() + 2 * words, words, 0u);  // row 2: none
        std::fill_n(allowed.begin() + 3 * words, words, 0u);  // row 3: the last token only
        allowed[3 * words + (vocab - 1) / 32] = 1u << ((vocab - 1) % 32);
        std::fill_n(allowed.begin() + 4 * words, words, ~0u);  // row 4: all
        DeviceTensor dl = device_from(*gpu_, logits, DType::F32, {rows, vocab});
        DeviceTensor dm = device_empty(*gpu_, DType::I32, {rows, words});
        gpu_->copy_from_host(dm.tensor, allowed.data(), allowed.size() * 4);
        DeviceTensor ids = device_empty(*gpu_, DType::I32, {rows});
        // Not poison(): its -1 is the answer of row 2.
        ASSERT_EQ(cudaMemsetAsync(ids.tensor.data, 0x7f, rows * 4, gpu_->stream()), cudaSuccess);
        gpu_->argmax(dl.tensor, dm.tensor, ids.tensor);
        std::vector<std::int32_t> got(rows);
        gpu_->copy_to_host(got.data(), ids.tensor, rows * 4);
        gpu_->synchronize();
        for (std::int64_t r = 0; r < rows; ++r) {
            std::int64_t want = -1;
            for (std::int64_t t = 0; t < vocab; ++t) {
                if (((allowed[r * words + t / 32] >> (t % 32)) & 1u) == 0) continue;
                if (want < 0 || logits[r * vocab + t] > logits[r * vocab + want]) want = t;
            }
            EXPECT_EQ(got[r], want) << "vocab " << vocab << " row " << r;
        }
    }
}

TEST_F(CudaOpsTest, WriteKvScattersToSlots) {
    const std::int64_t blocks = 10, bs = 16, kvh = 2, d = 64, n = 23;
    const std::int64_t page_elems = blocks * bs * kvh * d;
    std::vector<float> k_pages = random_bf16(page_elems, rng_),
                       v_pages = random_bf16(page_elems, rng_);
    std::vector<float> k = random_bf16(n * kvh * d, rng_), v = random_bf16(n * kvh * d, rng_);
    std::vector<std::int32_t> all(blocks * bs);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng_);
    std::vector<std::int32_t> slots(all.begin(), all.begin() + n);
    DeviceTensor dk = device_from(*gpu_, k_pages, DType::BF16, {blocks, bs, kvh, d});
    DeviceTensor dv = device_from(*gpu_, v_pages, DType::BF16, {blocks, bs, kvh, d});
    DeviceTensor k_new = device_from(*gpu_, k, DType::BF16, {n, kvh, d});
    DeviceTensor v_new = device_from(*gpu_, v, DType::BF16, {n, kvh, d});
    DeviceTensor dslots = device_ints(*gpu_, slots);
    gpu_->write_kv(k_new.tensor, v_new.tensor, dslots.tensor, {dk.tensor, dv.tensor});
    cpu_.write_kv(host_view(k, {n, kvh, d}), host_view(v, {n, kvh, d}), host_view(slots, {n}),
                  {host_view(k_pages, {blocks, bs, kvh, d}),
                   host_view(v_pages, {blocks, bs, kvh, d})});
    EXPECT_EQ(download(*gpu_, dk.tensor), k_pages);
    EXPECT_EQ(download(*gpu_, dv.tensor), v_pages);
}

// The fused rope + KV write equals the rotation then write_kv bit for bit: rotated q and k in
// place, rotated k and v in the pages; padding rows (slot -1) write no page. d 128 takes the fused
// kernel; d 20 (10 pairs) falls back to the two ops.
TEST_F(CudaOpsTest, RopeWriteKvEqualsRopeThenWriteKv) {
    for (auto [n, heads, kvh, d] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{1, 32, 8, 128},
          {7, 4, 2, 128}, {5, 4, 4, 64}, {3, 2, 1, 20}}) {
        const std::int64_t blocks = 6, bs = 16, max_pos = 256;
        std::vector<float> cos_t(max_pos * d / 2), sin_t(max_pos * d / 2);
        for (std::size_t i = 0; i < cos_t.size(); ++i) {
            cos_t[i] = std::cos(0.01f * static_cast<float>(i));
            sin_t[i] = std::sin(0.01f * static_cast<float>(i));
        }
        std::vector<std::int32_t> pos(n), all(blocks * bs);
        for (auto& p : pos) p = static_cast<std::int32_t>(rng_() % max_pos);
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng_);
        std::vector<std::int32_t> slots(all.begin(), all.begin() + n);
        if (n > 1) slots[1] = -1;  // a padding row
        const std::vector<float> q = random_bf16(n * heads * d, rng_),
                                 k = random_bf16(n * kvh * d, rng_),
                                 v = random_bf16(n * kvh * d, rng_);
        const std::vector<float> k_pages = random_bf16(blocks * bs * kvh * d, rng_),
                                 v_pages = random_bf16(blocks * bs * kvh * d, rng_);
        DeviceTensor dcos = device_from(*gpu_, cos_t, DType::F32, {max_pos, d / 2});
        DeviceTensor dsin = device_from(*gpu_, sin_t, DType::F32, {max_pos, d / 2});
        DeviceTensor dpos = device_ints(*gpu_, pos);
        DeviceTensor dslots = device_ints(*gpu_, slots);
        std::vector<std::vector<float>> results[2];
        for (int fused = 0; fused < 2; ++fused) {
            DeviceTensor dq = device_from(*gpu_, q, DType::BF16, {n, heads, d});
            DeviceTensor dk = device_from(*gpu_, k, DType::BF16, {n, kvh, d});
            DeviceTensor dv = device_from(*gpu_, v, DType::BF16, {n, kvh, d});
            DeviceTensor kp = device_from(*gpu_, k_pages, DType::BF16, {blocks, bs, kvh, d});
            DeviceTensor vp = device_from(*gpu_, v_pages, DType::BF16, {blocks, bs, kvh, d});
            const tensor::RopeTables tables{dcos.tensor, dsin.tensor};
            const tensor::KvPages pages{kp.tensor, vp.tensor};
            if (fused) {
                gpu_->rope(
                    {dq.tensor, dk.tensor, dpos.tensor, tables, dv.tensor, dslots.tensor, pages});
            } else {
                gpu_->rope({dq.tensor, dk.tensor, dpos.tensor, tables});
                gpu_->write_kv(dk.tensor, dv.tensor, dslots.tensor, pages);
            }
            for (const DeviceTensor* t : {&dq, &dk, &kp, &vp})
                results[fused].push_back(download(*gpu_, t->tensor));
        }
        EXPECT_EQ(results[1], results[0]) << n << "x" << heads << "/" << kvh << "x" << d;
        EXPECT_NE(results[0][2], k_pages) << "pages were written";
    }
}

}  // namespace
}  // namespace inferscale::cuda_test
