#!/usr/bin/env python3
"""LoCoMo accuracy of memory injection, against a running `inferscale serve`.

Imports each conversation's facts (the dataset's observations, in the order `inferscale memory
import-locomo` stores them: sessions in order, speakers in name order) as memory user
"<conversation>" with POST /v1/memories, unless that user already has facts; then asks every
category 1-4 question through the official `openai` client, streaming, temperature 0:
  none              once per question
  prompt  at each k, w = 0 (the reference's prompt-injection baseline)
  kv      at each k and each w (`memory.context_window`)
with `memory.retrieval` set by --retrieval. The chunk encoding is a server flag (`serve
--encoding`), which no endpoint reports: name it with --encoding-label. Facts added over HTTP
have no source turn, so w > 0 encodes them as w = 0; for w > 0 import the conversations into the
server's database first (`inferscale memory import-locomo FILE... --db DB`, before `serve`).

Scores (bench/locomo_scoring.py): LoCoMo's token F1 and BLEU-1 of each answer and, with --judge
URL, the reference's judged accuracy from a judge model that another `inferscale serve` serves
(run after all answers, as the reference's judge pass). TTFT is the time to the first streamed
content token of the same requests. Writes one JSON (config, every answer with its scores,
per-configuration averages per category and micro-averaged, and kv - prompt F1 per k and w with
a 95% paired bootstrap interval over questions); --resume skips what the JSON already holds.

    build/bin/inferscale serve --port 8000 --encoding after-header &
    python3 bench/locomo_eval.py --base-url http://127.0.0.1:8000 --encoding-label after-header \\
        [--conversations 26,30] [--limit 100] [--modes none,prompt,kv] [--ks 5,10,20,50] \\
        [--windows 0,50] [--max-tokens 512] [--judge http://127.0.0.1:8001] \\
        [--out locomo_eval.json] [--resume]
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

import httpx
from openai import OpenAI

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from locomo_recall import load_conversation  # noqa: E402
from locomo_scoring import (bleu1, final_answer, judge_prompt, locomo_f1,  # noqa: E402
                            paired_bootstrap, parse_verdict)

MODES = ("none", "prompt", "kv")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# Fields of the config a resumed run must share with the JSON it extends.
SAME_ON_RESUME = ("model", "encoding", "retrieval", "max_tokens", "conversations", "limit")


def ints(text):
    return [int(x) for x in text.split(",") if x]


def load_questions(locomo, names, limit, seed=0):
    """The conversations as tools/locomo_recall.py loads them, each question with its `index`
    among the conversation's category 1-4 questions; with `limit`, that many questions drawn
    with a fixed seed from all of them, each conversation's kept in dataset order."""
    conversations = []
    for name in names:
        c = load_conversation(os.path.join(locomo, f"{name}.json"), 1, False)
        for i, q in enumerate(c["questions"]):
            q["index"] = i
        conversations.append(c)
    if limit:
        pool = [(c["name"], q["index"]) for c in conversations for q in c["questions"]]
        kept = set(random.Random(seed).sample(pool, min(limit, len(pool))))
        for c in conversations:
            c["questions"] = [q for q in c["questions"] if (c["name"], q["index"]) in kept]
    return conversations


def import_facts(http, user, facts):
    """Adds `facts` as `user`'s memory unless the user has some: 'http' or 'existing'."""
    listed = http.get("/v1/memories", params={"user_id": user, "limit": 1})
    listed.raise_for_status()
    if listed.json()["results"]:
        return "existing"
    added = http.post("/v1/memories", json={"user_id": user, "facts": [f["text"] for f in facts]})
    added.raise_for_status()
    return "http"


def configurations(modes, ks, windows):
    """(mode, k, w) to ask each question under."""
    out = []
    if "none" in modes:
        out.append(("none", 0, 0))
    out += [("prompt", k, 0) for k in ks if "prompt" in modes]
    out += [("kv", k, w) for k in ks for w in windows if "kv" in modes]
    return out


def ask(client, model, user, question, mode, k, w, retrieval, max_tokens):
    """One streamed answer: (text, TTFT ms or None when it is empty, token counts)."""
    memory = {"mode": mode}
    if mode != "none":
        memory.update(top_k=k, context_window=w, retrieval=retrieval)
    started = time.perf_counter()
    ttft = None
    parts, usage = [], None
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], temperature=0,
        max_tokens=max_tokens, stream=True, stream_options={"include_usage": True}, user=user,
        extra_body={"memory": memory})
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                ttft = ttft if ttft is not None else (time.perf_counter() - started) * 1000
                parts.append(choice.delta.content)
    return "".join(parts), ttft, {
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.prompt_tokens_details.cached_tokens,
        "completion_tokens": usage.completion_tokens}


