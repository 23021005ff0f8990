"""Chat over a user's memory with the bundled model: a fact stored for one user is answered in
kv (injected KV chunks) and prompt (facts as text) modes, and never reaches another user, with
the default KV cache and with an FP8 one (--kv-cache-dtype fp8). The CLI and the server run
requests through the same engine, so they answer with the same tokens."""
import os
import subprocess

import openai
import pytest

from server_process import MODEL_ID, Server

BIN = os.path.join(os.environ.get("INFERSCALE_BIN", "build/bin"), "inferscale")
MODEL = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
QUESTION = "What is the name of my dog?"

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")


def run(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("memory")


@pytest.fixture(scope="module")
def db(memory_dir):
    path = str(memory_dir / "memory.db")
    for user, text in [("alice", "Alice's dog is named Biscuit."),
                       ("alice", "Alice works as a nurse in Boston."),
                       ("bob", "Bob plays the violin.")]:
        res = run("memory", "add", "--db", path, "--user", user, "--text", text)
        assert res.returncode == 0, res.stderr
    return path


def ask(db, user, mode, question=QUESTION, kv_cache_dtype="auto"):
    # One fact: the 135M model answers from the one it is given, and loses it among two.
    res = run("chat", "--model", MODEL, "--db", db, "--user", user, "--memory", mode,
              "--top-k", "1", "--message", question, "--max-tokens", "24",
              "--kv-cache-dtype", kv_cache_dtype)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("mode", ["kv", "prompt"])
def test_fact_is_answered(db, mode, kv_cache_dtype):
    assert "Biscuit" in ask(db, "alice", mode, kv_cache_dtype=kv_cache_dtype)


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("mode", ["kv", "prompt", "none"])
def test_other_user_never_sees_it(db, mode, kv_cache_dtype):
    assert "Biscuit" not in ask(db, "bob", mode, kv_cache_dtype=kv_cache_dtype)


def test_no_memory_mode_does_not_know(db):
    assert "Biscuit" not in ask(db, "alice", "none")


def test_unknown_user_is_an_error(db):
    res = run("chat", "--model", MODEL, "--db", db, "--user", "carol", "--message", "hi")
    assert res.returncode == 1 and res.stderr.startswith("error: ")
    assert "carol" in res.stderr


def test_memory_mode_needs_a_user(db):
    res = run("chat", "--model", MODEL, "--db", db, "--memory", "kv", "--message", "hi")
    assert res.returncode == 1 and res.stderr.startswith("error: ")


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "fp8"])
@pytest.mark.parametrize("mode", ["kv", "prompt", "none"])
def test_cli_and_server_give_the_same_greedy_answer(db, memory_dir, mode, kv_cache_dtype):
    server = Server(memory_dir, "--kv-cache-dtype", kv_cache_dtype)  # the same memory.db
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
        reply = client.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": QUESTION}], max_tokens=24,
            temperature=0, user="alice", extra_body={"memory": {"mode": mode, "top_k": 1}})
    finally:
        server.stop()
    want = ask(db, "alice", mode, kv_cache_dtype=kv_cache_dtype)
    assert reply.choices[0].message.content == want.rstrip("\n")
