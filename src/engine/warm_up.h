#pragma once
// Warm-up: one step of each shape class a server's steps fall into, run before the first
// request on backends that build something the first time they see a shape (the CUDA backend
// tunes a GEMM algorithm per token-count bucket and records a decode graph per batch bucket),
// so no request waits behind that. Each step is a greedy forward over dummy sequences whose KV
// goes to freshly allocated blocks, released afterwards; nothing else is touched.

#include <cstdint>

#include "base/result.h"
#include "engine/local_model.h"
#include "model/decode_graphs.h"

namespace inferscale::engine {

struct WarmUpReport {
    int steps = 0;    // steps run
    int skipped = 0;  // shapes left out: too few free KV blocks for them
    double seconds = 0;
};

// Steps of 1, 2, 4, ... tokens up to the workspace's max_tokens (and max_tokens itself), each
// spread over as many sequences as a step may sample (at most `max_seqs`): one token per
// sequence while they fit, which is a decode step (replayed through `graphs`, when given and
// the size is one of its buckets, so the bucket's graph is recorded). An Error from a forward.
Result<WarmUpReport> warm_up(LocalModel& model, model::DecodeGraphRunner* graphs,
                             std::int64_t max_seqs);

}  // namespace inferscale::engine
