"""The rest of the OpenAI surface against the real `inferscale serve` binary, each field against
its definition: `n` (copies sharing the prompt's KV blocks, derived seeds, streamed choice
indices), `logit_bias`, `echo`, completions with lists of prompts and with token-id prompts,
GET /v1/models/{id}, vLLM's /tokenize and /detokenize, and unimplemented fields as 400s."""
import os

import httpx
import openai
import pytest

from server_process import MODEL, MODEL_ID, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("surface"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def c(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


def complete(c, prompt, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 8)
    return c.completions.create(model=MODEL_ID, prompt=prompt, **kw)


def post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=60)


def tokenize(server, text, add_special_tokens=True):
    r = post(server, "/tokenize", {"model": MODEL_ID, "prompt": text,
                                   "add_special_tokens": add_special_tokens})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def detokenize(server, tokens):
    r = post(server, "/detokenize", {"model": MODEL_ID, "tokens": tokens})
    assert r.status_code == 200, r.text
    return r.json()["prompt"]


def bad_param(call):
    with pytest.raises(openai.BadRequestError) as e:
        call()
    return e.value.body["param"]


def test_models_retrieve_answers_the_served_model_and_404s_others(c):
    m = c.models.retrieve(MODEL_ID)
    assert m.id == MODEL_ID and m.object == "model"
    with pytest.raises(openai.NotFoundError) as e:
        c.models.retrieve("gpt-9")
    assert e.value.body["code"] == "model_not_found"


def test_n_greedy_choices_are_equal_and_usage_counts_the_prompt_once(c):
    one = complete(c, "The three primary colours are", max_tokens=12)
    four = complete(c, "The three primary colours are", max_tokens=12, n=4)
    assert [ch.index for ch in four.choices] == [0, 1, 2, 3]
    assert all(ch.text == one.choices[0].text for ch in four.choices)
    assert four.usage.prompt_tokens == one.usage.prompt_tokens
    assert four.usage.completion_tokens == 4 * one.usage.completion_tokens
    chat = c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Hi!"}],
                                     temperature=0, max_tokens=8, n=3)
    assert len({ch.message.content for ch in chat.choices}) == 1
    assert [ch.index for ch in chat.choices] == [0, 1, 2]


def test_n_copies_prefill_the_shared_prompt_once(server, c):
    prompt = " ".join(f"item{i}" for i in range(60)) + " and then"
    before = server.metrics()
    r = complete(c, prompt, max_tokens=1, n=4)
    after = server.metrics()
    computed = after["inferscale_computed_tokens_total"] - before["inferscale_computed_tokens_total"]
    p = r.usage.prompt_tokens
    assert p > 64
    # Four separate prefills would compute 4p tokens; the copies take the first one's full
    # blocks from the prefix cache and compute only their last, partial block.
    assert computed < 2 * p, (computed, p)
    assert after["inferscale_prefix_cached_tokens_total"] - before["inferscale_prefix_cached_tokens_total"] >= 3 * (p - 32)


def test_n_with_a_seed_gives_different_reproducible_choices(c):
    kw = dict(temperature=1.0, max_tokens=16, seed=7)
    three = complete(c, "Once upon a time", n=3, **kw)
    again = complete(c, "Once upon a time", n=3, **kw)
    one = complete(c, "Once upon a time", **kw)
    texts = [ch.text for ch in three.choices]
    assert texts == [ch.text for ch in again.choices]
    assert len(set(texts)) > 1
    assert texts[0] == one.choices[0].text


def test_streaming_n_chunks_carry_their_choice_index(c):
    full = complete(c, "List some fruits:", max_tokens=10, n=3)
    texts, finishes = {}, {}
    chunks = list(complete(c, "List some fruits:", max_tokens=10, n=3, stream=True,
                           stream_options={"include_usage": True}))
    for ch in chunks:
        for choice in ch.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
            if choice.finish_reason:
                finishes.setdefault(choice.index, []).append(choice.finish_reason)
    assert texts == {ch.index: ch.text for ch in full.choices}
    assert finishes == {ch.index: [ch.finish_reason] for ch in full.choices}
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_n_out_of_range_is_a_400_naming_n(c):
    for n in (0, 17):
        assert bad_param(lambda: complete(c, "hi", n=n)) == "n"


def test_logit_bias_removes_and_forces_greedy_tokens(server, c):
    prompt = "The capital of France is"
    first = complete(c, prompt, max_tokens=1).choices[0].text
    ids = tokenize(server, first, add_special_tokens=False)
    assert len(ids) == 1 and detokenize(server, ids) == first
    banned = complete(c, prompt, max_tokens=1, logit_bias={str(ids[0]): -100})
    assert banned.choices[0].text != first
    forced_id = tokenize(server, " zebra", add_special_tokens=False)[0]
    forced = complete(c, prompt, max_tokens=3, logit_bias={str(forced_id): 100})
    assert forced.choices[0].text == detokenize(server, [forced_id] * 3)


def test_bad_logit_bias_is_a_400_naming_it(c):
    for bias in ({"abc": 1}, {"5": 101}, {"99999999": 1}, {"-1": 1}, {"5": "x"}):
        assert bad_param(lambda: complete(c, "hi", logit_bias=bias)) == "logit_bias"


