#include "memory/range_allocator.h"

#include <algorithm>
#include <iterator>

#include "base/check.h"

namespace inferscale::memory {
namespace {

RangeUse later(RangeUse a, RangeUse b) {
    return {std::max(a.fence, b.fence), std::max(a.ticket, b.ticket)};
}

}  // namespace

RangeAllocator::RangeAllocator(std::size_t capacity) : capacity_(capacity / kAlign * kAlign) {
    if (capacity_ > 0) insert(0, {capacity_, {}});
}

void RangeAllocator::insert(std::size_t offset, FreeRange range) {
    by_offset_.emplace(offset, range);
    by_size_.emplace(range.size, offset);
}

void RangeAllocator::erase(std::map<std::size_t, FreeRange>::iterator it) {
    by_size_.erase({it->second.size, it->first});
    by_offset_.erase(it);
}

std::optional<Range> RangeAllocator::allocate(std::size_t bytes) {
    const std::size_t size = aligned(bytes);
    auto best = by_size_.lower_bound({size, 0});
    if (best == by_size_.end()) return std::nullopt;
    const std::size_t offset = best->second;
    auto it = by_offset_.find(offset);
    const FreeRange range = it->second;
    erase(it);
    if (range.size > size) insert(offset + size, {range.size - size, range.last_use});
    used_ += size;
    return Range{offset, bytes, range.last_use};
}

void RangeAllocator::free(std::size_t offset, std::size_t bytes, RangeUse last_use) {
    std::size_t size = aligned(bytes);
    IS_CHECK(offset % kAlign == 0 && offset + size <= capacity_ && used_ >= size)
        << "freeing [" << offset << ", +" << size << ") of a slab of " << capacity_;
    used_ -= size;
    auto next = by_offset_.lower_bound(offset);
    IS_CHECK(next == by_offset_.end() || next->first >= offset + size)
        << "double free at " << offset;
    if (next != by_offset_.end() && next->first == offset + size) {
        size += next->second.size;
        last_use = later(last_use, next->second.last_use);
        erase(next);
    }
    auto prev = by_offset_.lower_bound(offset);
    if (prev != by_offset_.begin()) {
        --prev;
        IS_CHECK(prev->first + prev->second.size <= offset) << "double free at " << offset;
        if (prev->first + prev->second.size == offset) {
            offset = prev->first;
            size += prev->second.size;
            last_use = later(last_use, prev->second.last_use);
            erase(prev);
        }
    }
    insert(offset, {size, last_use});
}

std::size_t RangeAllocator::largest_free() const {
    return by_size_.empty() ? 0 : std::prev(by_size_.end())->first;
}

}  // namespace inferscale::memory
