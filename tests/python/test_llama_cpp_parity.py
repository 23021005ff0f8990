"""The bundled GGUF model through inferscale and through llama.cpp (llama-cpp-python, built from
source): the same prompt token ids and the same greedy continuation of 32 tokens.

Both engines compute Q4_1 x Q8_1 block dot products the same way, but llama.cpp's softmax, SiLU
and RoPE use other float approximations, so a token whose top two logits are nearly tied can
flip. The strict test expects identical continuations on the prompts where no such tie occurs;
the tie-aware test accepts a divergence only where llama.cpp's own top-2 margin is below
TIE_MARGIN, and reports where it happened."""
import json
import os
import subprocess

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

BIN = os.environ.get("INFERSCALE_BIN", "build/bin")
MODEL = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
NEW_TOKENS = 32
TIE_MARGIN = 0.05
# On this prompt the 6th token is a near-tie in llama.cpp (14.468 vs 14.434) and flips.
TIED_PROMPTS = ["The capital of France is"]
PROMPTS = [
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "<|im_start|>user\nWhat is the boiling point of water in Celsius?<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea, there lived",
    "List three primary colors:\n1.",
]


@pytest.fixture(scope="module")
def llm():
    if not os.path.exists(MODEL):
        pytest.skip(f"{MODEL} missing: run scripts/setup.sh")
    # An f32 KV cache (type_k/type_v 0 = GGML_TYPE_F32) and no flash attention, like ours:
    # llama.cpp's default f16 cache and its flash-attention kernel round K, V and the softmax
    # differently, which flips near-tied greedy tokens for reasons unrelated to the engine.
    return llama_cpp.Llama(model_path=MODEL, n_ctx=512, n_threads=2, type_k=0, type_v=0,
                           flash_attn=False, verbose=False)


def llama_cpp_greedy(llm, prompt):
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    out, margins = [], []
    for _ in range(NEW_TOKENS):
        # The last evaluated token's logits (llama.cpp keeps them without logits_all).
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        top2 = np.partition(logits, -2)[-2:]
        tok = int(np.argmax(logits))
        out.append(tok)
        margins.append(float(abs(top2[1] - top2[0])))
        llm.eval([tok])
    return ids, out, margins


def inferscale_greedy(prompt):
    res = subprocess.run(
        [os.path.join(BIN, "inferscale"), "generate", "--model", MODEL, "--prompt", prompt,
         "--max-tokens", str(NEW_TOKENS), "--temperature", "0", "--ignore-eos", "--json"],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    return out["prompt_token_ids"], out["token_ids"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_prompt_ids_and_greedy_tokens(llm, prompt):
    want_ids, want_tokens, _ = llama_cpp_greedy(llm, prompt)
    got_ids, got_tokens = inferscale_greedy(prompt)
    assert got_ids == want_ids
    assert got_tokens == want_tokens


@pytest.mark.parametrize("prompt", TIED_PROMPTS)
def test_divergence_only_at_near_ties(llm, prompt):
    want_ids, want_tokens, margins = llama_cpp_greedy(llm, prompt)
    got_ids, got_tokens = inferscale_greedy(prompt)
    assert got_ids == want_ids
    first = next((i for i, (a, b) in enumerate(zip(got_tokens, want_tokens)) if a != b), None)
    if first is not None:
        assert margins[first] < TIE_MARGIN, (first, margins[first])
        print(f"diverged at token {first}, llama.cpp top-2 margin {margins[first]:.4f}")
