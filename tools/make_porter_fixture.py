#!/usr/bin/env python3
"""Writes tests/fixtures/retrieval/porter.json: (word, stem) pairs from the Porter stemmer of the
PyPI package snowballstemmer (stemmer("porter"), the Snowball project's definition of Porter's
1980 algorithm), for the C++ porter_stem() test to match exactly.

The words: every lowercase ASCII-letter word of LoCoMo's observations (the facts the memory
store indexes) and the questions asked about them, plus the examples of Porter's paper and
cases that exercise each rule.

    pip install snowballstemmer==3.1.1
    python3 tools/make_porter_fixture.py [--locomo ../shared/data/locomo10]
"""
import argparse
import glob
import importlib.metadata
import json
import os
import re

import snowballstemmer

# Porter (1980)'s examples, one or more per rule, and the corners of the regions and of
# consonant-y: the rules must hold in every step, not only on common words.
TRICKY = """
caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled
sized hopping tanned falling hissing fizzed failing filing happy sky relational conditional
rational valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli
vietnamization predication operator feudalism decisiveness hopefulness callousness formaliti
sensitiviti sensibiliti triplicate formative formalize electriciti electrical hopeful goodness
revival allowance inference airliner gyroscopic adjustable defensible irritant replacement
adjustment dependent adoption homologou communism activate angulariti homologous effective
bowdlerize probate rate cease controll roll generalizations oscillators abilities allergy
allergies allergic allergen paints painting painted painter y ys yy yyy ayyy sayyid say saying
boy boys toy toyed enjoying youth yes yell eyes agreement revving faxxed spiccato buzzing
skiing skis news dying lying tying hoped hope hoping sing singing bring ion lion station
mission union iteration abbreviation ease easy useful user uses agrees feeds proceeds exceed
generously fully really family families classes glasses bus plus us as is s ss sss
""".split()


def stem(stemmer, word):
    return stemmer.stemWord(word)


def locomo_words(root):
    words = set()
    for path in sorted(glob.glob(os.path.join(root, "*.json"))):
        with open(path, encoding="utf-8") as f:
            conversation = json.load(f)
        texts = [q["question"] for q in conversation.get("qa", [])]
        for key, value in conversation.items():
            if key.endswith("_observation"):
                for facts in value.values():
                    texts += [fact[0] for fact in facts]
        for text in texts:
            words.update(re.findall(r"[a-z]+", text.lower()))
    return words


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser()
    parser.add_argument("--locomo", default=os.path.join(repo, "..", "shared", "data", "locomo10"))
    args = parser.parse_args()
    words = locomo_words(args.locomo)
    if not words:
        raise SystemExit(f"no LoCoMo conversations under {args.locomo}")
    words.update(TRICKY)
    stemmer = snowballstemmer.stemmer("porter")
    pairs = [[w, stem(stemmer, w)] for w in sorted(words)]
    version = importlib.metadata.version("snowballstemmer")
    out = os.path.join(repo, "tests", "fixtures", "retrieval", "porter.json")
    with open(out, "w", encoding="utf-8") as f:  # one pair a line, for readable diffs
        f.write('{"generator": "tools/make_porter_fixture.py with snowballstemmer '
                f'{version} stemmer(\'porter\')",\n "pairs": [\n')
        f.write(",\n".join(json.dumps(pair) for pair in pairs))
        f.write("\n]}\n")
    print(f"wrote {out}: {len(pairs)} words, {sum(a != b for a, b in pairs)} changed by stemming")


if __name__ == "__main__":
    main()
