#pragma once
// WeightStore: a model's named weights in host memory, keyed by Hugging Face names:
//   model.embed_tokens.weight                                [vocab, hidden]
//   model.layers.{i}.input_layernorm.weight                  [hidden]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight         [out, in]   (q/k/v .bias for Qwen2)
//   model.layers.{i}.post_attention_layernorm.weight         [hidden]
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight          [out, in]
//   model.norm.weight                                        [hidden]
//   lm_head.weight                                           [vocab, hidden] (absent when tied)
// Q/K rows are always in the Hugging Face (rotate_half) order. Tensors point into mapped files
// or into storage the store owns; the store keeps both alive and is move-only.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace inferscale::model {

class WeightStore {
  public:
    WeightStore() = default;
    WeightStore(WeightStore&&) = default;
    WeightStore& operator=(WeightStore&&) = default;
    WeightStore(const WeightStore&) = delete;
    WeightStore& operator=(const WeightStore&) = delete;

    // Keeps a mapped file alive for the lifetime of the store; tensors may point into it.
    const MappedFile& keep_file(MappedFile file);
    // Allocates owned host storage of `bytes` bytes (64-byte aligned) and returns it.
    void* allocate(std::size_t bytes);

    void add(std::string name, tensor::Tensor t);
    // nullptr when absent.
    const tensor::Tensor* find(std::string_view name) const;
    // An Error naming the tensor when absent or when its shape differs from `shape`.
    Result<tensor::Tensor> get(std::string_view name,
                               std::initializer_list<std::int64_t> shape) const;
    const std::map<std::string, tensor::Tensor, std::less<>>& all() const { return tensors_; }

  private:
    struct AlignedFree {
        void operator()(void* p) const;
    };
    std::vector<std::unique_ptr<MappedFile>> files_;
    std::vector<std::unique_ptr<void, AlignedFree>> owned_;
    std::map<std::string, tensor::Tensor, std::less<>> tensors_;
};

}  // namespace inferscale::model
