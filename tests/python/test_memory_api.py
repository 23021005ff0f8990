"""Mem0's REST routes (/memories, /search, /reset) and the /v1/memories routes on the real
`inferscale serve` binary, through httpx: item shapes (the hash checked against hashlib's MD5),
trailing slashes, agent/run scopes, pagination against the full listing, search filters against
a Python evaluation of the same filters over the unfiltered ranking, history after update and
delete, deletes by scope, reset, and the errors (unknown fields, missing user_id, bad filters)."""
import hashlib
import os

import pytest

from server_process import MODEL, Server, api_client, ok

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

KEYS = {"sk-alice": ["alice"], "sk-bob": ["bob"], "sk-admin": ["*"]}
ITEM_KEYS = {"id", "memory", "hash", "metadata", "created_at", "updated_at", "user_id", "agent_id",
             "run_id"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("mem0"), keys=KEYS)
    yield s
    s.stop()


def http(server, key="sk-admin"):
    return api_client(server, key, timeout=60)


def error(res, status, param=None):
    assert res.status_code == status, (res.status_code, res.text)
    body = res.json()["error"]
    if param is not None:
        assert body["param"] == param, body
    return body


def add(c, user, texts, prefix="", **scope):
    """Stores `texts` verbatim (infer false) and returns the added items."""
    body = {"user_id": user, "infer": False,
            "messages": [{"role": "user", "content": t} for t in texts], **scope}
    return ok(c.post(prefix + "/memories", json=body))["results"]


def test_add_verbatim_answers_mem0_items_with_md5_hashes(server):
    c = http(server)
    res = ok(c.post("/memories", json={
        "user_id": "ann", "agent_id": "planner", "run_id": "trip-1", "infer": False,
        "metadata": {"topic": "travel", "n": 3},
        "messages": [{"role": "system", "content": "You are a planner."},
                     {"role": "user", "content": "Ann  flies to Lisbon in May."},
                     {"role": "assistant", "content": "Ann prefers window seats."}]}))
    results = res["results"]
    # The system message instructs; it is not a memory. Text is whitespace-normalized.
    assert [(r["memory"], r["event"]) for r in results] == [
        ("Ann flies to Lisbon in May.", "ADD"), ("Ann prefers window seats.", "ADD")]
    for r in results:
        item = ok(c.get(f"/memories/{r['id']}"))
        assert set(item) == ITEM_KEYS
        assert item["hash"] == hashlib.md5(item["memory"].encode()).hexdigest()
        assert (item["user_id"], item["agent_id"], item["run_id"]) == ("ann", "planner", "trip-1")
        assert item["metadata"] == {"topic": "travel", "n": 3}
        assert {k: item[k] for k in ITEM_KEYS} == {k: r[k] for k in ITEM_KEYS}
    # The same fact through /v1; a fact without scopes has them null.
    plain = ok(c.post("/v1/memories", json={"user_id": "ann", "facts": ["Ann is a nurse."]}))
    item = ok(c.get(f"/v1/memories/{plain['results'][0]['id']}"))
    assert (item["agent_id"], item["run_id"], item["metadata"]) == (None, None, {})


def test_every_route_takes_a_trailing_slash(server):
    c = http(server)
    added = add(c, "cat", ["Cat plays the cello.", "Cat lives in Bern."], agent_id="a")
    fact = added[0]["id"]
    for prefix in ("", "/v1"):
        for path, kw in ((f"{prefix}/memories", {"params": {"user_id": "cat"}}),
                         (f"{prefix}/memories/{fact}", {}),
                         (f"{prefix}/memories/{fact}/history", {})):
            assert ok(c.get(path, **kw)) == ok(c.get(path + "/", **kw)), path
    search = {"user_id": "cat", "query": "cello"}
    assert ok(c.post("/search", json=search)) == ok(c.post("/search/", json=search))
    assert ok(c.post("/v1/memories/search", json=search)) == ok(c.post("/v1/memories/search/", json=search))
    assert ok(c.put(f"/memories/{fact}/", json={"text": "Cat plays the viola."}))["memory"] == \
        "Cat plays the viola."
    assert ok(c.post("/memories/", json={"user_id": "cat", "infer": False,
                                         "messages": [{"role": "user", "content": "x y"}]}))["results"]
    assert ok(c.delete(f"/memories/{fact}/")) == {"message": "Memory deleted successfully"}
    assert ok(c.delete("/memories/", params={"user_id": "cat", "agent_id": "a"}))["deleted_count"] == 1
    assert ok(c.post("/v1/memories/", json={"user_id": "cat", "text": "Cat again."}))["results"]


