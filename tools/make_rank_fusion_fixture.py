#!/usr/bin/env python3
"""Writes tests/fixtures/retrieval/rank_fusion.json: reciprocal-rank fusion computed here, apart
from the C++ code, for src/retrieval/rank_fusion.h to match.

Each case holds ranked lists of fact ids (best first), c and k, and the fused ranking: score(d) =
sum over the lists holding d of 1 / (c + rank), rank from 1, summed in list order (a fact repeated
within one list counts at its first rank), best first, ties by ascending id. The cases are drawn
from a fixed seed, plus hand-made ones: a tie by symmetry (ranks 1 and 2 in swapped lists), a
repeat within a list, an empty list, k beyond the facts.

    python3 tools/make_rank_fusion_fixture.py
"""
import json
import os
import random


def fuse(lists, k, c):
    scores = {}
    for ranked in lists:
        seen = set()
        for rank, fact in enumerate(ranked, start=1):
            if fact in seen:
                continue
            seen.add(fact)
            scores[fact] = scores.get(fact, 0.0) + 1.0 / (c + rank)
    ranking = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [{"id": fact, "score": score} for fact, score in ranking[:k]]


def main():
    rng = random.Random(20261207)
    cases = [
        {"name": "symmetric tie", "lists": [[5, 3, 9], [3, 5, 8]], "k": 10, "c": 60.0},
        {"name": "repeat within a list", "lists": [[4, 4, 2], [2, 7]], "k": 3, "c": 60.0},
        {"name": "one empty list", "lists": [[], [11, 12, 13]], "k": 2, "c": 60.0},
        {"name": "small c", "lists": [[1, 2, 3, 4], [4, 3, 2, 1], [2, 4]], "k": 4, "c": 1.0},
    ]
    for i in range(12):
        num_lists = rng.randint(2, 4)
        pool = rng.sample(range(1, 400), rng.randint(5, 120))
        lists = [rng.sample(pool, rng.randint(0, len(pool))) for _ in range(num_lists)]
        cases.append({"name": f"random {i}", "lists": lists, "k": rng.choice([1, 5, 20, 1000]),
                      "c": rng.choice([60.0, 10.0, 0.5])})
    for case in cases:
        case["fused"] = fuse(case["lists"], case["k"], case["c"])
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "retrieval",
                       "rank_fusion.json")
    with open(out, "w") as f:  # one case a line
        f.write('{"generator": "tools/make_rank_fusion_fixture.py", "cases": [\n')
        f.write(",\n".join(json.dumps(case) for case in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
