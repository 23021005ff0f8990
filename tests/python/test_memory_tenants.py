"""Tenant isolation of the memory API under randomized load: threads with one key each (one key
covering two users) add, list, page, search, update, delete and read the history of their users'
memories through both route families (/v1/memories and Mem0's /memories, /search), and probe
other tenants' users and fact ids and extraction events. Every third thread also has one
exchange extracted by the model (a synchronous `infer` add, an async one, or a chat with
`memory.store`) and reads the history of the facts it changed. Every message carries a
token that names its owner; no response to a key may carry a token of a user outside the key
(the bundled model's extractions may be nonsense, but only its own user's nonsense), another
tenant's fact or event id is always a 404, another tenant's user always a 403, and each key sees
exactly its own users' memories as its own model of them says, extracted changes included."""
import os
import random
import re
import threading
import time

import httpx
import pytest

from server_process import MODEL, MODEL_ID, Server

pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

USERS = [f"u{i}" for i in range(8)]
# Each thread acts with one key; the last key covers two users.
ACTORS = [(f"sk-u{i}", [f"u{i}"]) for i in range(6)] + [("sk-pair", ["u6", "u7"])]
KEYS = {key: users for key, users in ACTORS}
TOKEN = re.compile(r"tok(\d+)x\d+")
TOPICS = ["garden", "music", "travel", "cooking", "chess"]
# Model extractions take most of the test's time: one exchange each for the threads of every
# third key (the pair key among them), of these kinds in turn across threads and seeds.
EXTRACTION_KINDS = ["sync", "async", "chat"]
EXTRACTION_STEP = 20