def test_pages_and_limits_slice_the_full_listing(server):
    c = http(server)
    add(c, "dan", [f"Dan fact number {i}." for i in range(23)])
    full = ok(c.get("/memories", params={"user_id": "dan"}))["results"]
    assert len(full) == 23
    assert [int(f["id"]) for f in full] == sorted(int(f["id"]) for f in full)
    for prefix in ("", "/v1"):
        for size in (1, 5, 7, 23, 50):
            pages, page = [], 1
            while True:
                got = ok(c.get(prefix + "/memories", params={"user_id": "dan", "page": page,
                                                              "page_size": size}))["results"]
                if not got:
                    break
                assert len(got) <= size
                pages += got
                page += 1
            assert pages == full, (prefix, size)
        for limit in (1, 7, 23, 1000):
            assert ok(c.get(prefix + "/memories", params={"user_id": "dan", "limit": limit}))[
                "results"] == full[:limit]
        assert ok(c.get(prefix + "/memories", params={"user_id": "dan", "top_k": 3}))["results"] == full[:3]
    for params, param in (({"page": 0}, "page"), ({"page_size": 1001}, "page_size"),
                          ({"limit": "x"}, "limit"), ({"limit": -1}, "limit"),
                          ({"limit": 2, "page": 1}, "limit"), ({"sort": "desc"}, "sort")):
        error(c.get("/memories", params={"user_id": "dan", **params}), 400, param)


def test_agent_and_run_narrow_listings_and_deletes(server):
    c = http(server)
    for i in range(12):
        add(c, "eve", [f"Eve note {i}."], agent_id=["a1", "a2", "a3"][i % 3],
            **({"run_id": f"r{i % 2}"} if i % 4 else {}))
    full = ok(c.get("/memories", params={"user_id": "eve"}))["results"]
    for agent in (None, "a1", "a2", "zz"):
        for run in (None, "r0", "r1"):
            params = {"user_id": "eve", **({"agent_id": agent} if agent else {}),
                      **({"run_id": run} if run else {})}
            expected = [f for f in full if (agent is None or f["agent_id"] == agent)
                        and (run is None or f["run_id"] == run)]
            assert ok(c.get("/memories", params=params))["results"] == expected, params
            assert ok(c.get("/v1/memories", params=params))["results"] == expected, params
    gone = [f for f in full if f["agent_id"] == "a2" and f["run_id"] == "r1"]
    assert gone
    res = ok(c.delete("/memories", params={"user_id": "eve", "agent_id": "a2", "run_id": "r1"}))
    assert res == {"message": "All relevant memories deleted", "deleted_count": len(gone)}
    left = ok(c.get("/memories", params={"user_id": "eve"}))["results"]
    assert left == [f for f in full if f not in gone]
    for f in gone:  # a delete by scope is a DELETE in each fact's history
        assert ok(c.get(f"/memories/{f['id']}/history"))[-1]["event"] == "DELETE"
    # /v1 forgets a whole user without a scope, only the scope's facts with one.
    ok(c.delete("/v1/memories", params={"user_id": "eve", "agent_id": "a1"}))
    assert all(f["agent_id"] != "a1" for f in ok(c.get("/memories", params={"user_id": "eve"}))["results"])
    assert ok(c.delete("/v1/memories", params={"user_id": "eve"})) == {"user_id": "eve", "deleted": True}
    assert ok(c.get("/memories", params={"user_id": "eve"})) == {"results": []}
    error(c.delete("/memories"), 400, "user_id")


