"""The bundled GGUF model through inferscale and through llama.cpp (llama-cpp-python, built from
source): the same prompt token ids and the same greedy continuation of 32 tokens on 5 prompts.

For a block-quantized GGUF our CPU backend reproduces ggml's CPU arithmetic bit for bit (Q8
activations and integer block dots, RMSNorm summed in double, ggml's RoPE angles, its exp in
softmax and SiLU, its summation orders in attention: src/backends/cpu/ggml_arith.h), so the
logits are identical, not merely close, and near-ties cannot flip. ggml rounds differently per
instruction set, so the backend reproduces the build the host's llama.cpp has (AVX-512 or AVX2,
chosen at run time) and the suite runs this file against both builds on an AVX-512 host
(conftest.py): the near-ties below flip if the arithmetic of the other build is used."""
import os

import pytest

from llama_cpp_peer import assert_same_greedy, open_llama_cpp

pytest.importorskip("llama_cpp")

MODEL = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
NEW_TOKENS = 32
PROMPTS = [
    # The 6th token is a near-tie in llama.cpp (top-2 logits 14.468 vs 14.434).
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is the boiling point of water in Celsius?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea, there lived",
    "List three primary colors:\n1.",
]


@pytest.fixture(scope="module")
def llm():
    if not os.path.exists(MODEL):
        pytest.skip(f"{MODEL} missing: run scripts/setup.sh")
    return open_llama_cpp(MODEL, n_ctx=512)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_prompt_ids_and_greedy_tokens(llm, prompt):
    assert_same_greedy(llm, MODEL, prompt, NEW_TOKENS)