def extraction_kind(seed, i):
    return EXTRACTION_KINDS[(seed + i // 3) % len(EXTRACTION_KINDS)] if i % 3 == 0 else None


def owner_of_token(match):
    return f"u{match.group(1)}"


class Registry:
    """Every fact id and extraction event id ever created, with its owner: shared by the
    threads for cross probes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.owner = {}
        self.event_owner = {}
        self.extracted = 0  # changes extractions made

    def add(self, fid, user):
        with self.lock:
            self.owner[fid] = user

    def count_extracted(self, n):
        with self.lock:
            self.extracted += n

    def add_event(self, event, user):
        with self.lock:
            self.event_owner[event] = user

    def foreign(self, rng, users, events=False):
        with self.lock:
            owners = self.event_owner if events else self.owner
            ids = [f for f, u in owners.items() if u not in users]
        return rng.choice(ids) if ids else None


def actor(url, key, users, seed, registry, failures, kind=None):
    rng = random.Random(seed)
    c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    alive = {}  # fact id -> (user, agent_id, text): this thread's own model
    deleted = set()
    serial = 0

    def check(res, what):
        for m in TOKEN.finditer(res.text):
            if owner_of_token(m) not in users:
                failures.append(f"{key} {what}: {res.status_code} carries {m.group(0)}: {res.text[:300]}")
        return res

    def expect(res, status, what):
        check(res, what)
        if res.status_code != status:
            failures.append(f"{key} {what}: expected {status}, got {res.status_code}: {res.text[:300]}")
            return None
        return res.json()

    def finished(event, what):
        """The extraction event's final state, polled as its owner."""
        deadline = time.time() + 300
        while True:
            state = expect(c.get(f"/v1/memories/events/{event}"), 200, what)
            if state is None or state["status"] in ("SUCCEEDED", "FAILED"):
                return state
            if time.time() > deadline:
                failures.append(f"{key} {what}: event {event} did not end: {state}")
                return None
            time.sleep(0.2)

    def take_extracted(results, user, agent, what):
        """Brings the thread's model up to the extraction's changes; each changed fact must
        be one of the user's, with its change last in its history."""
        registry.count_extracted(len(results))
        for item in results:
            fid, event = item["id"], item["event"]
            if event != "ADD" and (fid not in alive or alive[fid][0] != user):
                failures.append(f"{key} {what}: extraction changed {fid}, not {user}'s: {item}")
                continue
            if event == "DELETE":
                del alive[fid]
                deleted.add(fid)
            else:
                alive[fid] = (user, alive[fid][1] if event == "UPDATE" else agent, item["memory"])
                registry.add(fid, user)
            history = expect(c.get(f"/v1/memories/{fid}/history"), 200, what)
            if history and history[-1]["event"] != event:
                failures.append(f"{key} {what}: history of {fid} ends {history[-1]}, not {event}")

    def extract(kind, user, what):
        nonlocal serial
        serial += 1
        said = f"My friend {user} plays {rng.choice(TOPICS)}, code tok{int(user[1:])}x{serial}."
        agent = rng.choice(["", "helper"]) if kind != "chat" else ""
        if kind == "chat":
            res = c.post("/v1/chat/completions", timeout=600, json={
                "model": MODEL_ID, "user": user, "max_tokens": 8, "temperature": 0,
                "messages": [{"role": "user", "content": said}],
                "memory": {"mode": rng.choice(["none", "kv"]), "store": True}})
            if expect(res, 200, what) is None:
                return
            event = res.headers["x-memory-event-id"]
        else:
            body = {"user_id": user, "messages": [{"role": "user", "content": said}],
                    **({"agent_id": agent} if agent else {})}
            if kind == "sync":
                res = check(c.post(rng.choice(["", "/v1"]) + "/memories", json=body,
                                   timeout=600), what)
                if res.status_code == 200:
                    take_extracted(res.json()["results"], user, agent, what)
                elif res.status_code != 500:  # 500: the model's output did not parse
                    failures.append(f"{key} {what}: {res.status_code}: {res.text[:300]}")
                return
            queued = expect(c.post("/v1/memories", json={**body, "async_mode": True}), 200, what)
            if queued is None:
                return
            event = queued["event_id"]
        registry.add_event(event, user)
        state = finished(event, what)
        if state and state["status"] == "SUCCEEDED":
            take_extracted(state["results"], user, agent, what)

    for step in range(70):
        user = rng.choice(users)
        family = rng.choice(["", "/v1"])
        op = rng.choice(["add", "add", "list", "page", "search", "get", "update", "delete",
                         "history", "foreign_id", "foreign_user", "foreign_event"])
        if kind and step == EXTRACTION_STEP:
            op = "extract"
        what = f"step {step} {op} {family}"
        if op == "extract":
            extract(kind, user, what + " " + kind)
        elif op == "foreign_event":
            event = registry.foreign(rng, users, events=True)
            if event is not None:
                expect(c.get(f"/v1/memories/events/{event}"), 404, what)
        elif op == "add":
            texts = []
            for _ in range(rng.randint(1, 3)):
                serial += 1
                n = int(user[1:])
                texts.append(f"{user} likes {rng.choice(TOPICS)} secret tok{n}x{serial}")
            agent = rng.choice(["", "helper"])
            body = {"user_id": user, **({"agent_id": agent} if agent else {})}
            if family == "" or rng.random() < 0.5:
                body.update(infer=False, messages=[{"role": "user", "content": t} for t in texts])
                path = family + "/memories"
            else:
                body["facts"] = texts
                path = "/v1/memories"
            got = expect(c.post(path, json=body), 200, what)
            if got:
                for item, text in zip(got["results"], texts):
                    alive[item["id"]] = (user, agent, text)
                    registry.add(item["id"], user)
        elif op in ("list", "page"):
            params = {"user_id": user}
            if rng.random() < 0.3:
                params["agent_id"] = "helper"
            if op == "page":
                params.update(page=rng.randint(1, 3), page_size=rng.randint(1, 4))
            got = expect(c.get(family + "/memories", params=params), 200, what)
            if got:
                mine = sorted((f for f, (u, a, _) in alive.items()
                               if u == user and (params.get("agent_id") in (None, a))), key=int)
                if op == "page":
                    start = (params["page"] - 1) * params["page_size"]
                    mine = mine[start:start + params["page_size"]]
                ids = [r["id"] for r in got["results"]]
                if ids != mine or any(r["user_id"] != user for r in got["results"]):
                    failures.append(f"{key} {what}: listed {ids}, expected {mine}")
        elif op == "search":
            path = "/search" if family == "" else "/v1/memories/search"
            body = {"query": " ".join(TOPICS) + " secret likes", "top_k": 1000}
            body.update({"user_id": user} if rng.random() < 0.5 else {"filters": {"user_id": user}})
            got = expect(c.post(path, json=body), 200, what)
            if got:
                # Every fact written as "... secret tok..." matches the query; an extracted one
                # may not, but must be the user's.
                ids = {r["id"] for r in got["results"]}
                mine = {f for f, (u, _, _) in alive.items() if u == user}
                matching = {f for f in mine if " secret tok" in alive[f][2]}
                if not matching <= ids <= mine:
                    failures.append(f"{key} {what}: found {sorted(ids)}, expected {sorted(mine)}")
        elif op in ("get", "update", "delete", "history"):
            pool = list(alive) + list(deleted)
            if not pool:
                continue
            fid = rng.choice(pool)
            live = fid in alive
            if op == "get":
                got = expect(c.get(f"{family}/memories/{fid}"), 200 if live else 404, what)
                if got and live and got["memory"] != alive[fid][2]:
                    failures.append(f"{key} {what}: {fid} reads {got['memory']}")
            elif op == "update":
                text = (alive[fid][2] + " revised") if live else "revived"
                if expect(c.put(f"{family}/memories/{fid}", json={"text": text}), 200 if live else 404, what) and live:
                    alive[fid] = (alive[fid][0], alive[fid][1], text)
            elif op == "delete":
                if expect(c.delete(f"{family}/memories/{fid}"), 200 if live else 404, what) is not None and live:
                    del alive[fid]
                    deleted.add(fid)
            else:
                got = expect(c.get(f"{family}/memories/{fid}/history"), 200, what)
                if got and (got[0]["event"] != "ADD" or (got[-1]["event"] == "DELETE") == live):
                    failures.append(f"{key} {what}: history of {fid} is {got}")
        elif op == "foreign_id":
            fid = registry.foreign(rng, users)
            if fid is None:
                continue
            expect(c.get(f"{family}/memories/{fid}"), 404, what)
            expect(c.get(f"{family}/memories/{fid}/history"), 404, what)
            expect(c.put(f"{family}/memories/{fid}", json={"text": "taken"}), 404, what)
            expect(c.delete(f"{family}/memories/{fid}"), 404, what)
        else:
            other = rng.choice([u for u in USERS if u not in users])
            expect(c.get(family + "/memories", params={"user_id": other}), 403, what)
            expect(c.post("/search", json={"query": "secret", "filters": {"user_id": other}}), 403, what)
            expect(c.post(family + "/memories", json={"user_id": other, "infer": False,
                                                      "messages": [{"role": "user", "content": "x"}]}), 403, what)
            expect(c.delete(family + "/memories", params={"user_id": other}), 403, what)
            expect(c.post("/reset"), 403, what)


@pytest.mark.parametrize("seed", [1, 2])
def test_no_memory_reaches_another_tenant(tmp_path, seed):
    # Facts are encoded when a chat needs them: background encoding of every added fact would
    # hold up the extractions for nothing the test reads.
    s = Server(tmp_path, "--no-background-encode", keys={**KEYS, "sk-admin": ["*"]})
    try:
        registry, failures = Registry(), []
        threads = [threading.Thread(target=actor, args=(s.url, key, users, seed * 100 + i, registry, failures,
                                                        extraction_kind(seed, i)))
                   for i, (key, users) in enumerate(ACTORS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, "\n".join(failures[:20])
        # Every extraction event is its owner's only.
        assert registry.event_owner and registry.extracted > 0
        for key, users in ACTORS:
            c = httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {key}"})
            for event, owner in registry.event_owner.items():
                res = c.get(f"/v1/memories/events/{event}")
                assert res.status_code == (200 if owner in users else 404), (key, event, res.text)
        # The admin key sees each user's memories under that user only.
        admin = httpx.Client(base_url=s.url, headers={"Authorization": "Bearer sk-admin"})
        for user in USERS:
            for item in admin.get("/memories", params={"user_id": user}).json()["results"]:
                assert item["user_id"] == user
                assert all(owner_of_token(m) == user for m in TOKEN.finditer(item["memory"]))
    finally:
        s.stop()