def holds(f, cond):
    """The filter semantics of memory_filter.h, written independently for the peer."""
    def value(key):
        if key in ("user_id", "agent_id", "run_id"):
            return f[key]
        return f["metadata"].get(key)

    def test(key, op, x):
        v = value(key)
        if op == "*":
            return v is not None
        if op == "eq":
            return v is not None and v == x
        if op == "ne":
            return not (v is not None and v == x)
        if op in ("in", "nin"):
            return (v is not None and v in x) == (op == "in")
        if op in ("contains", "icontains"):
            if not isinstance(v, str):
                return False
            return (x.lower() in v.lower()) if op == "icontains" else (x in v)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return False
        return {"gt": v > x, "gte": v >= x, "lt": v < x, "lte": v <= x}[op]

    for key, c in cond.items():
        if key == "AND" and not all(holds(f, s) for s in c):
            return False
        if key == "OR" and not any(holds(f, s) for s in c):
            return False
        if key == "NOT" and any(holds(f, s) for s in c):
            return False
        if key in ("AND", "OR", "NOT"):
            continue
        if isinstance(c, dict):
            if not all(test(key, op, x) for op, x in c.items()):
                return False
        elif not test(key, "*" if c == "*" else "eq", c):
            return False
    return True


def test_search_filters_equal_the_same_filters_over_the_unfiltered_ranking(server):
    c = http(server)
    colors = ["red", "green", "Blue", "teal"]
    for i in range(30):
        meta = {"color": colors[i % 4], "n": i, **({"tag": "odd"} if i % 2 else {})}
        add(c, "fay", [f"Fay keeps a {colors[i % 4].lower()} garden box number {i}."],
            agent_id=["g1", "g2"][i % 2], run_id=f"r{i % 3}", metadata=meta)
    ranked = ok(c.post("/search", json={"user_id": "fay", "query": "garden box", "top_k": 1000}))["results"]
    assert len(ranked) == 30
    assert [r["score"] for r in ranked] == sorted((r["score"] for r in ranked), reverse=True)
    filters = [
        {"color": "red"}, {"n": 7}, {"tag": "*"}, {"agent_id": "g2"}, {"run_id": "r1", "color": "teal"},
        {"n": {"gte": 10, "lt": 20}}, {"n": {"gt": 25}}, {"n": {"lte": 2}}, {"color": {"ne": "red"}},
        {"color": {"in": ["red", "Blue"]}}, {"color": {"nin": ["red", "Blue"]}},
        {"color": {"contains": "ee"}}, {"color": {"icontains": "BLU"}}, {"tag": {"ne": "odd"}},
        {"OR": [{"color": "red"}, {"n": {"gt": 27}}]}, {"NOT": [{"color": "red"}, {"tag": "odd"}]},
        {"AND": [{"agent_id": "g1"}, {"OR": [{"run_id": "r0"}, {"run_id": "r2"}]}]},
        {"missing": {"nin": [1]}}, {"user_id": "fay", "color": "green"},
    ]
    for flt in filters:
        for k in (3, 20):
            expected = [r for r in ranked if holds(r, flt)][:k]
            got = ok(c.post("/search", json={"user_id": "fay", "query": "garden box", "filters": flt,
                                            "top_k": k}))["results"]
            assert got == expected, (flt, k)
            v1 = ok(c.post("/v1/memories/search", json={"user_id": "fay", "query": "garden box",
                                                        "filters": flt, "limit": k}))["results"]
            assert v1 == expected, (flt, k)
    # Top-level agent_id/run_id narrow like filters; user_id may come inside filters alone.
    assert ok(c.post("/search", json={"query": "garden box", "filters": {"user_id": "fay"},
                                      "agent_id": "g1", "run_id": "r0", "top_k": 1000}))["results"] == \
        [r for r in ranked if r["agent_id"] == "g1" and r["run_id"] == "r0"]
    # The default sizes: Mem0's 20, /v1's 5.
    assert ok(c.post("/search", json={"user_id": "fay", "query": "garden box"}))["results"] == ranked[:20]
    assert ok(c.post("/v1/memories/search", json={"user_id": "fay", "query": "garden box"}))["results"] == \
        ranked[:5]
    cut = ranked[10]["score"]
    assert ok(c.post("/search", json={"user_id": "fay", "query": "garden box", "threshold": cut,
                                      "top_k": 1000}))["results"] == [r for r in ranked if r["score"] >= cut]