def judge_all(answers, judge_url, save):
    client = OpenAI(base_url=judge_url.rstrip("/") + "/v1", api_key="none", timeout=3600)
    model = client.models.list().data[0].id
    todo = [a for a in answers if "judge_reply" not in a]
    for n, a in enumerate(todo, 1):
        reply = client.chat.completions.create(
            model=model, temperature=0, top_p=1, max_tokens=4, messages=[{
                "role": "user", "content": judge_prompt(a["question"], a["reference"],
                                                        a["prediction"])}])
        a["judge_reply"] = reply.choices[0].message.content or ""
        a["judged"] = parse_verdict(a["judge_reply"])
        if n % 20 == 0 or n == len(todo):
            print(f"judged {n}/{len(todo)}", file=sys.stderr)
            save()
    return model


def averages(rows):
    judged = [r["judged"] for r in rows if r.get("judged") is not None]
    ttft = [r["ttft_ms"] for r in rows if r["ttft_ms"] is not None]
    return {"n": len(rows),
            "f1": statistics.fmean(r["f1"] for r in rows),
            "bleu1": statistics.fmean(r["bleu1"] for r in rows),
            "judged_accuracy": statistics.fmean(judged) if judged else None,
            "judged_n": len(judged),
            "ttft_ms_p50": statistics.median(ttft) if ttft else None,
            "ttft_ms_mean": statistics.fmean(ttft) if ttft else None}


def config_key(mode, k, w):
    return "none" if mode == "none" else f"{mode} k={k} w={w}"


def summarize(answers):
    """Per configuration: micro averages and per category; kv - prompt F1 per k and w."""
    by_config = {}
    for a in answers:
        by_config.setdefault((a["mode"], a["k"], a["w"]), []).append(a)
    order = sorted(by_config, key=lambda c: (MODES.index(c[0]), c[1], c[2]))
    summary = {}
    for mode, k, w in order:
        rows = by_config[(mode, k, w)]
        entry = averages(rows)
        entry["by_category"] = {
            str(c): averages([r for r in rows if r["category"] == c])
            for c in sorted({r["category"] for r in rows})}
        summary[config_key(mode, k, w)] = entry
    differences = {}
    for mode, k, w in order:
        if mode != "kv":
            continue
        rows = by_config[(mode, k, w)]
        prompt = {(r["conversation"], r["index"]): r["f1"] for r in by_config.get(("prompt", k, 0), [])}
        paired = [(r["f1"], prompt[(r["conversation"], r["index"])]) for r in rows
                  if (r["conversation"], r["index"]) in prompt]
        if paired:
            diff, low, high = paired_bootstrap(*zip(*paired))
            differences[f"k={k} w={w}"] = {"n": len(paired), "f1_diff": diff, "ci95": [low, high]}
    return summary, differences


