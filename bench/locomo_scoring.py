"""Scores of LoCoMo answers for bench/locomo_eval.py.

- Token F1 as LoCoMo's own evaluation (snap-research/locomo, task_eval/evaluation.py) computes
  it: the text lowercased, commas and punctuation dropped, the words a, an, the and "and"
  dropped, each token Porter-stemmed (NLTK's PorterStemmer, as LoCoMo uses); category 1
  (multi-hop) splits answer and prediction at commas and averages, over the answer's parts, the
  best F1 of any predicted part; category 3 (open-domain) keeps the answer up to its first ';'.
- BLEU-1: clipped unigram precision times the brevity penalty, over the same normalised tokens
  (no stemming).
- The judge of the reference's accuracy protocol (reference-system.md §7.3): one user message
  asking for true or false, and its parsing: a bare true/false once code fences, <eos>-type
  tokens, quotes and punctuation are stripped, a JSON true/false or {"correct": bool}; anything
  else is unparsed (None), left out of the judged accuracy's denominator.
- A paired bootstrap of the difference of two scores over the same questions.
"""
import json
import math
import re
import string
from collections import Counter

import numpy as np
from nltk.stem import PorterStemmer

_STEMMER = PorterStemmer()
_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)

JUDGE_PROMPT = (
    "Compare a predicted answer to a question with the reference answer and decide whether the "
    "prediction is correct. Answer with exactly one lowercase word: true or false.\n\n"
    "Question: {question}\n"
    "Reference answer: {reference}\n"
    "Predicted answer: {predicted}\n\n"
    "Rules:\n"
    "- true if the predicted answer conveys the same essential information as the reference "
    "answer, even when it is worded differently;\n"
    "- false if it contradicts the reference answer, is not supported by it, or misses a key "
    "fact of it.\n"
    "Output only true or false, no JSON.")


def normalize_answer(text):
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction, reference):
    predicted = [_STEMMER.stem(w) for w in normalize_answer(prediction).split()]
    expected = [_STEMMER.stem(w) for w in normalize_answer(reference).split()]
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def locomo_f1(prediction, reference, category):
    """LoCoMo's F1 of a category 1-4 question."""
    if category == 3:
        reference = reference.split(";")[0].strip()
    if category != 1:
        return token_f1(prediction, reference)
    parts = [p.strip() for p in prediction.split(",")]
    return sum(max(token_f1(p, r.strip()) for p in parts)
               for r in reference.split(",")) / len(reference.split(","))


def bleu1(prediction, reference):
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(reference).split()
    if not predicted or not expected:
        return 0.0
    clipped = sum((Counter(predicted) & Counter(expected)).values())
    penalty = 1.0 if len(predicted) > len(expected) else math.exp(1 - len(expected) / len(predicted))
    return penalty * clipped / len(predicted)


def final_answer(text):
    """The answer as the reference keeps it: the text after the last "ANSWER:", stripped."""
    return text.rsplit("ANSWER:", 1)[-1].strip()


def judge_prompt(question, reference, predicted):
    return JUDGE_PROMPT.format(question=question, reference=reference, predicted=predicted)


def parse_verdict(reply):
    """True or False from a judge's reply, None when it says neither."""
    text = re.sub(r"<[^<>\s]*>", " ", reply)  # <eos>, </s>, <end_of_turn>, <|eot_id|>
    text = re.sub(r"```(?:json)?", " ", text).strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        value = value.get("correct")
    if isinstance(value, bool):
        return value
    word = text.strip(string.punctuation + string.whitespace).lower()
    return {"true": True, "false": False}.get(word)


def paired_bootstrap(a, b, resamples=10000, seed=0):
    """mean(a - b) over paired questions and its 95% percentile interval."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)
