"""`inferscale memory` as a user runs it: add/list/update/delete/search round trips, LoCoMo
import, clean failures on bad input, and no acknowledged fact lost to kill -9."""
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import threading
import time

import pytest

BIN = os.path.join(os.environ.get("INFERSCALE_BIN", "build/bin"), "inferscale")
LOCOMO = os.environ.get("INFERSCALE_LOCOMO", os.path.join(
    os.path.dirname(__file__), "..", "..", "..", "shared", "data", "locomo10"))
needs_locomo = pytest.mark.skipif(not os.path.exists(os.path.join(LOCOMO, "26.json")),
                                  reason="no LoCoMo data")


def run(*args, env=None, input=None, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, input=input)


def mem(db, *args, **kw):
    return run("memory", *args, "--db", str(db), **kw)


def ok(res):
    assert res.returncode == 0, (res.returncode, res.stderr)
    return res.stdout


def assert_clean_failure(res, fragment):
    assert res.returncode == 1, (res.returncode, res.stderr)  # 1: our error, not a signal
    assert res.stderr.startswith("error: "), res.stderr
    assert fragment in res.stderr, res.stderr


def facts(db, user):
    return json.loads(ok(mem(db, "list", "--user", user, "--json")))


def test_round_trip(tmp_path):
    db = tmp_path / "m.db"
    a1 = int(ok(mem(db, "add", "--user", "alice", "--text", "Alice likes  green tea")))
    a2 = int(ok(mem(db, "add", "--user", "alice", "--text", "Alice plays chess on Sundays")))
    b1 = int(ok(mem(db, "add", "--user", "bob", "--text", "Bob likes green tea too")))
    assert a1 < a2 < b1
    listed = ok(mem(db, "list", "--user", "alice")).splitlines()
    assert [l.split("\t")[0] for l in listed] == [str(a1), str(a2)]
    assert listed[0].split("\t")[2] == "Alice likes green tea"  # whitespace normalized
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", listed[0].split("\t")[1])

    hits = json.loads(ok(mem(db, "search", "--user", "alice", "--query", "green tea", "--json")))
    assert [h["id"] for h in hits] == [a1]  # never bob's fact
    assert hits[0]["score"] > 0

    assert ok(mem(db, "update", "--id", str(a1), "--text", "Alice prefers coffee"))
    assert ok(mem(db, "search", "--user", "alice", "--query", "tea")) == ""
    assert ok(mem(db, "delete", "--id", str(a2)))
    assert [f["id"] for f in facts(db, "alice")] == [a1]
    assert "1 facts" in ok(mem(db, "delete", "--user", "alice"))
    assert_clean_failure(mem(db, "list", "--user", "alice"), "unknown user")
    assert [f["id"] for f in facts(db, "bob")] == [b1]


def test_default_db_location(tmp_path):
    base = {k: v for k, v in os.environ.items()
            if k not in ("INFERSCALE_DATA", "XDG_DATA_HOME", "HOME")}
    cases = [({"INFERSCALE_DATA": str(tmp_path / "a")}, tmp_path / "a" / "memory.db"),
             ({"XDG_DATA_HOME": str(tmp_path / "x")}, tmp_path / "x" / "inferscale" / "memory.db"),
             ({"HOME": str(tmp_path / "h")}, tmp_path / "h" / ".local" / "share" / "inferscale" / "memory.db")]
    for extra, path in cases:
        res = run("memory", "add", "--user", "u", "--text", "t", env={**base, **extra})
        assert res.returncode == 0, res.stderr
        assert path.exists(), path
    assert_clean_failure(run("memory", "list", "--user", "u", env=base), "HOME")


def expected_locomo_counts(path):
    data = json.load(open(path))
    sessions = [k for k in data if re.fullmatch(r"session_\d+", k)]
    turns = sum(1 for k in sessions for t in data[k] if t.get("text") or t.get("blip_caption"))
    facts_n = sum(len(v) for k in data if k.endswith("_observation") for v in data[k].values())
    return len(sessions), turns, facts_n


@needs_locomo
def test_import_locomo(tmp_path):
    db = tmp_path / "m.db"
    path = os.path.join(LOCOMO, "26.json")
    sessions, turns, facts_n = expected_locomo_counts(path)
    out = ok(mem(db, "import-locomo", path))
    assert f"imported user 26: {sessions} sessions, {turns} turns" in out
    assert f"{facts_n} facts" in out
    listed = facts(db, "26")
    assert len(listed) == facts_n
    assert all("source" in f for f in listed)
    assert_clean_failure(mem(db, "import-locomo", path), "already has")
    assert "imported user copy:" in ok(mem(db, "import-locomo", path, "--user", "copy"))
    hits = json.loads(ok(mem(db, "search", "--user", "copy", "--query", "adoption agencies",
                             "--top-k", "3", "--json")))
    assert 1 <= len(hits) <= 3 and all(h["user"] == "copy" for h in hits)


