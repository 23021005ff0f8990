#pragma once
// Safetensors loading: one file or a sharded set (model.safetensors.index.json) mapped into a
// WeightStore. Tensors are zero-copy views into the maps, which the store keeps alive (a tensor
// whose offset is misaligned for its dtype is copied into store-owned memory instead).
// Supported dtypes: F32, F16, BF16. Any malformed input is an Error naming the file; a truncated
// or corrupt file never crashes or over-reads.

#include <cstddef>
#include <functional>
#include <set>
#include <string>

#include "base/result.h"
#include "model/weight_store.h"

namespace inferscale::model {

// Called after each file's tensors are added: (tensors loaded so far, total tensors).
using SafetensorsProgress = std::function<void(std::size_t done, std::size_t total)>;

// Adds every tensor of the safetensors file at `path` to `store`. A name already in the store
// is an Error. Returns the number of tensors added.
Result<std::size_t> load_safetensors_file(const std::string& path, WeightStore& store);
// The same, leaving out the tensors named in `ignore` (not parsed at all: a BERT checkpoint's
// I64 position_ids buffer, for one).
Result<std::size_t> load_safetensors_file(const std::string& path, WeightStore& store,
                                          const std::set<std::string>& ignore);

// Loads `dir`/model.safetensors.index.json and its shards when the index exists, otherwise
// `dir`/model.safetensors. With an index, every tensor it lists must be found in its shard.
Result<std::size_t> load_safetensors_dir(const std::string& dir, WeightStore& store,
                                         const SafetensorsProgress& progress = {});

}  // namespace inferscale::model