def test_bad_searches_are_400s_naming_the_problem(server):
    c = http(server)
    base = {"user_id": "fay", "query": "garden"}
    e = error(c.post("/search", json={**base, "filters": {"color": {"regex": "r.*"}}}), 400, "filters.color")
    assert "regex" in e["message"]
    error(c.post("/search", json={**base, "filters": {"OR": {"color": "red"}}}), 400, "filters.OR")
    error(c.post("/search", json={**base, "filters": {"n": {"gt": "ten"}}}), 400, "filters.n")
    error(c.post("/search", json={**base, "filters": {"color": {"in": "red"}}}), 400, "filters.color")
    error(c.post("/search", json={**base, "filters": ["x"]}), 400, "filters")
    error(c.post("/search", json={**base, "filters": {"user_id": "gus"}}), 400, "user_id")
    error(c.post("/search", json={**base, "filters": {"user_id": {"in": ["fay"]}}}), 400, "filters.user_id")
    error(c.post("/search", json={"query": "garden"}), 400, "user_id")
    error(c.post("/search", json={"user_id": "fay"}), 400, "query")
    error(c.post("/search", json={**base, "rerank": True}), 400, "rerank")
    error(c.post("/search", json={**base, "top_k": 0}), 400, "top_k")


def test_history_follows_updates_and_deletes_on_both_families(server):
    c = http(server)
    for prefix in ("", "/v1"):
        fact = add(c, "gus", ["Gus drinks tea."], prefix=prefix, metadata={"v": 1})[0]
        fid = fact["id"]
        up = ok(c.put(f"{prefix}/memories/{fid}", json={"text": "Gus drinks green tea."}))
        assert up["memory"] == "Gus drinks green tea." and up["metadata"] == {"v": 1}
        # Metadata alone keeps the text; Mem0's clients name the text "data" too.
        up = ok(c.put(f"{prefix}/memories/{fid}", json={"metadata": {"v": 2}}))
        assert (up["memory"], up["metadata"]) == ("Gus drinks green tea.", {"v": 2})
        up = ok(c.put(f"{prefix}/memories/{fid}", json={"data": "Gus drinks coffee."}))
        assert up["hash"] == hashlib.md5(b"Gus drinks coffee.").hexdigest()
        assert ("message" in up) == (prefix == "")
        deleted = ok(c.delete(f"{prefix}/memories/{fid}"))
        assert deleted == ({"message": "Memory deleted successfully"} if prefix == ""
                           else {"id": fid, "deleted": True})
        error(c.get(f"{prefix}/memories/{fid}"), 404)
        history = ok(c.get(f"{prefix}/memories/{fid}/history"))
        assert [(h["event"], h["old_memory"], h["new_memory"], h["is_deleted"]) for h in history] == [
            ("ADD", None, "Gus drinks tea.", False),
            ("UPDATE", "Gus drinks tea.", "Gus drinks green tea.", False),
            ("UPDATE", "Gus drinks green tea.", "Gus drinks green tea.", False),
            ("UPDATE", "Gus drinks green tea.", "Gus drinks coffee.", False),
            ("DELETE", "Gus drinks coffee.", None, True)]
        assert {h["memory_id"] for h in history} == {fid} and {h["user_id"] for h in history} == {"gus"}
        assert [int(h["id"]) for h in history] == sorted(int(h["id"]) for h in history)
        error(c.put(f"{prefix}/memories/{fid}", json={"text": "back?"}), 404)
        error(c.delete(f"{prefix}/memories/{fid}"), 404)
    error(c.get("/memories/987654321/history"), 404)
    error(c.get("/memories/abc/history"), 404)