def test_bad_input(tmp_path):
    db = tmp_path / "m.db"
    assert_clean_failure(mem(db, "delete", "--id", "12345"), "unknown fact id 12345")
    assert_clean_failure(mem(db, "update", "--id", "7", "--text", "x"), "unknown fact id 7")
    assert_clean_failure(mem(db, "add", "--text", "no user"), "--user")
    assert_clean_failure(mem(db, "list"), "--user")
    assert_clean_failure(mem(db, "search", "--query", "x"), "--user")
    assert_clean_failure(mem(db, "add", "--user", "u", "--text", "   "), "empty")
    assert_clean_failure(mem(db, "delete"), "--id")
    assert_clean_failure(mem(db, "delete", "--user", "nobody"), "unknown user")
    assert_clean_failure(mem(db, "import-locomo", str(tmp_path / "missing.json")), "missing.json")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(os.urandom(8192))
    assert_clean_failure(mem(garbage, "list", "--user", "u"), str(garbage))
    not_json = tmp_path / "conv.json"
    not_json.write_text("{ nope")
    assert_clean_failure(mem(db, "import-locomo", str(not_json)), "JSON")


def check_db(db, submitted, acked):
    """Every acknowledged fact is there with its text; what is there is a prefix of what was
    sent (nothing torn, nothing reordered); the file is intact."""
    con = sqlite3.connect(str(db))
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = {}
        for user in submitted:
            rows[user] = con.execute("SELECT id, text FROM facts WHERE user_id = ? ORDER BY id",
                                     (user,)).fetchall()
    finally:
        con.close()
    for user, lines in submitted.items():
        stored = rows[user]
        assert [t for _, t in stored] == lines[:len(stored)], user
        ids = {i for i, _ in stored}
        assert len(stored) >= len(acked[user]), (user, len(stored), len(acked[user]))
        for n, fact_id in enumerate(acked[user]):
            assert fact_id in ids and stored[n][0] == fact_id, (user, n, fact_id)


def writer(db, user, lines, acked, kill_after):
    """One `memory add --stdin` process fed all lines at once, killed with SIGKILL after
    kill_after acknowledgements (or after it finishes)."""
    proc = subprocess.Popen([BIN, "memory", "add", "--user", user, "--stdin", "--db", str(db)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    feeder = threading.Thread(target=lambda: (proc.stdin.write("".join(l + "\n" for l in lines)),
                                              proc.stdin.close()), daemon=True)
    feeder.start()
    for line in proc.stdout:
        acked.append(int(line))
        if len(acked) >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    feeder.join(timeout=5)
    return proc.returncode


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kill9_loses_no_acknowledged_fact(tmp_path, seed):
    rng = random.Random(seed)
    db = tmp_path / "m.db"
    ok(mem(db, "add", "--user", "seed", "--text", "created before the writers"))
    users = [f"w{i}" for i in range(3)]
    # Texts are already whitespace-normalized, so stored text must equal sent text.
    submitted = {u: [f"{u} fact {n} " + "x" * rng.randrange(1, 300) for n in range(400)]
                 for u in users}
    acked = {u: [] for u in users}
    kill_after = {u: rng.randrange(5, 120) for u in users}
    threads = [threading.Thread(target=writer, args=(db, u, submitted[u], acked[u], kill_after[u]))
               for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for u in users:
        assert len(acked[u]) == kill_after[u], (u, len(acked[u]))  # each was killed mid-stream
    check_db(db, submitted, acked)
    # The binary itself reopens the file after the crash and keeps going.
    listed = facts(db, users[0])
    assert [f["id"] for f in listed][: len(acked[users[0]])] == acked[users[0]]
    ok(mem(db, "add", "--user", users[0], "--text", "after the crash"))


def test_kill9_of_single_add_processes(tmp_path):
    """A loop of one-shot `memory add` processes, each SIGKILLed at a random moment: an exit 0
    with a printed id means acknowledged, and those facts must all be there."""
    rng = random.Random(7)
    db = tmp_path / "m.db"
    ok(mem(db, "add", "--user", "u", "--text", "first"))
    acked_texts = {}
    for n in range(25):
        text = f"fact {n}"
        proc = subprocess.Popen([BIN, "memory", "add", "--user", "u", "--text", text, "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.0, 0.15))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        if proc.returncode == 0 and out.strip():
            acked_texts[int(out)] = text
    con = sqlite3.connect(str(db))
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = dict(con.execute("SELECT id, text FROM facts WHERE user_id = 'u'").fetchall())
    finally:
        con.close()
    for fact_id, text in acked_texts.items():
        assert stored.get(fact_id) == text
