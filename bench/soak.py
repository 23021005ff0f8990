#!/usr/bin/env python3
"""Soak: the real `inferscale serve` under mixed traffic for a given time, its resources sampled
once a second; fails when one of them keeps growing or an answer changes.

  python3 bench/soak.py --minutes 30 --out soak-cpu [--server-args "--device cuda ..."]

Traffic: --clients threads, each a loop of requests picked at random: chat through the official
`openai` client, streamed or not, with the memory of a stable user (`kv` or `prompt`) or none;
a stream the client drops after its first chunk; facts added to and deleted from churn users,
and churn users forgotten; requests that must get a 4xx (an unknown field, malformed JSON,
another model). Every --probe-every seconds the clients pause, the server drains (no request
running), and a probe asks a fixed greedy question with the stable user's memory: its answer must
equal the one the server gave it alone before the traffic began. Alone, so that it runs at the
solo run's batch shape (a GPU's GEMMs may round differently at another batch size); what the
traffic leaves behind (KV blocks, chunk tiers, the store) is still there.

Sampled once a second: the server's resident memory and open file descriptors (/proc), KV blocks
in use and chunk-pool bytes per tier (/metrics), and the SQLite files' size (database and WAL).
At the end, per series, the slope of a least-squares line over the second half of the run is
printed beside its limit (SLOPE_LIMITS, per minute); a PNG of the series (matplotlib) and the
samples as JSON go to --out. Exit status 1 when a slope is over its limit, a probe answer
differed, or a request got a status it should not (a 5xx, or a 4xx where none was due).
"""
import argparse
import json
import os
import pathlib
import random
import shlex
import sys
import threading
import time

import httpx
import openai

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from server_process import Server  # noqa: E402

STABLE_USER = "soak-stable"
STABLE_FACTS = [
    "My dog is called Biscuit.", "I live in Lisbon.", "I work as a nurse.",
    "My sister is named Ana.", "I am allergic to peanuts.", "I play the cello.",
]
QUESTIONS = ["What is my dog called?", "Where do I live?", "What do I do for work?",
             "Who is my sister?", "What am I allergic to?", "Which instrument do I play?"]
PROBE = "What is the name of my dog?"
# Largest growth per minute over the second half of the run that still counts as flat.
SLOPE_LIMITS = {
    "rss_mib": 2.0,
    "open_fds": 0.5,
    "kv_blocks_in_use": 2.0,
    "chunk_device_mib": 1.0,
    "chunk_host_mib": 1.0,
    "chunk_disk_mib": 1.0,
    "sqlite_mib": 1.0,
}


