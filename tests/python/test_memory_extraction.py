"""Fact extraction behind POST /memories and /v1/memories (messages, `infer` true), on the real
`inferscale serve` binary. With the bundled model: what a synchronous add answers is exactly what
the store then lists (scope and metadata carried, an ADD history row per new fact); async_mode
answers PENDING with an event id that is polled to the same kind of answer; another tenant's key
never sees the event. `serve --memory-model` (the bundled file again) runs extraction on an
engine of its own: its tokens show in that engine's counters and none in the served one's, the
opposite of a server without the flag; a file that does not load ends start-up with an error
naming it. With Qwen2.5-Coder-1.5B-Instruct (scripts/fetch_model.sh; skipped when
absent): "I moved to Berlin" after "I live in Paris" updates the stored fact, and its history
keeps the old and the new text."""
import os
import subprocess
import time

import httpx
import pytest

from server_process import BIN, MODEL, Server, api_client, ok

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

QWEN = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "qwen2.5-coder-1.5b.gguf")
KEYS = {"sk-ann": ["ann"], "sk-bob": ["bob"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("extract"), keys=KEYS)
    yield s
    s.stop()


def check_applied(c, results, prefix=""):
    """Each reported change is what the store holds, with an ADD/UPDATE history row."""
    for item in results:
        assert item["event"] in ("ADD", "UPDATE", "DELETE"), item
        if item["event"] == "DELETE":
            continue
        stored = ok(c.get(f"{prefix}/memories/{item['id']}"))
        assert stored["memory"] == item["memory"]
        history = ok(c.get(f"{prefix}/memories/{item['id']}/history"))
        assert history and history[-1]["event"] == item["event"], history
        assert history[-1]["new_memory"] == item["memory"]


def test_a_synchronous_add_answers_what_the_store_then_lists(server):
    c = api_client(server, "sk-ann")
    res = ok(c.post("/memories", json={
        "user_id": "ann", "agent_id": "coach", "run_id": "week-1", "metadata": {"source": "chat"},
        "messages": [{"role": "user", "content": "I live in Paris and I have a cat named Tom."},
                     {"role": "assistant", "content": "Tom is a nice name!"}]}))
    assert res["turns_added"] == 2
    results = res["results"]
    assert results, "the bundled model extracts at least one fact from this message"
    check_applied(c, results)
    listed = ok(c.get("/memories", params={"user_id": "ann"}))["results"]
    assert sorted(m["memory"] for m in listed) == sorted(
        r["memory"] for r in results if r["event"] == "ADD")
    for m in listed:
        assert (m["agent_id"], m["run_id"], m["metadata"]) == ("coach", "week-1", {"source": "chat"})


def test_async_extraction_is_polled_and_private_to_its_tenant(server):
    c = api_client(server, "sk-ann")
    queued = ok(c.post("/v1/memories", json={
        "user_id": "ann", "async_mode": True,
        "messages": [{"role": "user", "content": "I work as a nurse at the city hospital."}]}))
    assert queued["status"] == "PENDING"
    event = queued["event_id"]
    deadline = time.time() + 300
    while True:
        state = ok(c.get(f"/v1/memories/events/{event}"))
        if state["status"] in ("SUCCEEDED", "FAILED") or time.time() > deadline:
            break
        time.sleep(0.2)
    assert state["status"] == "SUCCEEDED", state
    assert state["user_id"] == "ann"
    check_applied(c, state["results"], prefix="/v1")
    assert ok(c.get(f"/v1/memories/events/{event}/")) == state
    other = api_client(server, "sk-bob").get(f"/v1/memories/events/{event}")
    assert other.status_code == 404, other.text
    assert c.get("/v1/memories/events/987654").status_code == 404
    assert c.get("/v1/memories/events/abc").status_code == 404


def extraction_counts(s, key=None):
    """What one synchronous extraction adds to each /metrics counter."""
    c = httpx.Client(base_url=s.url, timeout=600,
                     headers={"Authorization": f"Bearer {key}"} if key else {})
    before = s.metrics()
    ok(c.post("/memories", json={"user_id": "ann", "messages": [
        {"role": "user", "content": "I live in Paris and I have a cat named Tom."}]}))
    after = s.metrics()
    return {name: value - before.get(name, 0) for name, value in after.items()}


def test_a_memory_model_runs_extraction_on_its_own_engine(server, tmp_path):
    served = extraction_counts(server, "sk-ann")
    assert served["inferscale_computed_tokens_total"] > 0
    assert not any(name.startswith("inferscale_memory_model_") for name in served)
    s = Server(tmp_path, "--memory-model", MODEL)
    try:
        second = extraction_counts(s)
        assert second["inferscale_computed_tokens_total"] == 0, second
        assert second["inferscale_requests_finished_total"] == 0, second
        assert second["inferscale_memory_model_computed_tokens_total"] > 0, second
        assert second["inferscale_memory_model_requests_finished_total"] > 0, second
        assert "extraction on SmolLM2-135M-Instruct.Q4_1" in s.read_log()
    finally:
        s.stop()


def test_a_memory_model_that_does_not_load_ends_start_up(tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a model")
    for path in (str(tmp_path / "missing.gguf"), str(garbage)):
        run = subprocess.run([BIN, "serve", "--memory-model", path, "--port", "0",
                              "--db", str(tmp_path / "memory.db")],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode != 0, run.stderr
        assert f"error: --memory-model {path}: " in run.stderr, run.stderr


@pytest.mark.skipif(not os.path.exists(QWEN), reason="scripts/fetch_model.sh qwen2.5-coder-1.5b")
def test_a_move_updates_the_stored_city_and_history_keeps_both(tmp_path):
    s = Server(tmp_path, model=QWEN)
    try:
        c = httpx.Client(base_url=s.url, timeout=900)
        first = ok(c.post("/memories", json={
            "user_id": "eve", "messages": [{"role": "user", "content": "I live in Paris."}]}))
        [paris] = [r for r in first["results"] if "Paris" in r["memory"]]
        moved = ok(c.post("/memories", json={
            "user_id": "eve", "messages": [{"role": "user", "content": "I moved to Berlin."}]}))
        [update] = moved["results"]
        assert update["event"] == "UPDATE" and update["id"] == paris["id"], moved
        assert "Berlin" in update["memory"] and update["previous_memory"] == paris["memory"]
        history = ok(c.get(f"/memories/{paris['id']}/history"))
        assert [(h["event"], h["old_memory"], h["new_memory"]) for h in history] == [
            ("ADD", None, paris["memory"]), ("UPDATE", paris["memory"], update["memory"])]
    finally:
        s.stop()