def test_echo_prepends_the_prompt(server, c):
    prompt = "The capital of France is"
    plain = complete(c, prompt).choices[0].text
    assert complete(c, prompt, echo=True).choices[0].text == prompt + plain
    streamed = "".join(ch.choices[0].text for ch in complete(c, prompt, echo=True, stream=True)
                       if ch.choices)
    assert streamed == prompt + plain
    ids = tokenize(server, prompt)
    assert complete(c, ids, echo=True).choices[0].text == detokenize(server, ids) + plain


def test_echo_with_logprobs_scores_the_prompt_tokens(server, c):
    prompt = "The capital of France is"
    ids = tokenize(server, prompt)
    plain = complete(c, prompt, max_tokens=4, logprobs=2)
    echoed = complete(c, prompt, max_tokens=4, logprobs=2, echo=True)
    lp = echoed.choices[0].logprobs
    p = echoed.usage.prompt_tokens
    assert p == len(ids) and len(lp.tokens) == p + echoed.usage.completion_tokens
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    assert all(len(top) >= 1 for top in lp.top_logprobs[1:])
    # The generated tokens' entries are those of the call without echo.
    assert lp.tokens[p:] == plain.choices[0].logprobs.tokens
    assert lp.token_logprobs[p:] == pytest.approx(plain.choices[0].logprobs.token_logprobs, abs=1e-3)
    # Prompt token k's entry is its log-probability after tokens < k: what a completion of
    # that prefix reports when a +100 bias makes it pick token k (log-probabilities are the
    # model's own, before the bias).
    for k in (1, p - 1):
        forced = complete(c, ids[:k], max_tokens=1, logprobs=0, logit_bias={str(ids[k]): 100})
        assert forced.choices[0].logprobs.tokens[0] == lp.tokens[k]
        assert forced.choices[0].logprobs.token_logprobs[0] == pytest.approx(lp.token_logprobs[k], abs=1e-3)
    chunks = complete(c, prompt, max_tokens=4, logprobs=2, echo=True, stream=True)
    streamed = [ch.choices[0].logprobs for ch in chunks if ch.choices and ch.choices[0].logprobs]
    assert sum((s.tokens for s in streamed), []) == lp.tokens


def test_a_list_of_prompts_gives_n_choices_each_in_order(c):
    prompts = ["The capital of France is", "Two plus two equals"]
    singles = [complete(c, p) for p in prompts]
    both = complete(c, prompts, n=2)
    assert [ch.index for ch in both.choices] == [0, 1, 2, 3]
    assert [ch.text for ch in both.choices] == [s.choices[0].text for s in singles for _ in range(2)]
    assert both.usage.prompt_tokens == sum(s.usage.prompt_tokens for s in singles)
    assert both.usage.completion_tokens == 2 * sum(s.usage.completion_tokens for s in singles)


def test_token_id_prompts_equal_their_text(server, c):
    prompts = ["The capital of France is", "Two plus two equals"]
    singles = [complete(c, p).choices[0].text for p in prompts]
    ids = [tokenize(server, p) for p in prompts]
    assert complete(c, ids[0]).choices[0].text == singles[0]
    assert [ch.text for ch in complete(c, ids).choices] == singles
    for bad in ([5, 99999999], [[1, 2], [-1]], [1, "a"], [], [[]]):
        assert bad_param(lambda: complete(c, bad)) == "prompt"


def test_tokenize_counts_what_the_completions_prefill(server, c):
    prompt = "The capital of France is"
    r = post(server, "/tokenize", {"model": MODEL_ID, "prompt": prompt}).json()
    assert r["count"] == len(r["tokens"]) == complete(c, prompt).usage.prompt_tokens
    assert r["max_model_len"] > r["count"]
    messages = [{"role": "user", "content": "Name a colour."}]
    chat = c.chat.completions.create(model=MODEL_ID, messages=messages, temperature=0, max_tokens=2)
    with_prompt = post(server, "/tokenize", {"model": MODEL_ID, "messages": messages}).json()
    assert with_prompt["count"] == chat.usage.prompt_tokens
    without = post(server, "/tokenize", {"model": MODEL_ID, "messages": messages,
                                         "add_generation_prompt": False}).json()
    assert without["tokens"] == with_prompt["tokens"][:without["count"]]
    assert without["count"] < with_prompt["count"]


def test_detokenize_inverts_tokenize(server):
    text = "Hello world, héllo wörld!"
    assert detokenize(server, tokenize(server, text, add_special_tokens=False)) == text


def test_tokenizer_routes_reject_bad_input(server):
    for path, body, param in (("/tokenize", {"prompt": "x", "bogus": 1}, "bogus"),
                              ("/tokenize", {"prompt": 5}, "prompt"),
                              ("/detokenize", {"tokens": [99999999]}, "tokens"),
                              ("/detokenize", {"tokens": "abc"}, "tokens")):
        r = post(server, path, body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text
    r = post(server, "/tokenize", {"model": "gpt-9", "prompt": "x"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_unimplemented_fields_are_a_400_naming_them(c):
    assert bad_param(lambda: complete(c, "hi", suffix="!")) == "suffix"
    assert bad_param(lambda: complete(c, "hi", best_of=2)) == "best_of"
    assert bad_param(lambda: complete(c, "hi", extra_body={"memory": {"mode": "none"}})) == "memory"
    assert bad_param(lambda: c.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "hi"}],
        extra_body={"frobnicate": 1})) == "frobnicate"
    assert bad_param(lambda: complete(c, "hi", stream=True,
                                      stream_options={"include_usage": True, "bogus": 1})) == \
        "stream_options.bogus"
