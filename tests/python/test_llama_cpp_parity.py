"""The bundled GGUF model through inferscale and through llama.cpp (llama-cpp-python, built from
source): the same prompt token ids and the same greedy continuation of 32 tokens on 5 prompts.

For a block-quantized GGUF our CPU backend reproduces ggml's CPU arithmetic bit for bit (Q8
activations and integer block dots, RMSNorm summed in double, ggml's RoPE angles, its exp in
softmax and SiLU, its summation orders in attention: src/backends/cpu/ggml_arith.h), so the
logits are identical, not merely close, and near-ties cannot flip. That exactness is against
llama.cpp built for an AVX-512 host (what pip builds on one); elsewhere ggml rounds differently."""
import json
import os
import subprocess

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

BIN = os.environ.get("INFERSCALE_BIN", "build/bin")
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
    # An f32 KV cache (type_k/type_v 0 = GGML_TYPE_F32) and no flash attention, like ours:
    # llama.cpp's default f16 cache and its flash-attention kernel round K, V and the softmax
    # differently, which flips near-tied greedy tokens for reasons unrelated to the engine.
    return llama_cpp.Llama(model_path=MODEL, n_ctx=512, n_threads=2, type_k=0, type_v=0,
                           flash_attn=False, verbose=False)


def llama_cpp_greedy(llm, prompt):
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    llm.reset()
    llm.eval(ids)
    out = []
    for _ in range(NEW_TOKENS):
        # The last evaluated token's logits (llama.cpp keeps them without logits_all).
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        tok = int(np.argmax(logits))
        out.append(tok)
        llm.eval([tok])
    return ids, out


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
    want_ids, want_tokens = llama_cpp_greedy(llm, prompt)
    got_ids, got_tokens = inferscale_greedy(prompt)
    assert got_ids == want_ids
    assert got_tokens == want_tokens
