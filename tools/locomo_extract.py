#!/usr/bin/env python3
"""Runs the engine's own fact extraction over LoCoMo's raw dialogue turns and writes the facts it
stored, each with the turns it came from, for tools/locomo_recall.py --extracted.

Each conversation is one memory user; its sessions are added in order, two turns at a time
(`POST /v1/memories` with `infer: true`, as Mem0's LoCoMo runs add message pairs), each turn as a
user message "Speaker: text". A fact's turns are those of the add that last wrote it (ADD or
UPDATE); a DELETE drops it. Conversations run in parallel, adds within one in order. Prints the
share of evidence turns (questions of categories 1-4 whose evidence lies in the sessions run)
that some extracted fact comes from, beside the share LoCoMo's annotated observations cover.

    python3 tools/locomo_extract.py --model models/qwen2.5-coder-1.5b.gguf \\
        [--device cpu|cuda] [--conversations 26,30] [--sessions 3] [--out extracted.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

DIA_ID = re.compile(r"D:?(\d+):(\d+)")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(url, body, timeout=3600):
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def start_server(args, db_dir):
    command = [args.bin, "serve", "--model", args.model, "--device", args.device, "--port",
               str(args.port), "--db", os.path.join(db_dir, "memory.db"), "--chunk-dir", "none",
               "--embedding-model", args.embedding_model, "--no-background-encode"]
    log = open(os.path.join(db_dir, "server.log"), "w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{args.port}"
    for _ in range(1200):
        if proc.poll() is not None:
            raise SystemExit(f"the server exited: {open(log.name).read()[-2000:]}")
        try:
            urllib.request.urlopen(url + "/health", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the server did not come up")


def sessions_of(root, count):
    numbers = sorted(int(k.split("_")[1]) for k in root if re.fullmatch(r"session_\d+", k))
    return [(n, root[f"session_{n}"]) for n in numbers[:count]]


def run_conversation(url, name, root, count, out, times):
    user = f"locomo-{name}"
    facts = {}
    for number, turns in sessions_of(root, count):
        for i in range(0, len(turns), 2):
            window = turns[i:i + 2]
            messages = [{"role": "user", "content": f"{t['speaker']}: {t['text']}"}
                        for t in window]
            started = time.time()
            reply = post(url + "/v1/memories", {"user_id": user, "messages": messages,
                                                "session_id": f"session_{number}"})
            times.append(time.time() - started)
            ids = [f"D{s}:{t}" for s, t in DIA_ID.findall(" ".join(t["dia_id"] for t in window))]
            for item in reply["results"]:
                if item["event"] == "DELETE":
                    facts.pop(item["id"], None)
                elif item["event"] in ("ADD", "UPDATE"):
                    facts[item["id"]] = {"id": item["id"], "text": item["memory"], "turns": ids}
    out[name] = list(facts.values())


def coverage(root, count, fact_turns):
    """Evidence turns of the questions answerable from the sessions run, and those covered."""
    ran = {n for n, _ in sessions_of(root, count)}
    turns = set()
    for q in root["qa"]:
        if q.get("category") not in (1, 2, 3, 4):
            continue
        evidence = {f"D{s}:{t}" for s, t in DIA_ID.findall(json.dumps(q.get("evidence", [])))}
        if evidence and all(int(e[1:].split(":")[0]) in ran for e in evidence):
            turns |= evidence
    return len(turns), len(turns & fact_turns)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "inferscale"))
    parser.add_argument("--embedding-model",
                        default=os.path.join(ROOT, "models", "all-minilm-l6-v2"))
    parser.add_argument("--locomo", default=os.path.join(ROOT, "..", "shared", "data", "locomo10"))
    parser.add_argument("--conversations", default="26,30")
    parser.add_argument("--sessions", type=int, default=1000, help="the first N of each")
    parser.add_argument("--port", type=int, default=8391)
    parser.add_argument("--out", default="locomo_extracted.json")
    args = parser.parse_args()
    roots = {}
    for name in args.conversations.split(","):
        with open(os.path.join(args.locomo, f"{name}.json"), encoding="utf-8") as f:
            roots[name] = json.load(f)
    with tempfile.TemporaryDirectory() as db_dir:
        proc, url = start_server(args, db_dir)
        try:
            out, times = {}, []
            started = time.time()
            threads = [threading.Thread(target=run_conversation,
                                        args=(url, name, root, args.sessions, out, times))
                       for name, root in roots.items()]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.time() - started
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"model": os.path.basename(args.model), "device": args.device,
                   "sessions": args.sessions, "conversations": out}, f, indent=1)
    print(f"{os.path.basename(args.model)} on {args.device}: {len(times)} adds in {wall:.0f} s, "
          f"{statistics.median(times):.1f} s per add (p50), {max(times):.1f} s max")
    for name, root in roots.items():
        extracted = set().union(*(set(f["turns"]) for f in out[name])) if out[name] else set()
        observed = set()
        for key, by_speaker in root.items():
            if re.fullmatch(r"session_\d+_observation", key):
                for entries in by_speaker.values():
                    for entry in entries:
                        ids = DIA_ID.findall(json.dumps(entry[1:]))
                        observed |= {f"D{s}:{t}" for s, t in ids[:1]}
        n, by_facts = coverage(root, args.sessions, extracted)
        _, by_observations = coverage(root, args.sessions, observed)
        print(f"  conversation {name}: {len(out[name])} facts; of {n} evidence turns, "
              f"{by_facts / max(n, 1):.3f} yield an extracted fact (two-turn adds), "
              f"{by_observations / max(n, 1):.3f} an annotated observation")


if __name__ == "__main__":
    main()
