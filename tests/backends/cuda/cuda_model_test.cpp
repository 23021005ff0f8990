// LlamaModel end to end on the CUDA backend against the transformers reference logits of the
// golden fixtures (tests/fixtures/golden, see tools/make_golden_models.py): the whole op chain
// in bf16, a scrambled page table and a prompt spanning many pages. The fixtures' head_dim
// (16, 32) exercises the all-rows attention path; the op tests cover the tensor-core kernels.
//
// Tolerance: bf16 activations and weights through a few layers: relative L2 error of all
// prompt logits <= 5e-2 (fp32 CPU runs match to 2e-5; bf16 rounding is about 4e-3 per op).

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cuda_test_util.h"
#include "kv/kv_storage.h"
#include "model/llama_model.h"
#include "model/model_files.h"

namespace inferscale::cuda_test {
namespace {

std::string golden_dir(const std::string& name) {
    const char* env = std::getenv("INFERSCALE_FIXTURES");
    return std::string(env != nullptr ? env : "tests/fixtures") + "/golden/" + name;
}

class CudaModelTest : public CudaTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(CudaModelTest, PromptLogitsMatchTransformers) {
    const std::string dir = golden_dir(GetParam());
    std::ifstream meta(dir + "/golden.json");
    if (!meta) GTEST_SKIP() << "no fixture " << dir << " (set INFERSCALE_FIXTURES)";
    const nlohmann::json j = nlohmann::json::parse(meta);
    const auto prompt = j.at("prompt").get<std::vector<std::int32_t>>();
    const auto vocab = j.at("logits_shape").at(1).get<std::int64_t>();
    std::vector<float> ref(prompt.size() * vocab);
    std::ifstream bin(dir + "/logits.bin", std::ios::binary);
    bin.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
    ASSERT_TRUE(bin.good());

    auto files = model::load_model_files(dir);
    ASSERT_TRUE(files.ok()) << files.error().message;
    auto m =
        model::LlamaModel::create(*gpu_, files->config, files->weights, {.max_positions = 128});
    ASSERT_TRUE(m.ok()) << m.error().message;
    const std::int64_t bs = 4, num_blocks = 64;
    auto kv = kv::KvStorage::create(*gpu_, m->kv_layout(num_blocks, bs));
    ASSERT_TRUE(kv.ok()) << kv.error().message;
    auto ws = m->create_workspace(model::WorkspaceLimits{
        .max_tokens = 96, .max_seqs = 4, .max_pages = 128, .max_logit_rows = 96});
    ASSERT_TRUE(ws.ok()) << ws.error().message;

    const auto n = static_cast<std::int32_t>(prompt.size());
    std::vector<std::int32_t> pages((n + bs - 1) / bs);
    for (std::size_t i = 0; i < pages.size(); ++i) {
        pages[i] = static_cast<std::int32_t>((i * 37 + 11) % num_blocks);  // scrambled, distinct
    }
    std::vector<std::int32_t> pos(prompt.size());
    std::iota(pos.begin(), pos.end(), 0);
    const model::BatchSequence seq{n, n, pages};
    const model::ForwardBatch batch{prompt, pos, std::span(&seq, 1),
                                    model::LogitsSelection::AllTokens};
    std::vector<float> logits(ref.size());
    const Status st = m->forward(batch, *kv, *ws, logits);
    ASSERT_TRUE(st.ok()) << st.error().message;

    const double err = rel_error(logits, ref);
    int agree = 0;
    for (std::int32_t t = 0; t < n; ++t) {
        const auto row = [&](const std::vector<float>& v) {
            return std::max_element(v.begin() + t * vocab, v.begin() + (t + 1) * vocab) -
                   (v.begin() + t * vocab);
        };
        agree += row(logits) == row(ref);
    }
    std::printf("%s: logits rel error %.3g, argmax agrees on %d of %d rows\n", GetParam().c_str(),
                err, agree, n);
    EXPECT_LT(err, 5e-2);
}

INSTANTIATE_TEST_SUITE_P(Golden, CudaModelTest,
                         ::testing::Values("llama_gqa", "mistral", "qwen2", "llama3_scaled_tied"));

}  // namespace
}  // namespace inferscale::cuda_test
