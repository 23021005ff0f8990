#!/usr/bin/env python3
"""Mem0 as a peer of the built-in memory pipeline (issue 37), on one LoCoMo conversation.

Starts `inferscale serve` (a temporary database), then feeds the same turn groups to both:
  built-in  POST /v1/memories {user_id, messages, session_id} (infer: true, the default), then
            POST /v1/memories/search for each question
  mem0      the `mem0ai` package's Memory with this server as its LLM (provider openai,
            base_url) and embedder (provider openai, the server's embedding model, 384 dims),
            qdrant in-process (path=) as its vector store, its history db in a temp dir; add(),
            then search()
and prints for each: the facts stored, seconds per add (p50, max) and the top 5 search results per
question, with the question's evidence turns beside them (Mem0's facts carry no source turn).

Turns are grouped as Mem0's own LoCoMo evaluation groups them: the first speaker's turns are the
user's, the second speaker's the assistant's, each message "Name: text", a few turns per add.
Questions are LoCoMo's (categories 1-4) whose evidence turns are all among the turns added.

    pip install mem0ai   # not a test requirement: this is a tool
    python3 tools/mem0_peer.py [--model models/qwen2.5-coder-0.5b.gguf] [--sessions 1] \
        [--max-turns 8] [--turns-per-add 2]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

import httpx

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "python"))
os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is imported: no calls home from the peer
CATEGORIES = {1, 2, 3, 4}
DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def load_turns(path, sessions, max_turns):
    """The chosen sessions' turns in order, cut at max_turns, and the conversation's speakers."""
    with open(path, encoding="utf-8") as f:
        root = json.load(f)
    turns = []
    for s in sessions:
        for turn in root[f"session_{s}"]:
            turns.append({"session": s, "dia_id": turn["dia_id"], "speaker": turn["speaker"],
                          "text": turn["text"]})
    return root, turns[:max_turns]


def messages_of(group, user_speaker):
    return [{"role": "user" if t["speaker"] == user_speaker else "assistant",
             "content": f"{t['speaker']}: {t['text']}"} for t in group]


def questions_for(root, turns, limit):
    added = {t["dia_id"] for t in turns}
    chosen = []
    for q in root["qa"]:
        evidence = [f"D{s}:{t}" for s, t in DIA_ID.findall(json.dumps(q.get("evidence", [])))]
        if q.get("category") in CATEGORIES and evidence and set(evidence) <= added:
            chosen.append({"question": q["question"], "answer": str(q.get("answer")),
                           "evidence": evidence})
    return chosen[:limit]


def run_builtin(url, user, groups, questions):
    """The server's own pipeline: one POST /v1/memories per group, then search."""
    c = httpx.Client(base_url=url, timeout=3600)
    adds = []
    for session, messages in groups:
        t0 = time.perf_counter()
        res = c.post("/v1/memories", json={"user_id": user, "messages": messages,
                                          "session_id": f"session_{session}"})
        seconds = time.perf_counter() - t0
        res.raise_for_status()
        print(f"built-in add {len(adds) + 1}: {seconds:.1f} s", flush=True)
        adds.append((seconds, [(r["event"], r["memory"]) for r in res.json()["results"]]))
    listed = c.get("/v1/memories", params={"user_id": user, "page_size": 1000})
    listed.raise_for_status()
    facts = [m["memory"] for m in listed.json()["results"]]
    found = []
    for q in questions:
        res = c.post("/v1/memories/search", json={"user_id": user, "query": q["question"],
                                                 "top_k": 5})
        res.raise_for_status()
        found.append([m["memory"] for m in res.json()["results"]])
    return adds, facts, found


def mem0_memory(url, model_id, embed_id, workdir, llm_timeout):
    from mem0 import Memory
    memory = Memory.from_config({
        "llm": {"provider": "openai", "config": {
            "model": model_id, "openai_base_url": url + "/v1", "api_key": "none"}},
        "embedder": {"provider": "openai", "config": {
            "model": embed_id, "openai_base_url": url + "/v1", "api_key": "none",
            "embedding_dims": 384}},
        "vector_store": {"provider": "qdrant", "config": {
            "path": os.path.join(workdir, "qdrant"), "collection_name": "locomo",
            "embedding_model_dims": 384, "on_disk": True}},
        "history_db_path": os.path.join(workdir, "history.db"),
    })
    # Mem0 builds its OpenAI client with the defaults: a 600 s timeout and two retries. One add
    # prefills Mem0's ~8k-token prompt, which on a small CPU takes longer than that, and a retry
    # would silently start it again.
    memory.llm.client = memory.llm.client.with_options(timeout=llm_timeout, max_retries=0)
    return memory


