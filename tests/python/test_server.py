"""The real `inferscale serve` binary driven by the official openai client: chat and completions,
streaming and not, stop sequences, usage, sampling penalties and top_k, the memory API, users
with no memories, errors, tenant isolation, and a port in use."""
import asyncio
import json
import os
import socket
import subprocess

import httpx
import openai
import pytest

from server_process import BIN, MODEL, MODEL_ID, SERVED_IDS, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

KEYS = {"sk-alice": ["alice"], "sk-bob": ["bob"], "sk-admin": ["*"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("server"), keys=KEYS)
    yield s
    s.stop()


def client(server, key="sk-admin"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def cli_chat(message, max_tokens):
    """The same question through `inferscale chat`, a separate single-sequence code path."""
    res = subprocess.run([BIN, "chat", "--model", MODEL, "--message", message, "--max-tokens",
                          str(max_tokens)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.rstrip("\n")


def chat(c, content, **kw):
    return c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": content}],
                                     temperature=0, **kw)


def test_models_lists_the_served_model(server):
    assert [m.id for m in client(server).models.list().data] == SERVED_IDS


def test_greedy_chat_matches_the_cli(server):
    question = "Name three colours of the rainbow."
    r = chat(client(server), question, max_tokens=24)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == cli_chat(question, 24)
    assert r.usage.completion_tokens == 24 and r.choices[0].finish_reason == "length"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_streaming_equals_non_streaming_and_reports_usage(server):
    c = client(server)
    full = chat(c, "Write one sentence about the sea.", max_tokens=32)
    chunks = list(chat(c, "Write one sentence about the sea.", max_tokens=32, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == full.choices[0].message.content
    finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_stop_sequences_cut_the_answer_and_never_leak_into_the_stream(server):
    c = client(server)
    question = "Count from one to ten."
    full = chat(c, question, max_tokens=40).choices[0].message.content
    # A stop string from the middle of the answer, at its first occurrence, likely spanning
    # a token boundary.
    k = next(k for k in range(len(full) // 3, len(full) - 5)
             if full[k:k + 5].strip() and full.index(full[k:k + 5]) == k)
    stop = full[k:k + 5]
    cut = full[:k]
    r = chat(c, question, max_tokens=40, stop=[stop])
    assert r.choices[0].message.content == cut and r.choices[0].finish_reason == "stop"
    pieces = [ch.choices[0].delta.content or "" for ch in chat(c, question, max_tokens=40, stop=stop,
                                                                stream=True) if ch.choices]
    assert "".join(pieces) == cut
    assert all(stop not in p for p in pieces)


def test_completions_stream_and_not(server):
    c = client(server)
    r = c.completions.create(model=MODEL_ID, prompt="The capital of France is", max_tokens=12,
                             temperature=0)
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model=MODEL_ID, prompt="The capital of France is", max_tokens=12, temperature=0, stream=True)
        if ch.choices)
    assert r.choices[0].text == streamed and len(r.choices[0].text) > 0
    res = subprocess.run([BIN, "generate", "--model", MODEL, "--prompt", "The capital of France is",
                          "--max-tokens", "12"], capture_output=True, text=True, timeout=300)
    assert res.stdout.rstrip("\n").endswith(r.choices[0].text.rstrip("\n"))


def test_seeded_sampling_is_reproducible(server):
    c = client(server)
    a, b = (c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Tell me a story."}],
                                      temperature=0.9, top_p=0.9, seed=1234, max_tokens=24)
            for _ in range(2))
    assert a.choices[0].message.content == b.choices[0].message.content


def test_memory_api_round_trip_and_memory_in_chat(server):
    c = client(server)
    added = c.post("/memories", cast_to=object, body={
        "user_id": "alice", "facts": ["Alice has a dog named Biscuit.", "Alice works as a nurse."]})
    ids = [m["id"] for m in added["results"]]
    assert [m["memory"] for m in added["results"]] == ["Alice has a dog named Biscuit.",
                                                       "Alice works as a nurse."]
    c.post("/memories", cast_to=object, body={"user_id": "bob", "facts": ["Bob has a cat named Pixel."]})
    listed = c.get("/memories", cast_to=object, options={"params": {"user_id": "alice"}})
    assert [m["id"] for m in listed["results"]] == ids
    assert c.get(f"/memories/{ids[1]}", cast_to=object)["memory"] == "Alice works as a nurse."
    found = c.post("/memories/search", cast_to=object, body={"user_id": "alice", "query": "dog", "top_k": 1})
    assert [m["id"] for m in found["results"]] == [ids[0]]
    # Turns are stored (and their facts extracted) for a user of their own: what the bundled
    # model extracts is no fact to answer from.
    turns = c.post("/memories", cast_to=object, body={
        "user_id": "alice-turns",
        "messages": [{"role": "user", "content": "I adopted Biscuit in May."}]})
    assert turns["turns_added"] == 1

    # One fact per question: the bundled 135M model answers from the one it is given, and loses
    # it among two (hybrid retrieval returns the unrelated fact as well).
    for mode in ["kv", "prompt"]:
        r = client(server, "sk-alice").chat.completions.create(
            model=MODEL_ID, user="alice", extra_body={"memory": {"mode": mode, "top_k": 1}},
            messages=[{"role": "user", "content": "What is the name of my dog?"}],
            temperature=0, max_tokens=24)
        assert "Biscuit" in r.choices[0].message.content, (mode, r.choices[0].message.content)
        if mode == "kv":
            assert r.usage.prompt_tokens_details.cached_tokens > 0
    # A kv request that ends in its first forward (the one that injects its memory layer by
    # layer on an idle server) leaves the server serving.
    one = client(server, "sk-alice").chat.completions.create(
        model=MODEL_ID, user="alice", extra_body={"memory": {"mode": "kv", "top_k": 5}},
        messages=[{"role": "user", "content": "What is the name of my dog?"}], temperature=0,
        max_tokens=1)
    assert one.usage.completion_tokens == 1 and one.usage.prompt_tokens_details.cached_tokens > 0
    r = client(server, "sk-bob").chat.completions.create(
        model=MODEL_ID, extra_body={"metadata": {"user_id": "bob"}, "memory": {"mode": "kv"}},
        messages=[{"role": "user", "content": "What is the name of my dog?"}], temperature=0, max_tokens=24)
    assert "Biscuit" not in r.choices[0].message.content

    updated = c.put(f"/memories/{ids[0]}", cast_to=object, body={"text": "Alice has a dog named Mango."})
    assert updated["memory"] == "Alice has a dog named Mango."
    r = chat(client(server, "sk-alice"), "What is the name of my dog?", max_tokens=24, user="alice",
             extra_body={"memory": {"top_k": 1}})
    assert "Mango" in r.choices[0].message.content and "Biscuit" not in r.choices[0].message.content
    assert c.delete(f"/memories/{ids[1]}", cast_to=object) == {"id": ids[1], "deleted": True}
    with pytest.raises(openai.NotFoundError):
        c.get(f"/memories/{ids[1]}", cast_to=object)
    assert c.delete("/memories", cast_to=object, options={"params": {"user_id": "bob"}})["deleted"]
    assert c.get("/memories", cast_to=object, options={"params": {"user_id": "bob"}}) == {"results": []}


def test_return_facts_reports_the_search_top_k(server):
    """memory.return_facts: the answer carries the facts retrieved for it, the same top k that
    /search ranks for the question (same method), in the body or on the first streamed chunk;
    absent unless asked; a non-boolean is a 400 naming it."""
    admin = client(server)
    admin.post("/memories", cast_to=object, body={"user_id": "dora", "facts": [
        "Dora has a parrot named Kiwi.", "Dora lives in Oslo.", "Dora's parrot eats seeds.",
        "Dora drives a red car."]})
    question = "What does my parrot eat?"
    dora = client(server)
    for method in ("bm25", "dense", "hybrid"):
        found = admin.post("/memories/search", cast_to=object, body={
            "user_id": "dora", "query": question, "top_k": 2, "retrieval": method})["results"]
        expected = [{"id": f["id"], "memory": f["memory"], "score": pytest.approx(f["score"])}
                    for f in found]
        memory = {"mode": "kv", "top_k": 2, "retrieval": method, "return_facts": True}
        r = chat(dora, question, max_tokens=4, user="dora", extra_body={"memory": memory})
        assert r.model_extra["memory_facts"] == expected, method
        chunks = list(chat(dora, question, max_tokens=4, user="dora", stream=True,
                           extra_body={"memory": memory}))
        assert chunks[0].model_extra["memory_facts"] == expected, method
        assert all("memory_facts" not in c.model_extra for c in chunks[1:])
    plain = chat(dora, question, max_tokens=4, user="dora", extra_body={"memory": {"top_k": 2}})
    assert "memory_facts" not in plain.model_extra
    # A user without facts, and mode none, report an empty list.
    for user, mode in (("nobody-yet", "kv"), ("dora", "none")):
        r = chat(dora, question, max_tokens=2, user=user,
                 extra_body={"memory": {"mode": mode, "return_facts": True}})
        assert r.model_extra["memory_facts"] == [], (user, mode)
    res = raw(server, "POST", "/v1/chat/completions", json={
        "model": MODEL_ID, "user": "dora", "messages": [{"role": "user", "content": question}],
        "memory": {"return_facts": "yes"}})
    assert error_of(res, 400)["param"] == "memory.return_facts"


def test_tenants_never_see_each_others_memories(server):
    admin = client(server)
    carol = admin.post("/memories", cast_to=object, body={"user_id": "carol", "facts": ["Carol's PIN is 4321."]})
    fact_id = carol["results"][0]["id"]
    alice = client(server, "sk-alice")
    with pytest.raises(openai.PermissionDeniedError):
        alice.get("/memories", cast_to=object, options={"params": {"user_id": "carol"}})
    with pytest.raises(openai.PermissionDeniedError):
        alice.post("/memories/search", cast_to=object, body={"user_id": "carol", "query": "PIN"})
    with pytest.raises(openai.NotFoundError):  # the id exists, but not for this key
        alice.get(f"/memories/{fact_id}", cast_to=object)
    with pytest.raises(openai.NotFoundError):
        alice.delete(f"/memories/{fact_id}", cast_to=object)
    with pytest.raises(openai.PermissionDeniedError):
        chat(alice, "What is my PIN?", max_tokens=8, user="carol")
    with pytest.raises(openai.PermissionDeniedError):
        alice.post("/memories", cast_to=object, body={"user_id": "carol", "facts": ["x"]})
    with pytest.raises(openai.AuthenticationError):
        client(server, "sk-nobody").models.list()
    assert admin.get(f"/memories/{fact_id}", cast_to=object)["memory"] == "Carol's PIN is 4321."


def test_a_user_with_no_memories_is_answered_without_memory(server):
    """OpenAI's docs tell apps to set `user` for abuse tracking: a user the server has never seen,
    or whose facts are all deleted, is answered as memory mode none (cached_tokens counts only
    prefix-cache hits), and lists and searches as an empty list, as Mem0 answers."""
    c = client(server)
    erin = c.post("/memories", cast_to=object, body={"user_id": "erin", "facts": ["Erin rows."]})
    c.delete(f"/memories/{erin['results'][0]['id']}", cast_to=object)
    question = "Which planet is known as the red planet?"
    for user in ["stranger", "erin"]:
        before = server.metrics()
        r = chat(c, question, max_tokens=16, user=user)
        after = server.metrics()
        plain = chat(c, question, max_tokens=16, user=user, extra_body={"memory": {"mode": "none"}})
        assert r.choices[0].message.content == plain.choices[0].message.content
        assert r.usage.prompt_tokens == plain.usage.prompt_tokens
        assert after["inferscale_injected_tokens_total"] == before["inferscale_injected_tokens_total"]
        assert r.usage.prompt_tokens_details.cached_tokens == (
            after["inferscale_prefix_cached_tokens_total"] - before["inferscale_prefix_cached_tokens_total"])
        assert c.get("/memories", cast_to=object, options={"params": {"user_id": user}}) == {"results": []}
        assert c.post("/memories/search", cast_to=object,
                      body={"user_id": user, "query": "planet"}) == {"results": []}
    # API keys keep their scope: alice's key reaches no other user, known or not.
    alice = client(server, "sk-alice")
    with pytest.raises(openai.PermissionDeniedError):
        chat(alice, question, max_tokens=4, user="mallory")
    with pytest.raises(openai.PermissionDeniedError):
        alice.get("/memories", cast_to=object, options={"params": {"user_id": "mallory"}})
    with pytest.raises(openai.PermissionDeniedError):
        alice.post("/memories/search", cast_to=object, body={"user_id": "mallory", "query": "x"})


def test_a_second_server_on_a_port_in_use_exits_and_the_first_keeps_serving(server, tmp_path):
    """cpp-httplib's default SO_REUSEPORT let a second server bind a port in use (the kernel then
    shares the connections between the two): now its start-up ends in an error."""
    res = subprocess.run([BIN, "serve", "--model", MODEL, "--port", str(server.port), "--db",
                          str(tmp_path / "memory.db"), "--chunk-dir", "none"],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 1, res.stderr
    assert f"error: port {server.port} is in use" in res.stderr and "serving" not in res.stderr
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}
    assert [m.id for m in client(server).models.list().data] == SERVED_IDS


def time_wait_ports():
    """The local ports of the IPv4 TCP sockets in TIME_WAIT."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f][1:]
    return {int(r[1].split(":")[1], 16) for r in rows if r[3] == "06"}


def test_a_restart_binds_the_port_its_predecessor_just_left(tmp_path):
    """SO_REUSEADDR stays: the connections the stopped server closed sit in TIME_WAIT on its
    port, and a new server binds that port at once."""
    s = Server(tmp_path)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", s.port)) as conn:
            conn.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while conn.recv(4096):  # until the server closes first
                pass
    s.stop()
    assert s.port in time_wait_ports()
    again = Server(tmp_path, port=s.port)
    try:
        assert httpx.get(again.url + "/health").json() == {"status": "ok"}
    finally:
        again.stop()


def raw(server, method, path, key="sk-admin", **kw):
    return httpx.request(method, server.url + path, headers={"Authorization": f"Bearer {key}"}, **kw)


def error_of(res, status):
    assert res.status_code == status, res.text
    body = res.json()["error"]
    assert body["message"] and body["type"]
    return body


def test_errors_are_openai_json_with_the_right_status(server):
    c = client(server)
    error_of(raw(server, "POST", "/v1/chat/completions", content=b"{not json"), 400)
    error_of(raw(server, "POST", "/v1/chat/completions", content=b"[1, 2]"), 400)
    assert error_of(raw(server, "POST", "/v1/chat/completions", json={
        "model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}),
        400)["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "hi"}],
                                  temperature=7)
    with pytest.raises(openai.BadRequestError):
        c.chat.completions.create(model=MODEL_ID, messages=[])
    with pytest.raises(openai.NotFoundError) as e:
        c.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError):  # forgetting a user with nothing stored
        c.delete("/memories", cast_to=object, options={"params": {"user_id": "nobody-here"}})
    with pytest.raises(openai.NotFoundError):
        c.get("/memories/999999", cast_to=object)
    with pytest.raises(openai.NotFoundError):
        c.put("/memories/abc", cast_to=object, body={"text": "x"})
    with pytest.raises(openai.BadRequestError):  # longer than the context
        chat(c, "word " * 5000, max_tokens=4)
    with pytest.raises(openai.BadRequestError):
        c.post("/memories", cast_to=object, body={"user_id": "alice", "facts": [""]})
    for field, value in (("frequency_penalty", 2.5), ("presence_penalty", -3), ("top_k", -2)):
        with pytest.raises(openai.BadRequestError) as e:
            chat(c, "hi", max_tokens=2, extra_body={field: value})
        assert e.value.body["param"] == field
    error_of(raw(server, "POST", "/v1/memories", content=b"x" * (5 << 20)), 413)
    error_of(raw(server, "GET", "/v1/nothing-here"), 404)
    # The server is still fine.
    assert chat(c, "Say hi.", max_tokens=4).choices[0].message.content


def test_overload_is_503_and_the_server_recovers(tmp_path):
    s = Server(tmp_path, "--max-requests", "1")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        stream = c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "Tell a long story."}],
                                           max_tokens=200, temperature=0, stream=True)
        next(iter(stream))  # the first request is in flight
        with pytest.raises(openai.InternalServerError) as e:
            chat(c, "hi", max_tokens=2)
        assert e.value.status_code == 503
        stream.close()
        for _ in range(100):
            if s.metrics()["inferscale_requests_running"] == 0:
                break
            import time
            time.sleep(0.05)
        assert chat(c, "hi", max_tokens=2).choices[0].message.content is not None
    finally:
        s.stop()


def test_facts_are_encoded_in_the_background_not_on_the_request_path(server):
    import time
    c = client(server)
    before = server.metrics()
    texts = [f"Dana's locker number {i} holds item {i * 7}." for i in range(6)]
    c.post("/memories", cast_to=object, body={"user_id": "dana", "facts": texts})
    for _ in range(600):
        m = server.metrics()
        if m["inferscale_memory_facts_to_encode"] == 0 and \
                m["inferscale_chunk_pool_misses_total"] >= before["inferscale_chunk_pool_misses_total"] + 6:
            break
        time.sleep(0.1)
    assert m["inferscale_chunk_pool_misses_total"] == before["inferscale_chunk_pool_misses_total"] + 6
    r = chat(c, "What does locker 3 hold?", max_tokens=8, user="dana",
             extra_body={"memory": {"mode": "kv", "top_k": 6}})
    assert r.usage.prompt_tokens_details.cached_tokens > 0
    after = server.metrics()
    # The request found every chunk encoded already.
    assert after["inferscale_chunk_pool_misses_total"] == m["inferscale_chunk_pool_misses_total"]
    assert after["inferscale_chunk_pool_hits_total"] >= m["inferscale_chunk_pool_hits_total"] + 6


def test_step_time_metrics_split_forward_from_host_work(server):
    c = client(server)
    before = server.metrics()
    chat(c, "Name a color.", max_tokens=4)
    after = server.metrics()
    steps = after["inferscale_engine_steps_total"] - before["inferscale_engine_steps_total"]
    step_s = after["inferscale_engine_step_seconds_total"] - before["inferscale_engine_step_seconds_total"]
    forward_s = after["inferscale_engine_forward_seconds_total"] - before["inferscale_engine_forward_seconds_total"]
    assert steps >= 4  # the prompt and at least three decode steps
    assert 0 < forward_s <= step_s


def test_completion_logprobs_equal_llama_cpp(server):
    """The bundled model's logits are llama.cpp's bit for bit on the CPU, so the log-probabilities
    the server reports must be llama.cpp's log-softmax of its own logits, and the top-5 tokens
    its five largest."""
    pytest.importorskip("llama_cpp")
    from llama_cpp_peer import assert_completion_logprobs, open_llama_cpp
    prompt, steps = "The capital of France is", 6
    r = client(server).completions.create(model=MODEL_ID, prompt=prompt, max_tokens=steps,
                                          temperature=0, logprobs=5, extra_body={"ignore_eos": True})
    got = r.choices[0].logprobs
    assert len(got.tokens) == steps and len(got.top_logprobs) == steps
    assert "".join(got.tokens) == r.choices[0].text
    llm = open_llama_cpp(MODEL, 512)
    assert r.usage.prompt_tokens == len(llm.tokenize(prompt.encode(), add_bos=False, special=True))
    assert assert_completion_logprobs(llm, prompt, got, tolerance=1e-4) == steps


def test_penalized_greedy_equals_llama_cpp_logits_with_openai_penalties(server):
    """frequency_penalty and presence_penalty over the generated tokens (OpenAI's definition, as
    vLLM counts them): the server's greedy tokens are the argmax of llama.cpp's logits (the
    bundled model's, bit for bit ours on the CPU) less count * frequency + presence for each token
    generated so far. The prompt repeats, so plain greedy repeats too and the penalties matter."""
    pytest.importorskip("llama_cpp")
    from llama_cpp_peer import llama_cpp_greedy, open_llama_cpp
    prompt, steps = "red, green, blue, red, green, blue, red, green, blue, red,", 16
    llm = open_llama_cpp(MODEL, 512)

    def llama_cpp_tokens(frequency, presence):
        _, ids = llama_cpp_greedy(llm, prompt, steps, frequency, presence)
        return [llm.detokenize([t], special=True).decode("utf-8", "replace") for t in ids]

    c = client(server)
    plain = llama_cpp_tokens(0.0, 0.0)
    # (0.5, 0) alone continues the pattern as plain greedy does; presence 1.5 beside it does not.
    assert llama_cpp_tokens(0.5, 0.0) == plain
    for frequency, presence in ((0.8, 0.0), (0.5, 1.5), (0.3, 2.0), (-1.0, 0.0)):
        want = llama_cpp_tokens(frequency, presence)
        assert want != plain
        kw = {"frequency_penalty": frequency, "presence_penalty": presence}
        r = c.completions.create(model=MODEL_ID, prompt=prompt, max_tokens=steps, temperature=0,
                                 logprobs=0, extra_body={"ignore_eos": True}, **kw)
        assert r.choices[0].logprobs.tokens == want, (frequency, presence)
        streamed = "".join(chunk.choices[0].text for chunk in c.completions.create(
            model=MODEL_ID, prompt=prompt, max_tokens=steps, temperature=0, stream=True,
            extra_body={"ignore_eos": True}, **kw) if chunk.choices)
        assert streamed == "".join(want)


def test_top_k_one_is_greedy_at_any_temperature(server):
    """vLLM's top_k: with one token kept, sampling at temperature 1.5 and any seed is greedy."""
    c = client(server)
    greedy = chat(c, "Name three colors.", max_tokens=12).choices[0].message.content
    for seed in (1, 2, 3):
        r = c.chat.completions.create(model=MODEL_ID, temperature=1.5, seed=seed, max_tokens=12,
                                      messages=[{"role": "user", "content": "Name three colors."}],
                                      extra_body={"top_k": 1})
        assert r.choices[0].message.content == greedy


def test_chat_logprobs_streamed_equal_whole_and_rank_the_greedy_token_first(server):
    c = client(server)
    kw = dict(max_tokens=8, logprobs=True, top_logprobs=3)
    whole = chat(c, "Name a fruit.", **kw)
    content = whole.choices[0].logprobs.content
    assert "".join(t.token for t in content) == whole.choices[0].message.content
    for t in content:
        assert t.logprob <= 0 and bytes(t.bytes) == t.token.encode()
        assert [a.logprob for a in t.top_logprobs] == sorted((a.logprob for a in t.top_logprobs), reverse=True)
        assert t.top_logprobs[0].token == t.token and t.top_logprobs[0].logprob == t.logprob
    streamed = []
    for chunk in chat(c, "Name a fruit.", stream=True, **kw):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed += chunk.choices[0].logprobs.content
    assert [(t.token, t.logprob) for t in streamed] == [(t.token, t.logprob) for t in content]
    assert chat(c, "Name a fruit.", max_tokens=2).choices[0].logprobs is None
    with pytest.raises(openai.BadRequestError):
        chat(c, "hi", max_tokens=2, top_logprobs=3)  # without logprobs: true
    with pytest.raises(openai.BadRequestError):
        chat(c, "hi", max_tokens=2, logprobs=True, top_logprobs=21)


def listen_overflows():
    """The kernel's count of connections dropped because a listen queue was full."""
    with open("/proc/net/netstat") as f:
        head, values = [line.split() for line in f if line.startswith("TcpExt:")][:2]
    return int(values[head.index("ListenOverflows")])


def test_a_burst_of_connections_fits_the_listen_queue(server):
    """300 clients connecting at the same moment (the serving benchmark's users all start at
    once): none is dropped by a full listen queue (a dropped SYN is retried a second later)."""
    async def one():
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        body = await reader.read()
        writer.close()
        return body

    async def burst(n):
        return await asyncio.gather(*[one() for _ in range(n)])

    before = listen_overflows()
    answers = asyncio.run(burst(300))
    assert all(b" 200 " in a.split(b"\r\n", 1)[0] for a in answers)
    assert listen_overflows() == before
