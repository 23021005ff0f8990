#pragma once
// BlockPool: host-side accounting of the KV cache's blocks (pages). It hands out block ids and
// counts references so that later prefix sharing can map one block into several sequences; it
// never touches KV memory (that is KvStorage) and includes no tensor, model or backend header.
// Running out of blocks is a plain return value (nullopt / false), for the scheduler to handle.

#include <cstdint>
#include <optional>
#include <vector>

namespace inferscale::kv {

using BlockId = std::int32_t;

class BlockPool {
  public:
    explicit BlockPool(std::int32_t num_blocks);

    // A free block with ref count 1, or nullopt when none is left.
    std::optional<BlockId> allocate();
    // Appends `count` blocks to `out`, all or nothing: false (and `out` untouched) when fewer
    // than `count` are free.
    bool allocate(std::int32_t count, std::vector<BlockId>& out);

    // Another owner of an allocated block (prefix sharing).
    void add_ref(BlockId block);
    // Drops one reference; the block is free again when the last one goes. Releasing a free
    // block is a bug.
    void release(BlockId block);
    void release(const std::vector<BlockId>& blocks);

    std::int32_t num_blocks() const { return static_cast<std::int32_t>(ref_counts_.size()); }
    std::int32_t num_free() const { return static_cast<std::int32_t>(free_.size()); }
    std::int32_t ref_count(BlockId block) const;

  private:
    std::vector<std::int32_t> ref_counts_;  // [num_blocks]
    // LIFO free list: recently freed blocks are reused first, while still warm in cache.
    std::vector<BlockId> free_;
};

// Blocks taken for a while (an encoding pass, a calibration forward) and returned to the pool
// by release_all or, on every other path, when this goes. Not copyable.
class ScratchBlocks {
  public:
    explicit ScratchBlocks(BlockPool& pool) : pool_(pool) {}
    ~ScratchBlocks() { pool_.release(held_); }
    ScratchBlocks(const ScratchBlocks&) = delete;
    ScratchBlocks& operator=(const ScratchBlocks&) = delete;
    // BlockPool::allocate(count, out), the blocks held here too.
    bool take(std::int32_t count, std::vector<BlockId>& out) {
        const std::size_t before = out.size();
        if (!pool_.allocate(count, out)) return false;
        held_.insert(held_.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
        return true;
    }
    void release_all() {
        pool_.release(held_);
        held_.clear();
    }

  private:
    BlockPool& pool_;
    std::vector<BlockId> held_;
};

}  // namespace inferscale::kv