def run_mem0(memory, user, groups, questions):
    """Mem0's add per group, then search; an add that fails ends the adds (reported, not
    raised), so what was stored before it is still listed and searched."""
    adds = []
    for i, (_, messages) in enumerate(groups):
        t0 = time.perf_counter()
        try:
            res = memory.add(messages, user_id=user)
        except Exception as e:  # the peer's failure is a result to print
            print(f"mem0 add {i + 1} failed after {time.perf_counter() - t0:.1f} s: {e}")
            break
        seconds = time.perf_counter() - t0
        print(f"mem0 add {i + 1}: {seconds:.1f} s", flush=True)
        adds.append((seconds, [(r["event"], r["memory"]) for r in res["results"]]))
    facts = [m["memory"] for m in memory.get_all(filters={"user_id": user}, top_k=1000)["results"]]
    found = [[m["memory"] for m in memory.search(q["question"], filters={"user_id": user},
                                                  top_k=5)["results"]] for q in questions]
    return adds, facts, found


def print_pipeline(name, groups, adds, facts):
    print(f"\n=== {name}")
    for i, ((_, messages), (seconds, events)) in enumerate(zip(groups, adds)):
        print(f"add {i + 1} ({len(messages)} turns): {seconds:.1f} s, {len(events)} changes")
        for event, memory in events:
            print(f"    {event}: {memory}")
    times = [s for s, _ in adds]
    if not times:
        print("no add finished")
        return
    print(f"seconds per add: p50 {statistics.median(times):.1f}, max {max(times):.1f}, "
          f"total {sum(times):.1f} over {len(times)} adds")
    print(f"facts stored: {len(facts)}")
    for fact in facts:
        print(f"  - {fact}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", default=str(ROOT / "build" / "bin"))
    parser.add_argument("--model", default=str(ROOT / "models" / "qwen2.5-coder-0.5b.gguf"))
    parser.add_argument("--embedding-model", default=str(ROOT / "models" / "all-minilm-l6-v2"))
    parser.add_argument("--max-context", type=int, default=16384,
                        help="Mem0's extraction prompt alone is about 8k tokens")
    parser.add_argument("--conversation", default="/work/shared/data/locomo10/26.json")
    parser.add_argument("--sessions", type=int, nargs="+", default=[1])
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--turns-per-add", type=int, default=2)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--llm-timeout", type=float, default=3600,
                        help="seconds Mem0's OpenAI client waits for one chat completion")
    args = parser.parse_args()

    os.environ["INFERSCALE_BIN"] = args.bin
    from server_process import Server

    root, turns = load_turns(args.conversation, args.sessions, args.max_turns)
    user_speaker = root["speaker_a"]
    user = user_speaker.lower()
    groups = []
    for i in range(0, len(turns), args.turns_per_add):
        group = [t for t in turns[i:i + args.turns_per_add] if t["session"] == turns[i]["session"]]
        groups.append((turns[i]["session"], messages_of(group, user_speaker)))
    questions = questions_for(root, turns, args.questions)
    text_of = {t["dia_id"]: f"{t['speaker']}: {t['text']}" for t in turns}

    with tempfile.TemporaryDirectory() as tmp:
        server = Server(pathlib.Path(tmp), "--embedding-model", args.embedding_model,
                        "--max-context", str(args.max_context), model=args.model)
        try:
            ids = [m["id"] for m in httpx.get(server.url + "/v1/models").json()["data"]]
            model_id, embed_id = ids[0], ids[1]
            print(f"conversation {os.path.basename(args.conversation)}, sessions {args.sessions}, "
                  f"{len(turns)} turns ({turns[0]['dia_id']}..{turns[-1]['dia_id']}) in "
                  f"{len(groups)} adds, user {user} ({user_speaker}'s turns are the user's)")
            print(f"server: {args.model} as {model_id}, embeddings {embed_id}, "
                  f"--max-context {args.max_context}")
            import mem0
            print(f"mem0ai {mem0.__version__}: qdrant in-process, history db in a temp dir")
            builtin = run_builtin(server.url, user, groups, questions)
            print_pipeline("built-in (POST /v1/memories, infer: true)", groups, *builtin[:2])
            workdir = os.path.join(tmp, "mem0")
            os.makedirs(workdir)
            memory = mem0_memory(server.url, model_id, embed_id, workdir, args.llm_timeout)
            peer = run_mem0(memory, user, groups, questions)
            print_pipeline("mem0 (Memory.add)", groups, *peer[:2])
        finally:
            server.stop()

    print("\n=== search, top 5 per question")
    for q, ours, theirs in zip(questions, builtin[2], peer[2]):
        print(f"\nQ: {q['question']}  (answer: {q['answer']})")
        for dia in q["evidence"]:
            print(f"  evidence {dia}: {text_of[dia]}")
        for name, found in (("built-in", ours), ("mem0", theirs)):
            print(f"  {name}:")
            for rank, memory in enumerate(found, 1):
                print(f"    {rank}. {memory}")
            if not found:
                print("    (nothing)")


if __name__ == "__main__":
    main()