class Traffic:
    def __init__(self, server, model, seed):
        self.server = server
        self.model = model
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.counts = {}
        self.unexpected = []
        self.paused = threading.Event()  # set: clients start no new request
        self.in_flight = 0

    def quiet(self, timeout=600):
        """Pauses the clients and waits until none has a request out and the server runs none."""
        self.paused.set()
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                idle = self.in_flight == 0
            if idle and self.server.metrics().get("inferscale_requests_running", 0.0) == 0.0:
                return
            time.sleep(0.05)
        raise RuntimeError(f"the server did not drain in {timeout} s")

    def count(self, kind, status, expected):
        with self.lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if status not in expected:
                self.unexpected.append(f"{kind}: status {status}, expected {sorted(expected)}")

    def chat(self, rng, client):
        mode = rng.choice(["kv", "prompt", "none"])
        extra = {"memory": {"mode": mode, "top_k": 3}} if mode != "none" else {}
        args = dict(model=self.model, messages=[{"role": "user", "content": rng.choice(QUESTIONS)}],
                    max_tokens=rng.choice([4, 16]), temperature=0, extra_body=extra)
        if mode != "none":
            args["user"] = STABLE_USER
        if rng.random() < 0.5:
            client.chat.completions.create(**args)
        else:
            for _ in client.chat.completions.create(stream=True, **args):
                pass
        self.count("chat", 200, {200})

    def dropped_stream(self, rng, http):
        body = {"model": self.model, "stream": True, "max_tokens": 64,
                "messages": [{"role": "user", "content": "Tell me a long story."}]}
        with http.stream("POST", "/v1/chat/completions", json=body) as r:
            for _ in r.iter_bytes():
                break  # leave after the first chunk
        self.count("dropped_stream", r.status_code, {200})

    def churn(self, rng, http):
        user = f"soak-churn-{rng.randrange(4)}"
        pick = rng.random()
        if pick < 0.5:
            r = http.post("/v1/memories", json={"user_id": user, "facts": [
                f"Churn fact {rng.randrange(10**9)} about item {rng.randrange(100)}."]})
            self.count("add_fact", r.status_code, {200})
        elif pick < 0.85:
            r = http.get("/v1/memories", params={"user_id": user})
            self.count("list_facts", r.status_code, {200})
            facts = r.json().get("results", []) if r.status_code == 200 else []
            if facts:
                r = http.delete(f"/v1/memories/{rng.choice(facts)['id']}", params={"user_id": user})
                self.count("delete_fact", r.status_code, {200, 404})  # a racing forget wins
        else:
            r = http.delete("/v1/memories", params={"user_id": user})
            self.count("forget_user", r.status_code, {200, 404})  # 404: nothing stored

    def bad_request(self, rng, http):
        pick = rng.randrange(3)
        if pick == 0:
            r = http.post("/v1/chat/completions", json={
                "model": self.model, "messages": [{"role": "user", "content": "hi"}],
                "no_such_field": 1})
            self.count("unknown_field", r.status_code, {400})
        elif pick == 1:
            r = http.post("/v1/chat/completions", content=b'{"model": ',
                          headers={"content-type": "application/json"})
            self.count("malformed_json", r.status_code, {400})
        else:
            r = http.post("/v1/chat/completions", json={
                "model": "no-such-model", "messages": [{"role": "user", "content": "hi"}]})
            self.count("unknown_model", r.status_code, {404})

    def client_loop(self, seed, stop):
        rng = random.Random(seed)
        client = openai.OpenAI(base_url=self.server.url + "/v1", api_key="none", timeout=600,
                               max_retries=0)
        with httpx.Client(base_url=self.server.url, timeout=600) as http:
            while not stop.is_set():
                if self.paused.is_set():
                    time.sleep(0.05)
                    continue
                with self.lock:
                    self.in_flight += 1
                pick = rng.random()
                try:
                    if pick < 0.45:
                        self.chat(rng, client)
                    elif pick < 0.55:
                        self.dropped_stream(rng, http)
                    elif pick < 0.85:
                        self.churn(rng, http)
                    else:
                        self.bad_request(rng, http)
                except openai.APIStatusError as e:
                    self.count("chat", e.status_code, {200})
                except (httpx.HTTPError, openai.APIConnectionError) as e:
                    self.count("transport", repr(e), set())
                finally:
                    with self.lock:
                        self.in_flight -= 1


def probe(server, model):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=600, max_retries=0)
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROBE}], user=STABLE_USER,
        temperature=0, max_tokens=16, extra_body={"memory": {"mode": "kv", "top_k": 2}})
    return r.choices[0].message.content


def sample(server, t0):
    pid = server.proc.pid
    with open(f"/proc/{pid}/status") as f:
        rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    m = server.metrics()
    db = pathlib.Path(server.db)
    sqlite = sum(p.stat().st_size for p in [db, db.with_name(db.name + "-wal")] if p.exists())
    return {
        "t": time.time() - t0,
        "rss_mib": rss_kib / 1024,
        "open_fds": len(os.listdir(f"/proc/{pid}/fd")),
        "kv_blocks_in_use": m.get("inferscale_kv_blocks_in_use", 0.0),
        "chunk_device_mib": m.get('inferscale_chunk_pool_bytes{tier="device"}', 0.0) / 2**20,
        "chunk_host_mib": m.get('inferscale_chunk_pool_bytes{tier="host"}', 0.0) / 2**20,
        "chunk_disk_mib": m.get('inferscale_chunk_pool_bytes{tier="disk"}', 0.0) / 2**20,
        "sqlite_mib": sqlite / 2**20,
    }


