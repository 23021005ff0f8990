#!/usr/bin/env python3
"""Writes tests/fixtures/retrieval/bm25.json: BM25 scores computed by the PyPI package rank-bm25
(an independent implementation) for the C++ Bm25Index test to match.

rank-bm25's BM25Okapi does the term counting, length normalization and summing; only its idf is
replaced by Lucene's ln(1 + (N - n + 0.5) / (n + 0.5)), which is what Bm25Index uses (see
src/retrieval/bm25_index.h for why). The tokenizer is re-implemented here from the rules in
src/retrieval/lexical_tokenizer.h, stemming included (terms of three or more ASCII letters go
through the Porter stemmer of the PyPI package snowballstemmer, as tools/make_porter_fixture.py's
do), and its output is stored too so the C++ side checks it.

    pip install rank-bm25==0.2.2 snowballstemmer==3.1.1 && python3 tools/make_bm25_fixture.py
"""
import json
import math
import os
import re

import snowballstemmer
from rank_bm25 import BM25Okapi

K1, B = 1.2, 0.75
STOPWORDS = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
             "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then",
             "there", "these", "they", "this", "to", "was", "will", "with"}


PORTER = snowballstemmer.stemmer("porter")


def stem(term):
    return PORTER.stemWord(term) if len(term) > 2 and re.fullmatch(r"[a-z]+", term) else term


def terms(text):
    # bytes.lower() lowercases ASCII only, as the C++ tokenizer does; bytes >= 0x80 join terms.
    raw = re.split(rb"[^a-z0-9\x80-\xff]+", text.encode("utf-8").lower())
    words = [t.decode("utf-8", "surrogateescape") for t in raw if t]
    return [stem(w) for w in words if w not in STOPWORDS]


class LuceneIdfBM25(BM25Okapi):
    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))


CORPUS = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Caroline is researching adoption agencies.",
    "Melanie paints landscapes and has been painting for seven years.",
    "Melanie ran a charity race for mental health.",
    "Caroline moved from Sweden four years ago.",
    "Melanie's kids love the beach; they went camping at the beach in June.",
    "Caroline gave a talk at a school about her transgender journey.",
    "Melanie signed up for a pottery class.",
    "Caroline wants to become a counselor and work in mental health.",
    "Melanie plays the clarinet.",
    "Caroline's favourite book is 'Becoming Nicole'.",
    "Melanie went camping with her family in the mountains.",
    "Caroline painted a sunrise over a lake.",
    "Melanie signed up for a pottery class.",            # duplicate: an exact tie
    "The café in Zürich serves coffee, café au lait and cake.",
    "It is what it is, and that is that.",                # stopwords only, length 0 after them
    "Caroline, CAROLINE, caroline: the name repeated three times.",
    "Running 5k and 10k races; Melanie's best 10k was 52 minutes.",
    "東京 trip planned for 2024 with the family.",
    "Camping, hiking and painting are Melanie's favourite weekend hobbies.",
    "Bob is allergic to peanuts.",
    "Bob's daughter has a severe peanut allergy.",
]

QUERIES = [
    "What does Melanie paint?",
    "Caroline mental health counselor",
    "pottery class",
    "beach camping trip with the family",
    "café",
    "caroline caroline",          # a repeated query term counts twice
    "10k race time",
    "東京",
    "what is the",                # only stopwords: no hits
    "submarine",                  # unknown term: no hits
    "MELANIE Camping",
    "allergies",                  # stems to "allergi", as "allergy" does; "allergic" is "allerg"
    "Is Bob allergic to peanut butter?",
    "races painted",              # "race" and "paint" match their other forms
]

# The second case reaches a new corpus by removing, replacing and adding facts, so the C++ test
# drives the incremental path and must land on the scores of a fresh build.
REMOVED = {1, 9, 15}
REPLACED = {4: "Caroline moved from Sweden to the United States four years ago.",
            11: "Melanie went hiking, not camping, with her family."}
ADDED = {100: "Caroline adopted a dog named Oscar.", 101: "Melanie's pottery bowl cracked in the kiln."}


def make_case(name, docs):
    ids = sorted(docs)
    tokenized = [terms(docs[i]) for i in ids]
    bm25 = LuceneIdfBM25(tokenized, k1=K1, b=B)
    queries = []
    for q in QUERIES:
        scores = bm25.get_scores(terms(q))
        by_id = {i: float(s) for i, s in zip(ids, scores) if s > 0}
        ranking = sorted(by_id, key=lambda i: (-by_id[i], i))
        queries.append({"query": q, "terms": terms(q),
                        "scores": {str(i): by_id[i] for i in ids if i in by_id},
                        "ranking": ranking})
    return {"name": name,
            "docs": [{"id": i, "text": docs[i], "terms": t} for i, t in zip(ids, tokenized)],
            "queries": queries}


def main():
    first = {i: t for i, t in enumerate(CORPUS)}
    second = {i: t for i, t in first.items() if i not in REMOVED}
    second.update(REPLACED)
    second.update(ADDED)
    fixture = {"generator": "tools/make_bm25_fixture.py with rank-bm25 BM25Okapi, Lucene idf, "
                            "snowballstemmer porter",
               "k1": K1, "b": B,
               "cases": [make_case("initial", first), make_case("after_updates", second)]}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "tests", "fixtures", "retrieval", "bm25.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(fixture, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
