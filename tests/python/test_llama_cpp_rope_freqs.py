"""A Llama 3.1-style GGUF (rope_freqs.weight: "llama3" rope scaling as per-pair frequency
divisors) through llama.cpp (llama-cpp-python) and through inferscale. The fixture and its
expected values come from tools/make_loader_fixtures.py (tiny_llama31.gguf, 2 Q8_0 layers, a
byte-level vocabulary of the letters a-x).

llama.cpp's logits sit at the float64 numpy forward with angle pos * theta^(-2i/d) / factor_i
(up to its Q8 activation rounding) and far from the forward without the factors: the reference
the C++ test holds our f32 path to is how llama.cpp reads the file. inferscale's greedy tokens
equal llama.cpp's: on Q8_0 weights the CPU backend computes as ggml does, rotary angles
included, so its logits are llama.cpp's bit for bit (gguf_rope_freqs_test checks the logits)."""
import json
import os

import numpy as np
import pytest

from llama_cpp_peer import assert_same_greedy, open_llama_cpp

pytest.importorskip("llama_cpp")

LOADER = os.path.join(os.environ.get("INFERSCALE_FIXTURES", "tests/fixtures"), "loader")
MODEL = os.path.join(LOADER, "tiny_llama31.gguf")
NEW_TOKENS = 24
PROMPTS = ["the cat sat on the mat", "a long road goes north past the old mill and the river",
           "jot this down"]


@pytest.fixture(scope="module")
def expected():
    with open(os.path.join(LOADER, "tiny_llama31_expected.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def llm():
    return open_llama_cpp(MODEL, n_ctx=128, logits_all=True)


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def test_llama_cpp_applies_the_factors_as_the_reference_does(llm, expected):
    prompt = expected["prompt"]
    llm.reset()
    llm.eval(prompt)
    got = np.array(llm.scores[:len(prompt)], dtype=np.float64)
    ref = np.array(expected["logits"])
    without = np.array(expected["logits_without_factors"])
    near, far = rms(got - ref), rms(got - without)
    assert near < 0.1 * rms(ref), (near, rms(ref))
    assert far > 0.5 * rms(ref), (far, rms(ref))
    assert near < 0.1 * far, (near, far)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_prompt_ids_and_greedy_tokens(llm, prompt):
    assert_same_greedy(llm, MODEL, prompt, NEW_TOKENS)
