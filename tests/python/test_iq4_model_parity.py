"""The bundled SmolLM2-135M requantized to IQ4_XS by llama.cpp itself (llama_model_quantize, the
library call behind llama-quantize), through inferscale and through llama.cpp: the same prompt
ids and the same 32 greedy tokens on 3 prompts, on each instruction-set leg of the suite
(conftest.py). SmolLM2's 576-wide rows are no multiple of 256, so llama.cpp stores most matrices
as IQ4_NL and only ffn_down (1536 wide) as IQ4_XS: one file holds both types. Their dots equal
ggml's own bit for bit (quantized_linear_types_test), but llama.cpp repacks IQ4_NL weights at load
and sums them in another order, so, as in test_real_model_parity.py, the continuations may part
at a near-tie. The file (about 90 MB) is made in a temporary folder, never committed."""
import ctypes
import os

import pytest

from llama_cpp_peer import assert_same_greedy_or_near_tie, open_llama_cpp

llama_cpp = pytest.importorskip("llama_cpp")

SOURCE = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"),
                      "SmolLM2-135M-Instruct.Q4_1.gguf")
NEW_TOKENS = 32
PROMPTS = [
    "The capital of France is",
    "<|im_start|>user\nWhat is the boiling point of water in Celsius?<|im_end|>\n"
    "<|im_start|>assistant\n",
    "List three primary colors:\n1.",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    if not os.path.exists(SOURCE):
        pytest.skip(f"{SOURCE} missing: run scripts/setup.sh")
    path = str(tmp_path_factory.mktemp("iq4") / "SmolLM2-135M-Instruct.IQ4_XS.gguf")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_IQ4_XS
    params.allow_requantize = True
    params.nthread = 2
    assert llama_cpp.llama_model_quantize(SOURCE.encode(), path.encode(),
                                          ctypes.byref(params)) == 0
    return path, open_llama_cpp(path, n_ctx=512)


def test_file_holds_both_iq4_types(model):
    gguf = pytest.importorskip("gguf")
    types = {t.tensor_type.name for t in gguf.GGUFReader(model[0]).tensors}
    assert {"IQ4_NL", "IQ4_XS"} <= types


@pytest.mark.parametrize("prompt", PROMPTS)
def test_same_prompt_ids_and_greedy_tokens(model, prompt):
    path, llm = model
    assert_same_greedy_or_near_tie(llm, path, prompt, NEW_TOKENS, rel_margin=0.05)
