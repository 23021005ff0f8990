"""Chat requests that learn from their own exchange: `"memory": {"store": true}` on
/v1/chat/completions answers as usual, names the extraction event in the x-memory-event-id header
and, once the answer is complete, stores the request's last user message and the answer it sent
as the user's turns (read back from the SQLite file) and extracts facts from them as an async
POST /v1/memories would. The event always ends (SUCCEEDED or FAILED, also when the client leaves
a stream early), is the caller's tenant's only, and the field is checked: a user, a boolean, a
server with a memory store."""
import json
import os
import sqlite3
import time

import httpx
import pytest

from server_process import MODEL, MODEL_ID, Server, api_client, ok

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

KEYS = {"sk-ann": ["ann"], "sk-bob": ["bob"]}
HEADER = "x-memory-event-id"


def chat_body(content, **extra):
    return {"model": MODEL_ID, "user": "ann", "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "system", "content": "You are a friendly assistant."},
                         {"role": "user", "content": "Hello!"},
                         {"role": "assistant", "content": "Hi! How can I help?"},
                         {"role": "user", "content": content}],
            "memory": {"store": True}, **extra}


def finished_event(c, event):
    """The event's state once it has ended; fails if it stays PENDING or RUNNING."""
    deadline = time.time() + 300
    while True:
        state = ok(c.get(f"/v1/memories/events/{event}"))
        if state["status"] in ("SUCCEEDED", "FAILED"):
            return state
        assert time.time() < deadline, state
        time.sleep(0.2)


def stored_turns(server, user):
    with sqlite3.connect(f"file:{server.db}?mode=ro", uri=True) as db:
        return db.execute("SELECT session_id, speaker, text FROM turns WHERE user_id = ? "
                          "ORDER BY session_index, turn_index", (user,)).fetchall()


def check_extracted(c, state):
    """A finished event is the caller's; a success lists what the store now holds."""
    assert state["user_id"] == "ann"
    if state["status"] == "FAILED":
        assert state["error"]
        return
    for item in state["results"]:
        if item["event"] != "DELETE":
            assert ok(c.get(f"/v1/memories/{item['id']}"))["memory"] == item["memory"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("chatstore"), keys=KEYS)
    yield s
    s.stop()


def test_an_answer_is_stored_and_its_event_ends(server):
    c = api_client(server, "sk-ann")
    before = stored_turns(server, "ann")
    res = c.post("/v1/chat/completions", json=chat_body("My dog is called Rex."))
    answer = ok(res)["choices"][0]["message"]["content"]
    event = res.headers[HEADER]
    state = finished_event(c, event)
    check_extracted(c, state)
    assert stored_turns(server, "ann")[len(before):] == [
        ("api", "user", "My dog is called Rex."), ("api", "assistant", answer)]
    assert api_client(server, "sk-bob").get(f"/v1/memories/events/{event}").status_code == 404
    # The ids are those of POST /v1/memories: an async add gets the next one.
    queued = ok(c.post("/v1/memories", json={
        "user_id": "ann", "async_mode": True,
        "messages": [{"role": "user", "content": "I play the cello."}]}))
    assert int(queued["event_id"]) == int(event) + 1
    finished_event(c, queued["event_id"])


def test_a_streamed_answer_is_stored_as_it_was_sent(server):
    c = api_client(server, "sk-ann")
    before = stored_turns(server, "ann")
    parts = []
    with c.stream("POST", "/v1/chat/completions",
                  json=chat_body("I grew up in Lisbon.", stream=True)) as res:
        assert res.status_code == 200
        event = res.headers[HEADER]
        for line in res.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    parts.append(choice["delta"].get("content") or "")
    check_extracted(c, finished_event(c, event))
    assert stored_turns(server, "ann")[len(before):] == [
        ("api", "user", "I grew up in Lisbon."), ("api", "assistant", "".join(parts))]


def test_a_stream_left_early_fails_its_event(server):
    c = api_client(server, "sk-ann")
    before = stored_turns(server, "ann")
    body = chat_body("Tell me a very long story.", stream=True, max_tokens=4000, ignore_eos=True)
    with c.stream("POST", "/v1/chat/completions", json=body) as res:
        event = res.headers[HEADER]
        next(res.iter_lines())
    state = finished_event(c, event)
    assert state["status"] == "FAILED" and state["user_id"] == "ann", state
    assert stored_turns(server, "ann") == before


def test_the_field_is_checked(server, tmp_path):
    c = api_client(server, "sk-ann")
    no_user = chat_body("hi")
    del no_user["user"]
    cases = [(no_user, "memory.store"),
             (chat_body("hi", memory={"store": "yes"}), "memory.store"),
             ({**chat_body("hi"), "messages": [{"role": "system", "content": "Be brief."}]},
              "memory.store")]
    for body, param in cases:
        res = c.post("/v1/chat/completions", json=body)
        assert res.status_code == 400 and res.json()["error"]["param"] == param, res.text
        assert HEADER not in res.headers
    res = c.post("/v1/chat/completions", json=chat_body("hi", memory={"store": False}))
    assert res.status_code == 200 and HEADER not in res.headers
    bare = Server(tmp_path, "--no-memory")
    try:
        res = httpx.post(bare.url + "/v1/chat/completions", json=chat_body("hi"), timeout=600)
        assert res.status_code == 400 and res.json()["error"]["param"] == "memory.store", res.text
    finally:
        bare.stop()
