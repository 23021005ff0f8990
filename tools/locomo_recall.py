#!/usr/bin/env python3
"""Prints the retrieval recall table of LoCoMo (issue 37): for each method, the share of
questions (categories 1-4) for which at least one of the top k retrieved facts comes from one of
the question's evidence turns, at k = 5, 10, 20, 50.

The facts are LoCoMo's observations (session_N_observation: a sentence and the dialogue turns it
came from), one memory user per conversation, as `inferscale memory import-locomo` stores them:
sessions in order (their dates are in session order in all ten), speakers in name order (the
importer walks a JSON object, whose keys nlohmann::json sorts), ids in that order (BM25 breaks
score ties by id), and a fact's source is the first turn it names. --all-source-turns counts a
fact for every turn it names instead (a few name two or more). The ceiling is what any retriever
could reach: the share of questions with at least one evidence turn that some fact comes from
(and, next to it, the share of evidence turns that have a fact).

With --extracted FILE (tools/locomo_extract.py writes it: the facts the engine's own extraction
pipeline stored for each conversation, each with the turns of the add it came from), two more
tables over the conversations and sessions that extraction ran, questions cut to those whose
evidence lies there: the observations of those sessions, then the extracted facts.

Every row ranks with bench/fact_rank, which runs the server's retrieval::FactRetriever:
  bm25          Bm25Index without stemming (Bm25Params{.stem = false})
  bm25 stemmed  Bm25Index with Porter stemming, the memory store's default
  dense         all-MiniLM-L6-v2 embeddings (the project's SentenceEncoder), dot product
  hybrid        reciprocal-rank fusion of bm25 stemmed and dense (the server's default)

    cmake --build build --target fact_rank
    python3 tools/locomo_recall.py [--locomo ../shared/data/locomo10] \
        [--fact-rank build/bin/fact_rank] [--embedding-model models/all-minilm-l6-v2] \
        [--all-source-turns] [--extracted extracted.json]
"""
import argparse
import glob
import json
import os
import re
import subprocess

KS = (5, 10, 20, 50)
CATEGORIES = {1, 2, 3, 4}
# "D3:12"; the data also has "D:11:26" for D11:26.
DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def dia_ids(value):
    text = json.dumps(value) if not isinstance(value, str) else value
    return [f"D{s}:{t}" for s, t in DIA_ID.findall(text)]


def load_conversation(path, first_id, all_source_turns):
    with open(path, encoding="utf-8") as f:
        root = json.load(f)
    name = os.path.splitext(os.path.basename(path))[0]
    facts = []  # {"id", "text", "turns"}
    sessions = sorted((int(k.split("_")[1]), v) for k, v in root.items()
                      if re.fullmatch(r"session_\d+_observation", k))
    for _, by_speaker in sessions:
        for _, entries in sorted(by_speaker.items()):
            for entry in entries:
                turns = dia_ids(entry[1]) if len(entry) > 1 else []
                # Ids are unique over all conversations, as the store's are over all users.
                facts.append({"id": first_id + len(facts), "text": entry[0],
                              "turns": set(turns if all_source_turns else turns[:1])})
    questions = [{"question": q["question"], "evidence": set(dia_ids(q.get("evidence", []))),
                  "answer": str(q["answer"]), "category": q["category"]}
                 for q in root["qa"] if q.get("category") in CATEGORIES]
    return {"name": name, "facts": facts, "questions": questions}


def rank_method(binary, method, stem=True, embedding_model=None, device="cpu"):
    def rank(conversations, k):
        request = {"method": method, "stem": stem, "k": k, "facts": [], "queries": []}
        for c in conversations:
            request["facts"] += [{"user": c["name"], "id": f["id"], "text": f["text"]}
                                 for f in c["facts"]]
            request["queries"] += [{"user": c["name"], "query": q["question"]}
                                   for q in c["questions"]]
        command = [binary]
        if method != "bm25":
            command += ["--embedding-model", embedding_model, "--device", device]
        out = subprocess.run(command, input=json.dumps(request), capture_output=True, text=True,
                             check=True).stdout
        return [json.loads(line) for line in out.splitlines()]
    return rank


