"""bench/locomo_eval.py, the LoCoMo accuracy harness: its scores against hand-computed values,
and the harness end to end on three questions of conversation 26 against the bundled model
(none, prompt and kv at k = 5): the JSON's schema, every configuration answered, scores in
[0, 1], a resumed run that asks nothing again, and a resumed run with --judge that only judges.
Accuracy itself is not asserted."""
import json
import math
import os
import subprocess
import sys

import pytest

from server_process import MODEL, Server

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
sys.path.insert(0, BENCH)
from locomo_scoring import (bleu1, final_answer, locomo_f1, paired_bootstrap,  # noqa: E402
                            parse_verdict, token_f1)

LOCOMO = os.environ.get("INFERSCALE_LOCOMO", os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "data", "locomo10"))


def test_token_f1():
    # "the", "a", "and", punctuation and commas go; stems compare: cat sat / cat sat down.
    assert token_f1("The cat sat", "a cat sat down") == pytest.approx(0.8)
    assert token_f1("running", "runs") == 1.0
    assert token_f1("Paris!", "paris") == 1.0
    assert token_f1("cats and dogs", "dogs, cats") == 1.0
    assert token_f1("", "paris") == 0.0
    assert token_f1("berlin", "paris") == 0.0


def test_locomo_f1_by_category():
    # Multi-hop: each reference part takes its best predicted part (swimming 1, camping 0).
    assert locomo_f1("painting, swimming", "swimming, camping", 1) == pytest.approx(0.5)
    # Open-domain keeps the reference up to its first ';'; single-hop takes it whole.
    assert locomo_f1("psychology", "Psychology; counseling", 3) == 1.0
    assert locomo_f1("psychology", "Psychology; counseling", 4) == pytest.approx(2 / 3)
    assert locomo_f1("7 May 2023", "7 May 2023", 2) == 1.0


def test_bleu1():
    # cat sat on mat / cat is on mat: 3 of 4 unigrams, equal lengths so no penalty.
    assert bleu1("the cat sat on the mat", "the cat is on the mat") == pytest.approx(0.75)
    assert bleu1("cat", "cat sat") == pytest.approx(math.exp(-1))  # brevity penalty
    assert bleu1("cat cat cat", "cat") == pytest.approx(1 / 3)  # clipped counts
    assert bleu1("", "cat") == 0.0


def test_parse_verdict():
    assert parse_verdict("true") is True
    assert parse_verdict("False.") is False
    assert parse_verdict("TRUE") is True
    assert parse_verdict("true<eos>") is True
    assert parse_verdict("false</s>") is False
    assert parse_verdict('"false"') is False
    assert parse_verdict('```json\n{"correct": true}\n```') is True
    assert parse_verdict('{"correct": false}') is False
    assert parse_verdict("Maybe") is None
    assert parse_verdict("true or false") is None
    assert parse_verdict('{"correct": "yes"}') is None


def test_final_answer_and_bootstrap():
    assert final_answer("Thinking. ANSWER: no ANSWER: Paris \n") == "Paris"
    assert final_answer(" Paris ") == "Paris"
    assert paired_bootstrap([1, 1, 1], [0, 0, 0]) == (1.0, 1.0, 1.0)
    diff, low, high = paired_bootstrap([1, 0, 1, 0], [0, 0, 1, 1])
    assert diff == 0.0 and -1 <= low <= 0 <= high <= 1
    assert paired_bootstrap([1, 0, 1, 0], [0, 0, 1, 1]) == (diff, low, high)  # fixed seed


@pytest.mark.skipif(not os.path.exists(MODEL) or not os.path.exists(os.path.join(LOCOMO, "26.json")),
                    reason="needs the bundled model (scripts/setup.sh) and LoCoMo")
def test_harness_end_to_end_and_resume(tmp_path):
    server = Server(tmp_path, "--embedding-model", "none", "--threads", "2")
    out = tmp_path / "eval.json"
    command = [sys.executable, os.path.join(BENCH, "locomo_eval.py"), "--base-url", server.url,
               "--locomo", LOCOMO, "--conversations", "26", "--limit", "3", "--ks", "5",
               "--windows", "0", "--modes", "none,prompt,kv", "--max-tokens", "8",
               "--out", str(out)]
    try:
        first = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr
        result = json.loads(out.read_text())
        finished = server.metrics()["inferscale_requests_finished_total"]
        again = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert json.loads(out.read_text())["answers"] == result["answers"]
        assert server.metrics()["inferscale_requests_finished_total"] == finished
        # Without --resume an existing JSON is never overwritten.
        refused = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert refused.returncode != 0 and "--resume" in refused.stderr
        # The judge pass (here the same server judges): one request per answer, nothing re-asked.
        judged = subprocess.run(command + ["--resume", "--judge", server.url],
                                capture_output=True, text=True, timeout=300)
        assert judged.returncode == 0, judged.stderr
        assert server.metrics()["inferscale_requests_finished_total"] == finished + 9
    finally:
        server.stop()
    assert "0 answers to ask (9 already" in again.stderr
    assert "0 answers to ask (9 already" in judged.stderr
    with_verdicts = json.loads(out.read_text())
    for before, after in zip(result["answers"], with_verdicts["answers"]):
        assert after.pop("judged") in (True, False, None) and isinstance(after.pop("judge_reply"), str)
        assert after == before
    assert with_verdicts["config"]["imports"] == {"26": "existing"}
    for entry in with_verdicts["summary"].values():
        assert entry["judged_n"] <= 3
        assert entry["judged_accuracy"] is None or 0 <= entry["judged_accuracy"] <= 1
    assert result["config"]["imports"] == {"26": "http"}

    config = result["config"]
    assert config["encoding"] == "after-header" and config["max_tokens"] == 8
    assert config["modes"] == ["none", "prompt", "kv"] and config["ks"] == [5]
    answers = result["answers"]
    assert len(answers) == 9
    questions = {(a["conversation"], a["index"]) for a in answers}
    assert len(questions) == 3
    configs = {(a["mode"], a["k"], a["w"]) for a in answers}
    assert configs == {("none", 0, 0), ("prompt", 5, 0), ("kv", 5, 0)}
    for a in answers:
        assert a["category"] in (1, 2, 3, 4) and a["question"] and a["reference"]
        assert isinstance(a["prediction"], str)
        assert 0 <= a["f1"] <= 1 and 0 <= a["bleu1"] <= 1
        assert a["ttft_ms"] is None or a["ttft_ms"] > 0
        assert a["prompt_tokens"] > 0 and a["completion_tokens"] <= 8
        # Injected tokens count as cached: a kv answer's memory is not prefilled.
        if a["mode"] == "kv":
            assert a["cached_tokens"] > 0
    assert set(result["summary"]) == {"none", "prompt k=5 w=0", "kv k=5 w=0"}
    for entry in result["summary"].values():
        assert entry["n"] == 3 and 0 <= entry["f1"] <= 1 and 0 <= entry["bleu1"] <= 1
        assert entry["judged_accuracy"] is None
        assert sum(c["n"] for c in entry["by_category"].values()) == 3
    diff = result["kv_minus_prompt_f1"]["k=5 w=0"]
    assert diff["n"] == 3 and diff["ci95"][0] <= diff["f1_diff"] <= diff["ci95"][1]