def test_unknown_fields_and_missing_user_id_are_400s_naming_them(server):
    c = http(server)
    msgs = [{"role": "user", "content": "hello"}]
    error(c.post("/memories", json={"user_id": "hal", "messages": msgs, "expiration_date": "2030-01-01"}),
          400, "expiration_date")
    error(c.post("/memories", json={"user_id": "hal", "messages": [{"role": "user", "content": "x", "tone": 1}]}),
          400, "messages[0].tone")
    error(c.post("/memories", json={"messages": msgs}), 400, "user_id")
    error(c.post("/memories", json={"user_id": 7, "messages": msgs}), 400, "user_id")
    error(c.post("/memories", json={"user_id": "hal", "messages": msgs, "metadata": [1]}), 400, "metadata")
    error(c.post("/memories", json={"user_id": "hal", "messages": msgs, "infer": "no"}), 400, "infer")
    error(c.post("/memories", json={"user_id": "hal", "messages": []}), 400, "messages")
    error(c.post("/memories", json={"user_id": "hal", "messages": msgs, "agent_id": "bad\nid", "infer": False}),
          400)
    error(c.get("/memories"), 400, "user_id")
    error(c.get("/memories", params={"user_id": "hal", "show_expired": "true"}), 400, "show_expired")
    fid = add(c, "hal", ["Hal sails."])[0]["id"]
    error(c.put(f"/memories/{fid}", json={"text": "x", "expiration_date": None, "mood": "ok"}), 400, "mood")
    error(c.put(f"/memories/{fid}", json={}), 400)
    error(c.post("/reset", json={"confirm": True}), 400, "confirm")
    # A failed add stores nothing, not even the facts before the bad one.
    error(c.post("/v1/memories", json={"user_id": "hal", "facts": ["Hal rows.", "  "]}), 400)
    assert [f["memory"] for f in ok(c.get("/memories", params={"user_id": "hal"}))["results"]] == ["Hal sails."]


def test_keys_scope_every_route_and_reset_needs_everyone(tmp_path):
    s = Server(tmp_path, keys=KEYS)
    try:
        admin, alice = http(s), http(s, "sk-alice")
        bob_fact = add(admin, "bob", ["Bob's PIN is 4321."])[0]["id"]
        mine = add(alice, "alice", ["Alice hums."])[0]["id"]
        for route in (f"/memories/{bob_fact}", f"/memories/{bob_fact}/history",
                      f"/v1/memories/{bob_fact}", f"/v1/memories/{bob_fact}/history"):
            assert "4321" not in error(alice.get(route), 404)["message"]
        error(alice.put(f"/memories/{bob_fact}", json={"text": "mine now"}), 404)
        error(alice.delete(f"/memories/{bob_fact}"), 404)
        error(alice.get("/memories", params={"user_id": "bob"}), 403, "user_id")
        error(alice.post("/search", json={"query": "PIN", "filters": {"user_id": "bob"}}), 403)
        error(alice.delete("/memories", params={"user_id": "bob"}), 403)
        error(alice.post("/memories", json={"user_id": "bob", "infer": False,
                                            "messages": [{"role": "user", "content": "x"}]}), 403)
        error(http(s, "sk-nobody").get("/memories", params={"user_id": "alice"}), 401)
        error(alice.post("/reset"), 403)
        assert ok(admin.get(f"/memories/{bob_fact}"))["memory"] == "Bob's PIN is 4321."
        assert ok(admin.post("/reset/")) == {"message": "All memories reset"}
        for user in ("alice", "bob"):
            assert ok(admin.get("/memories", params={"user_id": user})) == {"results": []}
            assert ok(admin.post("/search", json={"user_id": user, "query": "PIN hums"})) == {"results": []}
        error(admin.get(f"/memories/{mine}/history"), 404)
        # Ids stay unused after a reset.
        assert int(add(admin, "bob", ["Bob again."])[0]["id"]) > int(mine)
    finally:
        s.stop()
