#pragma once
// Choices tuned per token-count bucket (the power of two at or above n): cuBLASLt's algorithm
// for a GEMM shape and the small-linear-or-cuBLASLt decision for a linear group. A choice made
// at n serves every smaller n of its bucket; a larger n tunes again (an algorithm whose tile
// just covers n = 111 takes two tiles at 128 and streams the weights twice), and the bucket
// keeps the choice made at its largest n. So a server whose steps vary in size tunes a bounded
// number of times, and not at all after a warm-up at each bucket's top.

#include <cstdint>
#include <map>

namespace inferscale::backends::cuda {

// The token-count bucket whose tuning choices serve `n` rows: the power of two at or above n.
inline std::int64_t tuning_bucket(std::int64_t n) {
    std::int64_t bucket = 1;
    while (bucket < n) bucket *= 2;
    return bucket;
}

// Key names a bucket (its token count is tuning_bucket(n), the rest is the shape).
template <class Key, class Choice>
class BucketChoices {
  public:
    // The choice recorded for `bucket` at a token count of at least n; null when there is none.
    const Choice* find(const Key& bucket, std::int64_t n) const {
        const auto it = entries_.find(bucket);
        return it != entries_.end() && n <= it->second.n ? &it->second.choice : nullptr;
    }
    // A choice made at n; the bucket keeps the one made at its largest n.
    void record(const Key& bucket, std::int64_t n, Choice choice) {
        const auto [it, added] = entries_.try_emplace(bucket, Entry{choice, n});
        if (!added && n > it->second.n) it->second = Entry{choice, n};
    }

  private:
    struct Entry {
        Choice choice;
        std::int64_t n;
    };
    std::map<Key, Entry> entries_;
};

}  // namespace inferscale::backends::cuda
