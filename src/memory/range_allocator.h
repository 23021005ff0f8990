#pragma once
// RangeAllocator: byte ranges of one slab [0, capacity), best fit, neighbours merged on free.
// It hands out offsets only; the memory is the caller's (a device or pinned host slab taken
// once, so the request path never calls the backend's allocator).
//
// Each free range remembers when its last users are done: `fence` (a Backend::compute_fence
// after the compute ops that read it) and `ticket` (the last transfer that read or wrote it).
// Both are monotonic ids, so merged ranges keep the larger of each, and an allocation returns
// the values of the range it was cut from: the new owner orders its writes after them.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace inferscale::memory {

struct RangeUse {
    std::uint64_t fence = 0;   // compute ops that used the range (0: none pending)
    std::uint64_t ticket = 0;  // the last transfer that used it (0: none)
};

struct Range {
    std::size_t offset = 0;
    std::size_t bytes = 0;  // as asked, before alignment
    RangeUse last_use;      // of the memory it was cut from
};

class RangeAllocator {
  public:
    static constexpr std::size_t kAlign = 256;

    explicit RangeAllocator(std::size_t capacity);

    // The smallest free range that holds `bytes` (rounded up to kAlign), cut at its start;
    // nullopt when none does.
    std::optional<Range> allocate(std::size_t bytes);
    // Returns a range from allocate (offset and bytes as given), with its users' last use.
    void free(std::size_t offset, std::size_t bytes, RangeUse last_use);

    std::size_t capacity() const { return capacity_; }
    std::size_t used() const { return used_; }  // aligned bytes handed out
    std::size_t largest_free() const;
    std::size_t free_ranges() const { return by_offset_.size(); }
    // What a range of `bytes` takes of the slab.
    static std::size_t aligned(std::size_t bytes) {
        return (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    }

  private:
    struct FreeRange {
        std::size_t size;
        RangeUse last_use;
    };
    void insert(std::size_t offset, FreeRange range);
    void erase(std::map<std::size_t, FreeRange>::iterator it);

    std::size_t capacity_;
    std::size_t used_ = 0;
    std::map<std::size_t, FreeRange> by_offset_;             // free ranges
    std::set<std::pair<std::size_t, std::size_t>> by_size_;  // (size, offset) of the same
};

}  // namespace inferscale::memory
