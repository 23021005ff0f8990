#include "kv/block_pool.h"

#include "base/check.h"

namespace inferscale::kv {

BlockPool::BlockPool(std::int32_t num_blocks) {
    IS_CHECK(num_blocks >= 0) << "num_blocks " << num_blocks;
    ref_counts_.assign(static_cast<std::size_t>(num_blocks), 0);
    free_.reserve(static_cast<std::size_t>(num_blocks));
    // Highest id at the bottom so that a fresh pool hands out 0, 1, 2, ...
    for (std::int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

std::optional<BlockId> BlockPool::allocate() {
    if (free_.empty()) return std::nullopt;
    const BlockId b = free_.back();
    free_.pop_back();
    ref_counts_[b] = 1;
    return b;
}

bool BlockPool::allocate(std::int32_t count, std::vector<BlockId>& out) {
    IS_CHECK(count >= 0) << "count " << count;
    if (count > num_free()) return false;
    for (std::int32_t i = 0; i < count; ++i) out.push_back(*allocate());
    return true;
}

void BlockPool::add_ref(BlockId block) {
    IS_CHECK(block >= 0 && block < num_blocks()) << "block " << block;
    IS_CHECK(ref_counts_[block] > 0) << "add_ref on free block " << block;
    ++ref_counts_[block];
}

void BlockPool::release(BlockId block) {
    IS_CHECK(block >= 0 && block < num_blocks()) << "block " << block;
    IS_CHECK(ref_counts_[block] > 0) << "release of free block " << block;
    if (--ref_counts_[block] == 0) free_.push_back(block);
}

void BlockPool::release(const std::vector<BlockId>& blocks) {
    for (BlockId b : blocks) release(b);
}

std::int32_t BlockPool::ref_count(BlockId block) const {
    IS_CHECK(block >= 0 && block < num_blocks()) << "block " << block;
    return ref_counts_[block];
}

}  // namespace inferscale::kv