def print_summary(result):
    print(f"\nLoCoMo, {result['config']['model']}, encoding {result['config']['encoding']}, "
          f"retrieval {result['config']['retrieval']}, max_tokens {result['config']['max_tokens']}")
    cats = "".join(f"{'F1 c' + str(c):>8}" for c in CATEGORY_NAMES)
    print(f"{'configuration':<18}{'n':>5}{'F1':>8}{'BLEU-1':>8}{'judged':>8}{cats}{'TTFT p50 ms':>13}")
    for name, s in result["summary"].items():
        judged = f"{s['judged_accuracy']:8.3f}" if s["judged_accuracy"] is not None else f"{'-':>8}"
        by_cat = "".join(f"{s['by_category'][str(c)]['f1']:8.3f}" if str(c) in s["by_category"]
                         else f"{'-':>8}" for c in CATEGORY_NAMES)
        ttft = f"{s['ttft_ms_p50']:13.1f}" if s["ttft_ms_p50"] is not None else f"{'-':>13}"
        print(f"{name:<18}{s['n']:5d}{s['f1']:8.3f}{s['bleu1']:8.3f}{judged}{by_cat}{ttft}")
    for name, d in result["kv_minus_prompt_f1"].items():
        print(f"kv - prompt F1 at {name}: {d['f1_diff']:+.3f}, 95% CI "
              f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}] over {d['n']} questions")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000",
                        help="the inferscale serve under test")
    parser.add_argument("--api-key", default="none")
    parser.add_argument("--model", help="default: the first model the server lists")
    parser.add_argument("--encoding-label", default="after-header",
                        choices=("after-header", "standalone"),
                        help="the --encoding the server runs with (recorded, not sent)")
    parser.add_argument("--locomo", default=os.path.join(ROOT, "..", "shared", "data", "locomo10"))
    parser.add_argument("--conversations", default="26,30,41,42,43,44,47,48,49,50")
    parser.add_argument("--limit", type=int, default=0,
                        help="N questions drawn (seed 0) from the conversations' categories 1-4")
    parser.add_argument("--modes", default="none,prompt,kv")
    parser.add_argument("--ks", default="5,10,20,50")
    parser.add_argument("--windows", default="0,50")
    parser.add_argument("--retrieval", default="bm25", choices=("bm25", "dense", "hybrid"))
    parser.add_argument("--max-tokens", type=int, default=512, help="the reference's 512")
    parser.add_argument("--judge", help="base URL of the judge model's inferscale serve")
    parser.add_argument("--out", default="locomo_eval.json")
    parser.add_argument("--resume", action="store_true", help="extend --out, skipping what it holds")
    args = parser.parse_args()
    if set(args.modes.split(",")) - set(MODES):
        parser.error(f"--modes: each of {', '.join(MODES)}")

    base = args.base_url.rstrip("/")
    client = OpenAI(base_url=base + "/v1", api_key=args.api_key, timeout=3600)
    http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {args.api_key}"},
                        timeout=3600)
    config = {"server": base, "model": args.model or client.models.list().data[0].id,
              "encoding": args.encoding_label, "retrieval": args.retrieval,
              "max_tokens": args.max_tokens, "temperature": 0,
              "conversations": args.conversations.split(","), "limit": args.limit,
              "modes": args.modes.split(","), "ks": ints(args.ks), "windows": ints(args.windows),
              "judge": args.judge}
    answers = []
    if os.path.exists(args.out):
        if not args.resume:
            raise SystemExit(f"{args.out} exists: pass --resume to extend it, or remove it")
        with open(args.out, encoding="utf-8") as f:
            previous = json.load(f)
        for field in SAME_ON_RESUME:
            if previous["config"][field] != config[field]:
                raise SystemExit(f"--resume: {field} is {config[field]!r}, {args.out} has "
                                 f"{previous['config'][field]!r}")
        answers = previous["answers"]
    done = {(a["conversation"], a["index"], a["mode"], a["k"], a["w"]) for a in answers}
    result = {"config": config, "answers": answers}

    def save():
        result["summary"], result["kv_minus_prompt_f1"] = summarize(answers) if answers else ({}, {})
        with open(args.out + ".tmp", "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
        os.replace(args.out + ".tmp", args.out)

    conversations = load_questions(args.locomo, config["conversations"], args.limit)
    grid = configurations(config["modes"], config["ks"], config["windows"])
    config["imports"] = {}
    todo = sum(1 for c in conversations for q in c["questions"] for m, k, w in grid
               if (c["name"], q["index"], m, k, w) not in done)
    print(f"{todo} answers to ask ({len(done)} already in {args.out})", file=sys.stderr)
    asked = 0
    started = time.time()
    for c in conversations:
        config["imports"][c["name"]] = import_facts(http, c["name"], c["facts"])
        for q in c["questions"]:
            missing = [(m, k, w) for m, k, w in grid if (c["name"], q["index"], m, k, w) not in done]
            for mode, k, w in missing:
                text, ttft, usage = ask(client, config["model"], c["name"], q["question"], mode,
                                        k, w, args.retrieval, args.max_tokens)
                prediction = final_answer(text)
                answers.append({
                    "conversation": c["name"], "index": q["index"], "category": q["category"],
                    "question": q["question"], "reference": q["answer"], "mode": mode, "k": k,
                    "w": w, "prediction": prediction, "ttft_ms": ttft, **usage,
                    "f1": locomo_f1(prediction, q["answer"], q["category"]),
                    "bleu1": bleu1(prediction, q["answer"])})
                asked += 1
            if missing:
                rate = (time.time() - started) / asked
                print(f"[{asked}/{todo}] conversation {c['name']} question {q['index']}, "
                      f"{rate:.1f} s an answer, ~{rate * (todo - asked) / 60:.0f} min left",
                      file=sys.stderr)
                save()
    if args.judge:
        config["judge_model"] = judge_all(answers, args.judge, save)
    save()
    print_summary(result)


if __name__ == "__main__":
    main()
