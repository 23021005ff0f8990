"""Memory retrieval on the real `inferscale serve` binary with all-MiniLM-L6-v2: dense search
ranks the user's facts by the cosine of their /v1/embeddings vectors with the query's (numpy
over the served vectors, which test_embeddings checks against sentence-transformers), finding a
paraphrase that BM25 cannot; hybrid is the reciprocal-rank fusion (c = 10) of the bm25 and dense
lists and the default; a fact is searchable by embedding as soon as its add or update answers;
facts of another user never come back; a restart serves the stored vectors; and the errors: an
unknown method is a 400 naming `retrieval` / `memory.retrieval`, dense without an embedding model
a 400, and `serve --retrieval dense` without one ends start-up with a message."""
import os
import subprocess

import httpx
import numpy as np
import openai
import pytest

from server_process import BIN, MODEL, Server

MODELS = os.environ.get("INFERSCALE_MODELS", "models")
EMBED_DIR = os.path.join(MODELS, "all-minilm-l6-v2")

pytestmark = pytest.mark.skipif(
    not (os.path.exists(MODEL) and os.path.exists(os.path.join(EMBED_DIR, "model.safetensors"))),
    reason="run scripts/setup.sh first (it fetches models/all-minilm-l6-v2)")

FACTS = ["Bob is allergic to peanuts.", "Bob plays the cello in a youth orchestra.",
         "Bob's sister Ana lives in Toronto.", "Bob adopted a grey cat named Pixel last spring.",
         "Bob works night shifts as a nurse.", "Bob ran his first marathon in Lisbon."]
QUERIES = ["What food should he avoid?", "Which instrument does Bob play?",
           "Where does his sister live?", "Tell me about Bob's pet", "What is Bob's job?"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("retrieval"), "--embedding-model", EMBED_DIR)
    yield s
    s.stop()


def client(server):
    return httpx.Client(base_url=server.url, timeout=120)


def add(c, user, texts):
    res = c.post("/v1/memories", json={"user_id": user, "facts": texts})
    assert res.status_code == 200, res.text
    return {item["id"]: item["memory"] for item in res.json()["results"]}


def search(c, user, query, method=None, k=100):
    body = {"user_id": user, "query": query, "top_k": k}
    if method:
        body["retrieval"] = method
    res = c.post("/v1/memories/search", json=body)
    assert res.status_code == 200, res.text
    return [(item["id"], item["score"]) for item in res.json()["results"]]


def embed(c, texts):
    res = c.post("/v1/embeddings", json={"model": "all-MiniLM-L6-v2", "input": texts})
    assert res.status_code == 200, res.text
    return np.array([d["embedding"] for d in res.json()["data"]], dtype=np.float64)


def rrf(lists, k, c=10.0):
    score = {}
    for ranked in lists:
        for rank, fid in enumerate(ranked):
            score[fid] = score.get(fid, 0.0) + 1.0 / (c + rank + 1)
    return [f for f, _ in sorted(score.items(), key=lambda x: (-x[1], int(x[0])))][:k]


@pytest.fixture(scope="module")
def bob(server):
    with client(server) as c:
        facts = add(c, "bob", FACTS)
        add(c, "eve", ["Eve is allergic to shellfish.", "Eve plays the cello."])
    return facts


def test_dense_ranks_by_the_cosine_of_the_served_embeddings(server, bob):
    with client(server) as c:
        ids = list(bob)
        vectors = embed(c, [bob[i] for i in ids])
        for query in QUERIES:
            cosine = vectors @ embed(c, [query])[0]
            want = [ids[j] for j in np.argsort(-cosine, kind="stable")]
            got = search(c, "bob", query, "dense")
            assert [fid for fid, _ in got] == want, query
            for fid, score in got:
                assert abs(score - cosine[ids.index(fid)]) < 1e-4, (query, fid)