def with_extracted(conversations, path):
    """The conversations the extraction ran, with their questions cut to those whose evidence
    lies in the sessions it ran: once with the observations of those sessions, once with the
    extracted facts of `path` in their place."""
    with open(path, encoding="utf-8") as f:
        extracted = json.load(f)
    last = extracted["sessions"]
    in_run = lambda turn: int(turn[1:].split(":")[0]) <= last  # "D3:12" -> session 3
    observed, found, next_id = [], [], 1
    for c in conversations:
        if c["name"] not in extracted["conversations"]:
            continue
        questions = [q for q in c["questions"] if q["evidence"] and all(map(in_run, q["evidence"]))]
        observed.append({**c, "questions": questions,
                         "facts": [f for f in c["facts"] if f["turns"] and all(map(in_run, f["turns"]))]})
        facts = []
        for fact in extracted["conversations"][c["name"]]:
            facts.append({"id": next_id, "text": fact["text"], "turns": set(fact["turns"])})
            next_id += 1
        found.append({**c, "questions": questions, "facts": facts})
    return observed, found, f"{extracted['model']} on {extracted['device']}, sessions 1-{last}"


def recall_row(conversations, rankings):
    hits = {k: 0 for k in KS}
    n = 0
    i = 0
    for c in conversations:
        turns_of = {f["id"]: f["turns"] for f in c["facts"]}
        for q in c["questions"]:
            ranked = rankings[i]
            i += 1
            n += 1
            for k in KS:
                if any(turns_of[fid] & q["evidence"] for fid in ranked[:k]):
                    hits[k] += 1
    return [hits[k] / n for k in KS], n


def ceiling(conversations):
    questions = answerable = turns = covered = 0
    for c in conversations:
        fact_turns = set().union(*(f["turns"] for f in c["facts"]))
        for q in c["questions"]:
            questions += 1
            answerable += bool(q["evidence"] & fact_turns)
            turns += len(q["evidence"])
            covered += len(q["evidence"] & fact_turns)
    return answerable / questions, covered / turns


def print_table(title, conversations, methods):
    questions = sum(len(c["questions"]) for c in conversations)
    facts = sum(len(c["facts"]) for c in conversations)
    print(f"{title}: {len(conversations)} conversations, {questions} questions, {facts} facts")
    print(f"  {'method':<14}" + "".join(f"{'R@' + str(k):>8}" for k in KS))
    for name, rank in methods.items():
        row, _ = recall_row(conversations, rank(conversations, max(KS)))
        print(f"  {name:<14}" + "".join(f"{r:8.3f}" for r in row))
    by_question, by_turn = ceiling(conversations)
    print(f"  {'ceiling':<14}{by_question:8.3f}   (questions with a fact from an evidence turn; "
          f"evidence turns with a fact: {by_turn:.3f})")


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", default=os.path.join(repo, "..", "shared", "data", "locomo10"))
    parser.add_argument("--fact-rank", default=os.path.join(repo, "build", "bin", "fact_rank"))
    parser.add_argument("--embedding-model",
                        default=os.path.join(repo, "models", "all-minilm-l6-v2"))
    parser.add_argument("--device", default="cpu", help="where fact_rank runs the encoder")
    parser.add_argument("--subset", default="26,30",
                        help="conversations of a second table (the issue's first measurement)")
    parser.add_argument("--all-source-turns", action="store_true",
                        help="a fact comes from every turn its source names, not the first only")
    parser.add_argument("--extracted", help="facts of tools/locomo_extract.py, for a third table")
    args = parser.parse_args()
    paths = sorted(glob.glob(os.path.join(args.locomo, "*.json")))
    if not paths:
        raise SystemExit(f"no LoCoMo conversations under {args.locomo}")
    conversations = []
    for path in paths:
        first_id = 1 + sum(len(c["facts"]) for c in conversations)
        conversations.append(load_conversation(path, first_id, args.all_source_turns))
    methods = {"bm25": rank_method(args.fact_rank, "bm25", stem=False),
               "bm25 stemmed": rank_method(args.fact_rank, "bm25")}
    if os.path.isdir(args.embedding_model):
        for name in ("dense", "hybrid"):
            methods[name] = rank_method(args.fact_rank, name, embedding_model=args.embedding_model,
                                        device=args.device)
    else:
        print(f"(no {args.embedding_model}: dense and hybrid rows left out)")
    print_table("LoCoMo, all conversations", conversations, methods)
    subset = [c for c in conversations if c["name"] in args.subset.split(",")]
    if subset:
        print()
        print_table("LoCoMo " + " + ".join(c["name"] for c in subset), subset, methods)
    if args.extracted:
        observed, found, run = with_extracted(conversations, args.extracted)
        names = " + ".join(c["name"] for c in found)
        print()
        print_table(f"LoCoMo {names} ({run}), annotated observations", observed, methods)
        print()
        print_table(f"LoCoMo {names} ({run}), facts extracted by the engine", found, methods)


if __name__ == "__main__":
    main()
