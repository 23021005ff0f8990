"""Greedy continuations of one prompt by llama.cpp (llama-cpp-python) and by the inferscale CLI,
for the tests that hold the two engines to the same tokens."""
import json
import os
import subprocess

import numpy as np

BIN = os.environ.get("INFERSCALE_BIN", "build/bin")


def host_has_avx512():
    """Whether this CPU has what ggml's AVX-512 kernels need (AVX512F and AVX512DQ)."""
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    return "avx512f" in flags and "avx512dq" in flags


def engine_isa():
    """The llama.cpp build whose arithmetic the inferscale binaries reproduce on this run: the
    INFERSCALE_CPU_ISA cap, else the host's (src/backends/cpu/ggml_isa.h)."""
    return os.environ.get("INFERSCALE_CPU_ISA") or ("avx512" if host_has_avx512() else "avx2")


def peer_isa(llama_cpp):
    """avx512 or avx2: the instruction set the imported llama.cpp's ggml was compiled for."""
    info = llama_cpp.llama_print_system_info().decode()
    return "avx512" if "AVX512 = 1" in info else "avx2"


def open_llama_cpp(model, n_ctx, logits_all=False):
    """llama.cpp computing as inferscale does: an f32 KV cache (type_k/type_v 0 =
    GGML_TYPE_F32) and no flash attention. llama.cpp's default f16 cache and its flash-attention
    kernel round K, V and the softmax differently, which flips near-tied greedy tokens for
    reasons unrelated to the engine. The peer must be built for the instruction set inferscale
    reproduces on this run (conftest.py): another build rounds differently."""
    import llama_cpp
    assert peer_isa(llama_cpp) == engine_isa(), (
        f"llama.cpp peer built for {peer_isa(llama_cpp)}, inferscale reproducing {engine_isa()}: "
        f"{llama_cpp.__file__}")
    return llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_threads=2, type_k=0, type_v=0,
                           flash_attn=False, logits_all=logits_all, verbose=False)


def adds_bos(llm):
    """Whether the model's GGUF asks for BOS before a prompt (as inferscale then adds it)."""
    return llm.metadata.get("tokenizer.ggml.add_bos_token") == "true"


def llama_cpp_greedy(llm, prompt, new_tokens, frequency_penalty=0.0, presence_penalty=0.0,
                     add_bos=False):
    """(prompt ids, greedy ids) of `prompt` as text with special tokens, BOS added only with
    `add_bos`. With OpenAI's penalties, each step takes the argmax of the logits less, in f32,
    count * frequency_penalty + presence_penalty for every token generated `count` > 0 times
    so far."""
    ids = llm.tokenize(prompt.encode(), add_bos=add_bos, special=True)
    llm.reset()
    llm.eval(ids)
    out, counts = [], {}
    for _ in range(new_tokens):
        # llama.cpp's row of the last evaluated token (index -1), with or without logits_all.
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        if counts and (frequency_penalty or presence_penalty):
            logits = logits.astype(np.float32)  # a copy: llama.cpp's row stays as it is
            for t, n in counts.items():
                logits[t] -= np.float32(n) * np.float32(frequency_penalty) + \
                    np.float32(presence_penalty)
        out.append(int(np.argmax(logits)))
        counts[out[-1]] = counts.get(out[-1], 0) + 1
        llm.eval([out[-1]])
    return ids, out