def test_dense_finds_the_paraphrase_bm25_cannot(server, bob):
    allergy = next(i for i, t in bob.items() if "peanuts" in t)
    with client(server) as c:
        assert allergy not in [fid for fid, _ in search(c, "bob", QUERIES[0], "bm25")]
        assert search(c, "bob", QUERIES[0], "dense")[0][0] == allergy
        assert search(c, "bob", QUERIES[0], "hybrid", k=3)[0][0] == allergy


def test_hybrid_is_the_fusion_of_both_lists_and_the_default(server, bob):
    with client(server) as c:
        for query in QUERIES + ["Bob cello orchestra", "marathon"]:
            lexical = [fid for fid, _ in search(c, "bob", query, "bm25")]
            dense = [fid for fid, _ in search(c, "bob", query, "dense")]
            hybrid = [fid for fid, _ in search(c, "bob", query, "hybrid", k=4)]
            assert hybrid == rrf([lexical, dense], 4), query
            assert [fid for fid, _ in search(c, "bob", query, k=4)] == hybrid


def test_no_method_returns_another_users_fact(server, bob):
    with client(server) as c:
        for method in ("bm25", "dense", "hybrid"):
            for query in QUERIES:
                assert {fid for fid, _ in search(c, "bob", query, method)} <= set(bob)


def test_an_added_or_updated_fact_is_searchable_by_embedding_at_once(server):
    with client(server) as c:
        (fid, _), = add(c, "carol", ["Carol collects antique maps."]).items()
        assert search(c, "carol", "old cartography hobby", "dense")[0][0] == fid
        res = c.put(f"/v1/memories/{fid}", json={"text": "Carol breeds racing pigeons."})
        assert res.status_code == 200, res.text
        (top, score), = search(c, "carol", "Carol breeds racing pigeons.", "dense")
        assert top == fid and score > 0.999


def test_a_restart_serves_the_stored_vectors(tmp_path):
    s = Server(tmp_path, "--embedding-model", EMBED_DIR)
    try:
        with client(s) as c:
            add(c, "bob", FACTS)
            before = search(c, "bob", QUERIES[0], "dense")
        s.stop()
        s.start()
        with client(s) as c:
            assert search(c, "bob", QUERIES[0], "dense") == before
    finally:
        s.stop()


def test_bad_methods_are_400s_naming_the_field(server, bob):
    with client(server) as c:
        res = c.post("/v1/memories/search",
                     json={"user_id": "bob", "query": "x", "retrieval": "bm42"})
        assert res.status_code == 400 and res.json()["error"]["param"] == "retrieval"
    chat = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as e:
        chat.chat.completions.create(model=chat.models.list().data[0].id, user="bob",
                                     messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                     extra_body={"memory": {"retrieval": "bm42"}})
    assert e.value.body["param"] == "memory.retrieval"
    done = chat.chat.completions.create(model=chat.models.list().data[0].id, user="bob",
                                        messages=[{"role": "user", "content": QUERIES[0]}],
                                        max_tokens=2, temperature=0,
                                        extra_body={"memory": {"retrieval": "dense"}})
    assert done.usage.completion_tokens >= 1


def test_without_an_embedding_model_only_bm25(tmp_path):
    s = Server(tmp_path, "--embedding-model", "none")
    try:
        with client(s) as c:
            add(c, "bob", FACTS)
            assert search(c, "bob", "cello")  # bm25, the default here
            res = c.post("/v1/memories/search",
                         json={"user_id": "bob", "query": "cello", "retrieval": "dense"})
            assert res.status_code == 400 and res.json()["error"]["param"] == "retrieval"
            assert "embedding model" in res.json()["error"]["message"]
    finally:
        s.stop()
    res = subprocess.run([BIN, "serve", "--model", MODEL, "--embedding-model", "none",
                          "--retrieval", "dense", "--port", "0", "--db", str(tmp_path / "m.db")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    assert "--retrieval dense needs an embedding model" in res.stderr
