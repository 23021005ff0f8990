#pragma once
// How the tensor-core decode kernel takes its (split, sequence, kv head) items, chosen per step
// shape by plain host arithmetic (paged_attention.cpp's plan; unit-tested without a GPU).

#include <algorithm>
#include <cstdint>

namespace inferscale::backends::cuda {

enum class DecodeSchedule : std::uint8_t {
    Auto,       // the cheaper of the two below for the step's shape
    WarpItems,  // each warp streams whole items taken from a global counter
    CtaItems,   // a CTA's warps share each item and merge through shared memory
};

// The tensor-core decode kernel's schedule and split count for `pairs` (sequence, kv head)
// pairs of up to `tiles` KV tiles (of the plan's 32 tokens) each, between `lo` and `hi`
// splits. Workers take items a round at a time, so a step lasts about rounds x the tiles one
// warp streams per item: warp items (a worker is a warp, an item's tiles all its own) or CTA
// items (a worker is a CTA, its `item_warps` warps share an item's tiles). A split step also
// pays the merge launch, about kMergeRounds tile rounds; the fewest splits among those within
// 2% of the cheapest win. Llama-3.1-8B at gpu_bench's 1K context (a 1056-token bound: 33
// tiles) on the H200 (1056 warps in 264 CTAs): at batch 64 (512 pairs) warp items take 2
// splits, 17 rounds and the merge, CTA items one split, 2 rounds of 9: CTA items, 2.1% faster
// a step; at batch 128 warp items take 33 rounds against CTA items' 36 (forced: 0.86x); at
// batch 1 CTA items take 9 splits (warp items forced: 1.038x the step time). Counting the
// merge inside a schedule
// too keeps a split that saves one round from winning and paying the merge (warp items at
// batch 256 and a 1088-token bound: 17 splits without it).
constexpr std::int64_t kMergeRounds = 2;

struct TcSchedule {
    bool warp_items = true;
    std::int64_t splits = 1;
    std::int64_t rounds = 0;  // the merge's included
};

// One schedule's cheapest split count and its rounds (warp_items at its default: the caller
// labels the schedule).
inline TcSchedule balanced_schedule(std::int64_t pairs, std::int64_t workers,
                                    std::int64_t item_warps, std::int64_t tiles, std::int64_t lo,
                                    std::int64_t hi) {
    lo = std::max<std::int64_t>(std::min(lo, hi), 1);
    hi = std::max(hi, lo);
    const auto rounds = [&](std::int64_t s) {
        const std::int64_t item_tiles = (tiles + s - 1) / s;
        return (pairs * s + workers - 1) / workers * ((item_tiles + item_warps - 1) / item_warps) +
               (s > 1 ? kMergeRounds : 0);
    };
    std::int64_t best = rounds(lo);
    for (std::int64_t s = lo + 1; s <= hi; ++s) best = std::min(best, rounds(s));
    std::int64_t s = lo;
    while (rounds(s) * 50 > best * 51) ++s;
    return {.splits = s, .rounds = rounds(s)};
}

// The schedule `wanted` (Auto: the one with fewer rounds, warp items on a tie) for `pairs` pairs
// of up to `tiles` tiles over a persistent grid of `ctas` CTAs of `cta_warps` warps.
inline TcSchedule choose_tc_schedule(DecodeSchedule wanted, std::int64_t pairs, std::int64_t ctas,
                                     std::int64_t cta_warps, std::int64_t tiles, std::int64_t lo,
                                     std::int64_t hi) {
    const TcSchedule by_warp = balanced_schedule(pairs, ctas * cta_warps, 1, tiles, lo, hi);
    TcSchedule by_cta = balanced_schedule(pairs, ctas, cta_warps, tiles, lo, hi);
    by_cta.warp_items = false;
    if (wanted == DecodeSchedule::WarpItems) return by_warp;
    if (wanted == DecodeSchedule::CtaItems) return by_cta;
    return by_cta.rounds < by_warp.rounds ? by_cta : by_warp;
}

}  // namespace inferscale::backends::cuda
