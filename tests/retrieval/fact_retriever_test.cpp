// FactRetriever's three methods against the pieces they are made of: bm25 is Bm25Index's
// ranking, dense is VectorIndex's ranking of the query's embedding, hybrid is the reciprocal-rank
// fusion of both lists at kFusionDepth with kFusionC; the fast index serves dense searches whose k
// it can take, the exact one the rest.

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "retrieval/fact_retriever.h"
#include "retrieval/letter_embedding.h"
#include "retrieval/rank_fusion.h"
#include "retrieval/vector_index.h"

namespace inferscale::retrieval {
namespace {

constexpr std::size_t kDim = 8;

std::vector<float> letters(std::string_view text) {
    return retrieval::testing::letter_embedding(text, kDim);
}

// A DenseIndex whose k limit is small, to see which index served a search.
class SmallIndex final : public DenseIndex {
  public:
    std::size_t dim() const override { return kDim; }
    std::size_t max_k() const override { return 3; }
    Status put(std::string_view user, FactId id, std::span<const float> v) override {
        return inner.put(user, id, v);
    }
    void erase(FactId id) override { inner.erase(id); }
    void erase_user(std::string_view user) override { inner.erase_user(user); }
    Result<std::vector<Hit>> nearest(std::string_view user, std::span<const float> q,
                                     std::size_t k) override {
        ++searches;
        return inner.nearest(user, q, std::min(k, max_k()));
    }
    VectorIndex inner{kDim};
    int searches = 0;
};

class FactRetrieverTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::array<const char*, 8> texts = {
            "Ann likes green tea",       "Ann plays chess on Sundays", "Ann's cat is called Tom",
            "Ann moved to Berlin",       "Ann drinks tea at night",    "Ann has a peanut allergy",
            "Ann teaches music lessons", "Ann visited Lisbon in May"};
        for (std::size_t i = 0; i < texts.size(); ++i) {
            const auto id = static_cast<FactId>(10 + i);
            lexical_.upsert("ann", id, texts[i]);
            exact_.upsert("ann", id, letters(texts[i]));
        }
        lexical_.upsert("bob", 99, "Bob likes tea");
        exact_.upsert("bob", 99, letters("Bob likes tea"));
    }

    DenseRetrieval dense(DenseIndex* fast = nullptr) {
        return {&exact_, fast,
                [](std::string_view q) -> Result<std::vector<float>> { return letters(q); }};
    }

    Bm25Index lexical_;
    VectorIndex exact_{kDim};
};

TEST_F(FactRetrieverTest, EachMethodIsItsParts) {
    const FactRetriever retriever(lexical_, dense());
    EXPECT_EQ(retriever.default_method(), RetrievalMethod::Hybrid);
    for (const char* query : {"tea", "where does Ann live", "chess", "zzz"}) {
        for (std::size_t k : {1u, 3u, 8u}) {
            EXPECT_EQ(*retriever.search("ann", query, k, RetrievalMethod::Bm25),
                      lexical_.search("ann", query, k));
            EXPECT_EQ(*retriever.search("ann", query, k, RetrievalMethod::Dense),
                      exact_.search("ann", letters(query), k));
            const std::array<std::vector<Hit>, 2> lists{
                lexical_.search("ann", query, FactRetriever::kFusionDepth),
                exact_.search("ann", letters(query), FactRetriever::kFusionDepth)};
            const auto hybrid = *retriever.search("ann", query, k, RetrievalMethod::Hybrid);
            EXPECT_EQ(hybrid, reciprocal_rank_fusion(lists, k, FactRetriever::kFusionC))
                << query << " k " << k;
            for (const Hit& hit : hybrid) EXPECT_NE(hit.fact_id, 99);  // never Bob's
        }
    }
    EXPECT_TRUE(retriever.search("ann", "tea", 0, RetrievalMethod::Hybrid)->empty());
    EXPECT_TRUE(retriever.search("nobody", "tea", 5, RetrievalMethod::Hybrid)->empty());
}

TEST_F(FactRetrieverTest, TheFastIndexServesTheKItCanTake) {
    // The mirror holds two of Ann's facts only, so its answers tell it apart.
    SmallIndex fast;
    ASSERT_TRUE(fast.put("ann", 10, letters("Ann likes green tea")).ok());
    ASSERT_TRUE(fast.put("ann", 14, letters("Ann drinks tea at night")).ok());
    const FactRetriever retriever(lexical_, dense(&fast));
    const std::vector<float> q = letters("tea");
    EXPECT_EQ(*retriever.search("ann", "tea", 2, RetrievalMethod::Dense),
              fast.inner.search("ann", q, 2));
    EXPECT_EQ(fast.searches, 1);
    // k 5 > max_k 3: the exact index.
    EXPECT_EQ(*retriever.search("ann", "tea", 5, RetrievalMethod::Dense),
              exact_.search("ann", q, 5));
    EXPECT_EQ(fast.searches, 1);
}

TEST_F(FactRetrieverTest, WithoutEmbeddingsOnlyBm25) {
    const FactRetriever retriever(lexical_);
    EXPECT_EQ(retriever.default_method(), RetrievalMethod::Bm25);
    EXPECT_EQ(*retriever.search("ann", "tea", 3), lexical_.search("ann", "tea", 3));
    for (RetrievalMethod m : {RetrievalMethod::Dense, RetrievalMethod::Hybrid}) {
        auto r = retriever.search("ann", "tea", 3, m);
        ASSERT_FALSE(r.ok());
        EXPECT_EQ(r.error().kind, ErrorKind::InvalidArgument);
    }
}

TEST_F(FactRetrieverTest, TheEmbeddersErrorIsTheSearchsError) {
    const FactRetriever retriever(
        lexical_, {&exact_, nullptr, [](std::string_view) -> Result<std::vector<float>> {
                       return make_error(ErrorKind::Unavailable, "out of device memory");
                   }});
    auto r = retriever.search("ann", "tea", 3, RetrievalMethod::Hybrid);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "out of device memory");
}

TEST(RetrievalMethodTest, NamesRoundTrip) {
    for (RetrievalMethod m :
         {RetrievalMethod::Bm25, RetrievalMethod::Dense, RetrievalMethod::Hybrid})
        EXPECT_EQ(*parse_retrieval_method(retrieval_method_name(m)), m);
    EXPECT_FALSE(parse_retrieval_method("BM25").ok());
    EXPECT_FALSE(parse_retrieval_method("").ok());
}

}  // namespace
}  // namespace inferscale::retrieval