def slope_per_minute(samples, key):
    """Least-squares slope of `key` against time over the second half of the samples."""
    half = samples[len(samples) // 2:]
    n = len(half)
    if n < 2:
        return 0.0
    ts = [s["t"] for s in half]
    ys = [s[key] for s in half]
    mt, my = sum(ts) / n, sum(ys) / n
    var = sum((t - mt) ** 2 for t in ts)
    return 60.0 * sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var if var > 0 else 0.0


def plot(samples, slopes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(SLOPE_LIMITS)
    fig, axes = plt.subplots(len(keys), 1, figsize=(9, 2.0 * len(keys)), sharex=True)
    ts = [s["t"] / 60 for s in samples]
    for ax, key in zip(axes, keys):
        ax.plot(ts, [s[key] for s in samples], lw=1)
        ax.set_ylabel(key, fontsize=8)
        ax.set_title(f"slope {slopes[key]:+.3f}/min over the second half (limit {SLOPE_LIMITS[key]})",
                     fontsize=8)
    axes[-1].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--probe-every", type=float, default=30, help="seconds between probes")
    ap.add_argument("--server-args", default="", help="more `inferscale serve` flags")
    ap.add_argument("--out", default="soak-out")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    server = Server(out, *shlex.split(args.server_args))
    failures = []
    try:
        model = httpx.get(server.url + "/v1/models").json()["data"][0]["id"]
        httpx.post(server.url + "/v1/memories", json={"user_id": STABLE_USER, "facts": STABLE_FACTS},
                   timeout=600).raise_for_status()
        solo = probe(server, model)
        print(f"probe alone: {solo!r}", flush=True)
        traffic = Traffic(server, model, args.seed)
        stop = threading.Event()
        threads = [threading.Thread(target=traffic.client_loop, args=(args.seed * 1000 + i, stop))
                   for i in range(args.clients)]
        t0 = time.time()
        for t in threads:
            t.start()
        samples, probes, next_probe = [], [], t0 + args.probe_every
        while time.time() - t0 < args.minutes * 60:
            samples.append(sample(server, t0))
            if time.time() >= next_probe:
                traffic.quiet()
                answer = probe(server, model)
                traffic.paused.clear()
                probes.append({"t": time.time() - t0, "answer": answer})
                if answer != solo:
                    failures.append(f"probe at {probes[-1]['t']:.0f} s: {answer!r} != {solo!r}")
                next_probe += args.probe_every
            time.sleep(max(0.0, 1.0 - (time.time() - t0 - samples[-1]["t"])))
        stop.set()
        for t in threads:
            t.join(timeout=600)
        if server.proc.poll() is not None:
            failures.append(f"the server exited with {server.proc.returncode}")
    finally:
        server.stop()

    slopes = {k: slope_per_minute(samples, k) for k in SLOPE_LIMITS}
    print(f"{len(samples)} samples over {samples[-1]['t'] / 60:.1f} min, {args.clients} clients; "
          f"{len(probes)} probes; requests: {json.dumps(traffic.counts, sort_keys=True)}")
    print(f"{'series':<18} {'first':>10} {'last':>10} {'slope/min':>10} {'limit':>7}")
    for k, limit in SLOPE_LIMITS.items():
        print(f"{k:<18} {samples[0][k]:>10.2f} {samples[-1][k]:>10.2f} {slopes[k]:>+10.3f} {limit:>7}")
        if slopes[k] > limit:
            failures.append(f"{k} grows {slopes[k]:+.3f}/min (limit {limit})")
    failures += traffic.unexpected[:20]
    with open(out / "soak.json", "w") as f:
        json.dump({"args": vars(args), "samples": samples, "probes": probes, "slopes": slopes,
                   "counts": traffic.counts, "failures": failures}, f, indent=1)
    plot(samples, slopes, out / "soak.png")
    print(f"wrote {out / 'soak.json'} and {out / 'soak.png'}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
