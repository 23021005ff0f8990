"""POST /v1/embeddings against the real `inferscale serve` binary, through the official openai
client: all-MiniLM-L6-v2's vectors equal sentence-transformers' (cosine >= 0.9999 against the
fixture of tools/make_embedding_fixtures.py) in one batch, one text at a time and as base64;
usage counts the model's tokens; /v1/models lists the embedding model; the errors are OpenAI's
(wrong model 404 model_not_found; dimensions, unknown fields, empty texts, token-id input, too
many inputs and a bad encoding_format 400s naming the field; no key 401); and a bad
--embedding-model ends start-up with a clear error."""
import base64
import json
import os

import httpx
import numpy as np
import openai
import pytest

from server_process import MODEL, Server

MODELS = os.environ.get("INFERSCALE_MODELS", "models")
EMBED_DIR = os.path.join(MODELS, "all-minilm-l6-v2")
EMBED_ID = "all-MiniLM-L6-v2"
FIXTURE = os.path.join(os.environ.get("INFERSCALE_FIXTURES", "tests/fixtures"), "embed",
                       "minilm_embeddings.json")

pytestmark = pytest.mark.skipif(
    not (os.path.exists(MODEL) and os.path.exists(os.path.join(EMBED_DIR, "model.safetensors"))),
    reason="run scripts/setup.sh first (it fetches models/all-minilm-l6-v2)")


@pytest.fixture(scope="module")
def fixture():
    with open(FIXTURE) as f:
        cases = json.load(f)["cases"]
    return [c for c in cases if c["text"]]  # the API refuses empty texts


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("embeddings"), "--embedding-model", EMBED_DIR,
               "--no-memory")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def c(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


def cosine(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def bad_param(call):
    with pytest.raises(openai.BadRequestError) as e:
        call()
    return e.value.body["param"]


def test_models_list_the_embedding_model(c):
    ids = [m.id for m in c.models.list().data]
    assert EMBED_ID in ids and len(ids) == 2
    assert c.models.retrieve(EMBED_ID).id == EMBED_ID


def test_a_batch_matches_sentence_transformers(c, fixture):
    r = c.embeddings.create(model=EMBED_ID, input=[f["text"] for f in fixture],
                            encoding_format="float")
    assert r.model == EMBED_ID and r.object == "list"
    assert [d.index for d in r.data] == list(range(len(fixture)))
    for d, f in zip(r.data, fixture):
        assert len(d.embedding) == 384
        assert cosine(d.embedding, f["embedding"]) >= 0.9999, f["text"]
    tokens = sum(len(f["ids"]) for f in fixture)
    assert r.usage.prompt_tokens == tokens and r.usage.total_tokens == tokens


def test_one_text_alone_matches_and_user_is_accepted(c, fixture):
    f = fixture[0]
    r = c.embeddings.create(model=EMBED_ID, input=f["text"], user="alice",
                            encoding_format="float")
    assert len(r.data) == 1 and r.usage.prompt_tokens == len(f["ids"])
    assert cosine(r.data[0].embedding, f["embedding"]) >= 0.9999


def test_base64_carries_the_same_floats(c, server, fixture):
    texts = [f["text"] for f in fixture[:3]]
    floats = c.embeddings.create(model=EMBED_ID, input=texts, encoding_format="float")
    raw = httpx.post(server.url + "/v1/embeddings", timeout=60,
                     json={"model": EMBED_ID, "input": texts, "encoding_format": "base64"}).json()
    for d, f in zip(raw["data"], floats.data):
        decoded = np.frombuffer(base64.b64decode(d["embedding"]), dtype="<f4")
        assert decoded.tolist() == np.asarray(f.embedding, dtype=np.float32).tolist()
    # The client's default asks for base64 and decodes it itself.
    default = c.embeddings.create(model=EMBED_ID, input=texts)
    for d, f in zip(default.data, floats.data):
        assert np.asarray(d.embedding, dtype=np.float32).tolist() == \
            np.asarray(f.embedding, dtype=np.float32).tolist()


def test_dimensions_of_the_model_are_accepted_others_refused(c):
    assert len(c.embeddings.create(model=EMBED_ID, input="hi", dimensions=384).data[0].embedding) \
        == 384
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input="hi", dimensions=128)) \
        == "dimensions"


def test_another_model_is_a_404_model_not_found(c):
    with pytest.raises(openai.NotFoundError) as e:
        c.embeddings.create(model="text-embedding-3-small", input="hi")
    assert e.value.body["code"] == "model_not_found"


def test_bad_inputs_are_400s_naming_the_field(c, server):
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input=["ok", ""])) == "input[1]"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input="")) == "input"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input=[])) == "input"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input=[[101, 2023, 102]])) \
        == "input"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input=[101, 2023])) == "input"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input=["x"] * 2049)) == "input"
    assert bad_param(lambda: c.embeddings.create(model=EMBED_ID, input="hi",
                                                 extra_body={"truncate": True})) == "truncate"
    r = httpx.post(server.url + "/v1/embeddings", timeout=60,
                   json={"model": EMBED_ID, "input": "hi", "encoding_format": "int8"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "encoding_format"
    r = httpx.post(server.url + "/v1/embeddings", timeout=60, json={"input": "hi"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model"


def test_api_keys_guard_embeddings(tmp_path):
    s = Server(tmp_path, "--embedding-model", EMBED_DIR, "--no-memory",
               keys={"sk-alice": ["alice"]})
    try:
        anonymous = openai.OpenAI(base_url=s.url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            anonymous.embeddings.create(model=EMBED_ID, input="hi")
        alice = openai.OpenAI(base_url=s.url + "/v1", api_key="sk-alice", max_retries=0)
        assert len(alice.embeddings.create(model=EMBED_ID, input="hi").data) == 1
    finally:
        s.stop()


def test_a_bad_embedding_model_folder_ends_start_up(tmp_path):
    with pytest.raises(RuntimeError) as e:
        Server(tmp_path, "--embedding-model", str(tmp_path / "missing"), "--no-memory")
    assert "--embedding-model" in str(e.value) and "missing" in str(e.value)