def inferscale_greedy(model, prompt, new_tokens):
    """(prompt ids, greedy ids) from `inferscale generate --json` on `model`."""
    res = subprocess.run(
        [os.path.join(BIN, "inferscale"), "generate", "--model", model, "--prompt", prompt,
         "--max-tokens", str(new_tokens), "--temperature", "0", "--ignore-eos", "--json"],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    return out["prompt_token_ids"], out["token_ids"]


def llama_cpp_margins(llm, prompt, tokens, add_bos=False):
    """llama.cpp's top-2 logit margin and the rms of its logits at each step of continuing
    `prompt` with `tokens`: (margin, rms) per step."""
    llm.reset()
    llm.eval(llm.tokenize(prompt.encode(), add_bos=add_bos, special=True))
    out = []
    for t in tokens:
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        top2 = np.partition(logits, -2)[-2:]
        out.append((float(top2[1] - top2[0]), float(np.sqrt(np.mean(np.square(logits))))))
        llm.eval([t])
    return out


def assert_same_greedy_or_near_tie(llm, model, prompt, new_tokens, rel_margin):
    """As assert_same_greedy, except that the continuations may part at a step where
    llama.cpp's top-2 margin is below rel_margin x the rms of its logits (a near-tie another
    f32 summation order can flip); the tokens after that step are not compared. BOS comes
    first where the GGUF asks for it, in both engines."""
    bos = adds_bos(llm)
    want_ids, want_tokens = llama_cpp_greedy(llm, prompt, new_tokens, add_bos=bos)
    got_ids, got_tokens = inferscale_greedy(model, prompt, new_tokens)
    assert got_ids == want_ids
    if got_tokens == want_tokens:
        return
    step = next(i for i, (a, b) in enumerate(zip(got_tokens, want_tokens)) if a != b)
    margin, rms = llama_cpp_margins(llm, prompt, want_tokens, add_bos=bos)[step]
    assert margin < rel_margin * rms, (
        f"parted at step {step} ({got_tokens[step]} against {want_tokens[step]}) where "
        f"llama.cpp's top-2 margin {margin:.4f} is not a near-tie (rms {rms:.4f})")


def assert_same_greedy(llm, model, prompt, new_tokens):
    """Both engines tokenize `prompt` alike and continue it with the same greedy tokens."""
    want_ids, want_tokens = llama_cpp_greedy(llm, prompt, new_tokens)
    got_ids, got_tokens = inferscale_greedy(model, prompt, new_tokens)
    assert got_ids == want_ids
    assert got_tokens == want_tokens


def assert_completion_logprobs(llm, prompt, logprobs, tolerance, add_bos=False):
    """A completion's logprobs (the OpenAI completions form: tokens, token_logprobs and
    top_logprobs, greedy) against llama.cpp's log-softmax of its own logits along the same
    prompt: at each step the token is llama.cpp's argmax, its log-probability and the k-th
    largest of the top_logprobs are llama.cpp's within `tolerance`, and the listed tokens are
    llama.cpp's top ones with their log-probabilities within `tolerance` (where llama.cpp's
    last listed and next tokens lie within `tolerance`, either may be listed). Stops where the
    continuations part (the greedy tests judge that step); returns the number of steps
    compared."""
    top_n = len(logprobs.top_logprobs[0])
    llm.reset()
    llm.eval(llm.tokenize(prompt.encode(), add_bos=add_bos, special=True))

    def piece(t):
        return llm.detokenize([int(t)], special=True).decode("utf-8", "replace")

    for step, token_text in enumerate(logprobs.tokens):
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
        logits = logits.astype(np.float64)
        want = logits - (logits.max() + np.log(np.exp(logits - logits.max()).sum()))
        order = np.argsort(-want, kind="stable")
        token = int(order[0])
        if token_text != piece(token):
            return step
        assert abs(logprobs.token_logprobs[step] - want[token]) <= tolerance, (
            step, logprobs.token_logprobs[step], want[token])
        got = logprobs.top_logprobs[step]
        likely = {piece(t): want[t] for t in reversed(order[:top_n + 5])}
        top = {piece(t) for t in order[:top_n]}
        if want[order[top_n - 1]] - want[order[top_n]] > tolerance:
            assert set(got) == top, (step, sorted(got), sorted(top))
        for text, value in got.items():
            assert text in likely, (step, text, sorted(top))
            assert abs(value - likely[text]) <= tolerance, (step, text, value, likely[text])
        ranked = sorted(got.values(), reverse=True)
        assert len(ranked) == top_n
        for k, value in enumerate(ranked):
            assert abs(value - want[order[k]]) <= tolerance, (step, k, value, want[order[k]])
        llm.eval([token])
    return len(logprobs.tokens)
