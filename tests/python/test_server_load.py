"""The server under real concurrent load: 100 streaming clients at once each get exactly the
greedy answer the same request gets alone; so do concurrent kv-memory requests (alone, on an
idle engine, each is injected layer group by layer group inside its forward; together, in one
op before it), also when the device tier has room for one request's chunks at a time; a
client that disconnects frees its KV blocks; a kill -9 in the middle of
memory writes loses no acknowledged fact."""
import concurrent.futures
import os
import threading
import time

import httpx
import openai
import pytest

from server_process import MODEL, MODEL_ID, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

TOPICS = ["the sea", "mountains", "a city at night", "coffee", "winter", "a library", "trains",
          "the moon", "a garden", "music"]


def question(i):
    return f"Write two sentences about {TOPICS[i % len(TOPICS)]}. Variation {i // len(TOPICS)}."


def ask(url, i, stream, max_tokens=24):
    c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)
    kw = dict(model=MODEL_ID, messages=[{"role": "user", "content": question(i)}],
              temperature=0, max_tokens=max_tokens)
    if not stream:
        return c.chat.completions.create(**kw).choices[0].message.content
    return "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(stream=True, **kw)
                   if ch.choices)


def wait_for(server, predicate, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        m = server.metrics()
        if predicate(m):
            return m
        time.sleep(0.05)
    return server.metrics()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("load"), "--max-batch-seqs", "64", "--kv-tokens", "16384")
    yield s
    s.stop()


def test_100_concurrent_streams_equal_the_same_requests_alone(server):
    n = 100
    # Alone first, one at a time, with the prefix cache off for them (different prompts anyway).
    alone = [ask(server.url, i, stream=False) for i in range(n)]
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        together = list(pool.map(lambda i: ask(server.url, i, stream=True), range(n)))
    assert all(together), "every client got an answer"
    mismatches = [i for i in range(n) if together[i] != alone[i]]
    assert not mismatches, [(alone[i], together[i]) for i in mismatches[:3]]
    m = wait_for(server, lambda m: m["inferscale_requests_running"] == 0)
    assert m["inferscale_requests_finished_total"] >= 2 * n
    assert m["inferscale_kv_blocks_in_use"] == 0


OWNERS = [("Alice", "Biscuit"), ("Bruno", "Pixel"), ("Chloe", "Comet"), ("Dmitri", "Clover"),
          ("Elena", "Pepper"), ("Farah", "Mango")]


# A 2 MiB device tier holds one request's three chunks but not six requests' at once: the
# others' chunks are read in place from host memory, none waits for room or fails, and the
# answers are the same bits.
@pytest.mark.parametrize("pool", [[], ["--device-pool-mb", "2"]], ids=["roomy", "tight_device_tier"])
def test_concurrent_kv_memory_answers_equal_the_same_requests_alone(tmp_path, pool):
    # No prefix cache: the second round must inject its memory again, not find it cached.
    s = Server(tmp_path, "--no-prefix-cache", *pool)
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0, timeout=600)
        users = [name.lower() for name, _ in OWNERS]
        for user, (name, dog) in zip(users, OWNERS):
            c.post("/memories", cast_to=object, body={
                "user_id": user,
                "facts": [f"{name} has a dog named {dog}.", f"{name} works as a nurse.",
                          f"{name} lives in Lisbon."]})

        def ask_memory(user):
            r = c.chat.completions.create(
                model=MODEL_ID, user=user, extra_body={"memory": {"mode": "kv", "top_k": 3}},
                messages=[{"role": "user", "content": "What is the name of my dog?"}],
                temperature=0, max_tokens=16)
            assert r.usage.prompt_tokens_details.cached_tokens > 0
            return r.choices[0].message.content

        # Together first, right after the writes: facts still being encoded are encoded by
        # the requests, each into a device tier the others' pinned chunks may fill.
        with concurrent.futures.ThreadPoolExecutor(len(users)) as workers:
            together = list(workers.map(ask_memory, users))
        alone = [ask_memory(u) for u in users]
        assert sum(dog in answer for (_, dog), answer in zip(OWNERS, alone)) >= 3, alone
        assert together == alone
        m = s.metrics()
        if pool:
            assert m["inferscale_chunk_pool_demotions_total"] > 0, "the device tier overflowed"
            assert m["inferscale_chunk_pool_served_from_host_total"] > 0
    finally:
        s.stop()


def test_a_client_that_disconnects_frees_its_blocks(server):
    baseline = wait_for(server, lambda m: m["inferscale_requests_running"] == 0)
    assert baseline["inferscale_kv_blocks_in_use"] == 0
    cancelled_before = baseline["inferscale_requests_cancelled_total"]
    with httpx.stream("POST", server.url + "/v1/chat/completions", timeout=60, json={
            "model": MODEL_ID, "stream": True, "max_tokens": 2000, "temperature": 0,
            "messages": [{"role": "user", "content": "Tell me a very long story about a dragon."}]}) as r:
        lines = r.iter_lines()
        for _ in range(5):
            next(lines)
        busy = server.metrics()
        assert busy["inferscale_requests_running"] == 1 and busy["inferscale_kv_blocks_in_use"] > 0
    m = wait_for(server, lambda m: m["inferscale_requests_cancelled_total"] > cancelled_before and
                 m["inferscale_requests_running"] == 0)
    assert m["inferscale_requests_cancelled_total"] == cancelled_before + 1
    assert m["inferscale_kv_blocks_in_use"] == 0
    # Still serving.
    assert ask(server.url, 0, stream=True, max_tokens=4)


def test_kill_9_during_memory_writes_loses_no_acknowledged_fact(tmp_path):
    s = Server(tmp_path)
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def writer(w):
        c = httpx.Client(base_url=s.url, timeout=10)
        i = 0
        while not stop.is_set():
            text = f"Writer {w} remembers item number {i}."
            try:
                r = c.post("/v1/memories", json={"user_id": f"user{w % 3}", "facts": [text]})
            except httpx.HTTPError:
                return  # the server died under us: this write was never acknowledged
            if r.status_code == 200:
                with lock:
                    acked.append((f"user{w % 3}", r.json()["results"][0]["id"], text))
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    s.kill()  # SIGKILL, mid-write
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) > 20
    s.start()  # the same database
    try:
        stored = {}
        for user in ["user0", "user1", "user2"]:
            r = httpx.get(s.url + "/v1/memories", params={"user_id": user})
            assert r.status_code == 200, r.text
            stored.update({m["id"]: (user, m["memory"]) for m in r.json()["results"]})
        missing = [a for a in acked if stored.get(a[1]) != (a[0], a[2])]
        assert not missing, missing[:5]
    finally:
        s.stop()
