"""The server's log lines against the real `inferscale serve` binary: every line led by an
ISO-8601 UTC time, and one access-log line per HTTP request, good and bad, as text and as one
JSON object per line (`--log-format json`)."""
import json
import os
import re
import time

import httpx
import pytest

from server_process import MODEL, MODEL_ID, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

CHAT = "/v1/chat/completions"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def send_good_and_bad(server):
    good = httpx.post(server.url + "/v1/chat/completions", timeout=60,
                      json={"model": MODEL_ID, "max_tokens": 4, "temperature": 0, "user": "alice",
                            "messages": [{"role": "user", "content": "Say hi."}]})
    assert good.status_code == 200, good.text
    bad = httpx.post(server.url + "/v1/chat/completions", json={"model": MODEL_ID})
    assert bad.status_code == 400
    return good.json()["usage"]


def log_lines(server, count):
    """The server's log lines once `count` chat access lines are in (a line is written after
    its answer is sent; the start-up's /health polls have theirs too)."""
    deadline = time.time() + 10
    while True:
        lines = [l for l in server.read_log().splitlines() if l]
        if sum(CHAT in l for l in lines) >= count or time.time() > deadline:
            return lines
        time.sleep(0.05)


def test_text_lines_carry_time_and_access_fields(tmp_path):
    server = Server(tmp_path, "--no-memory")
    try:
        usage = send_good_and_bad(server)
        lines = log_lines(server, 2)
    finally:
        server.stop()
    assert all(re.match(TIME + " ", l) for l in lines), lines
    assert any(" [access] GET /health 200 " in l for l in lines), lines
    access = [l for l in lines if " [access] POST " + CHAT in l]
    assert len(access) == 2, lines
    assert re.fullmatch(
        TIME + rf" \[access\] POST /v1/chat/completions 200 user=alice "
        rf"prompt_tokens={usage['prompt_tokens']} completion_tokens={usage['completion_tokens']} "
        r"latency_ms=\d+\.\d", access[0]), access[0]
    assert re.fullmatch(
        TIME + r" \[access\] POST /v1/chat/completions 400 user=- prompt_tokens=- "
        r"completion_tokens=- latency_ms=\d+\.\d", access[1]), access[1]


def test_json_format_writes_one_object_per_line(tmp_path):
    server = Server(tmp_path, "--no-memory", "--log-format", "json")
    try:
        usage = send_good_and_bad(server)
        lines = log_lines(server, 2)
    finally:
        server.stop()
    records = [json.loads(l) for l in lines]
    assert all(re.fullmatch(TIME, r["time"]) for r in records), records
    assert any(r.get("message", "").startswith("serving ") for r in records), records
    access = [r for r in records if r.get("type") == "access" and r["path"] == CHAT]
    assert len(access) == 2, records
    good, bad = access
    assert {k: good[k] for k in ("method", "path", "status", "user")} == {
        "method": "POST", "path": "/v1/chat/completions", "status": 200, "user": "alice"}
    assert good["prompt_tokens"] == usage["prompt_tokens"]
    assert good["completion_tokens"] == usage["completion_tokens"]
    assert good["latency_ms"] > 0
    assert bad["status"] == 400 and bad["user"] is None
    assert bad["prompt_tokens"] is None and bad["completion_tokens"] is None
