#!/usr/bin/env python3
"""The reference's serving workload over HTTP against the real `inferscale serve`.

U users (10, 25, 50, 75, 100), each holding the first LoCoMo conversation's observations as
their own memory (separate user ids, so separate facts and chunks), each asking 2 questions
drawn from that conversation's QA list (seed 42, as the reference). All users start at once and
each asks its questions one after another (the next when the previous answer is complete), as
streaming chat completions with top-k 50 memory and exactly 50 output tokens.
Retrieval, prompt building and injection are inside the timed region (the reference left them
out). Per mode (kv, prompt): QPS = requests / wall time, TTFT p50/p99 as the clients see it.
With --repeats R each measured batch runs R times: QPS is the median of the R runs (one run of
200 requests varies by ~10%), TTFT percentiles pool every request of the R runs.
With `--log-requests` among the server flags it also prints, per measured batch, the server's
median milestones (memory ready, admitted, first token) of the first and second questions.
Next to the kv TTFT p50 it prints a burst bound measured in the same run: U questions sent at
once, each prefilling P tokens (prompt tokens minus the injected ones, from usage), cannot give
the median one its first token before half of them are prefilled, so its TTFT is at least the
lone user's plus (ceil(U / 2) - 1) * P / R. R is the server's marginal prefill rate, from the
lone user's questions asked in `kv` and then in `prompt` mode: the extra tokens prompt mode
prefills over the extra TTFT it takes (the per-request costs both share drop out); a wave's
steps, whose question chunks attend over more KV per token, are no faster per token, so the
bound holds. Both waves of this workload are such bursts (the first answers finish within a
few steps of each other).
Before each measured batch the same requests run once with max_tokens 1, so kv chunks are
encoded (as the reference precomputes them); the server runs without the prefix cache, so the
measured batch recomputes everything a cold request would.

  python3 bench/serve_bench.py                        # CPU, bundled model
  python3 bench/serve_bench.py --server-args "--device cuda --random-weights configs/llama-3.1-8b.json ..."
"""
import argparse
import asyncio
import json
import os
import random
import re
import shlex
import signal
import socket
import statistics
import subprocess
import shutil
import sys
import tempfile
import time

import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q / 100 * (len(v) - 1))))]


def load_questions(conversation, users, seed=42):
    qa = json.load(open(conversation))["qa"]
    return {u: [q["question"] for q in random.Random(f"{seed}:requests:{u}").sample(qa, 2)]
            for u in range(users)}


async def post_stream(host, port, path, body):
    """POSTs JSON over HTTP/1.1 and yields the lines of the chunked SSE answer (stdlib only:
    the GPU machine has no httpx)."""
    reader, writer = await asyncio.open_connection(host, port)
    data = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    chunked = False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"transfer-encoding:") and b"chunked" in line.lower():
            chunked = True
    buffer = b""
    try:
        while True:
            if chunked:
                size = int((await reader.readline()).strip() or b"0", 16)
                if size == 0:
                    break
                piece = await reader.readexactly(size)
                await reader.readline()
            else:
                piece = await reader.read(65536)
                if not piece:
                    break
            buffer += piece
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield status, line.decode()
        if buffer:
            yield status, buffer.decode()
    finally:
        writer.close()


async def one_request(host, port, model, user, question, mode, max_tokens, top_k, window):
    """(TTFT s, total s, tokens the server prefilled: prompt tokens minus injected ones, the
    answer's text)."""
    body = {"model": model, "stream": True, "temperature": 0, "max_tokens": max_tokens,
            "ignore_eos": True, "user": user, "stream_options": {"include_usage": True},
            "memory": {"mode": mode, "top_k": top_k, "context_window": window},
            "messages": [{"role": "user", "content": question}]}
    start = time.perf_counter()
    ttft = None
    prefilled = None
    text = []
    async for status, line in post_stream(host, port, "/v1/chat/completions", body):
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {line}")
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if "error" in chunk:
            raise RuntimeError(chunk["error"]["message"])
        if chunk["choices"] and chunk["choices"][0]["delta"].get("content") is not None:
            if ttft is None:
                ttft = time.perf_counter() - start
            text.append(chunk["choices"][0]["delta"]["content"])
        if chunk.get("usage"):
            usage = chunk["usage"]
            prefilled = usage["prompt_tokens"] - usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return ttft, time.perf_counter() - start, prefilled, "".join(text)


async def run_batch(port, model, users, mode, max_tokens, top_k, window):
    """Every user at once; each asks its questions one after another (a closed loop: the next
    question goes out when the previous answer is complete). (wall s, TTFTs, prefilled tokens,
    {"user/question index": answer})."""
    async def user_session(user, questions):
        return [await one_request("127.0.0.1", port, model, user, q, mode, max_tokens, top_k, window)
                for q in questions]

    start = time.perf_counter()
    sessions = await asyncio.gather(*[user_session(u, qs) for u, qs in users])
    wall = time.perf_counter() - start
    done = [r for session in sessions for r in session]
    answers = {f"{u}/{i}": r[3] for (u, _), session in zip(users, sessions) for i, r in enumerate(session)}
    return wall, [r[0] for r in done], [r[2] for r in done], answers


MILESTONE = re.compile(r"request (\d+): queued ([\d.]+) ms, memory ([\d.]+) ms, "
                       r"admitted ([\d.]+) ms, first token ([\d.]+) ms")


def wave_milestones(log_path, first_id, runs, users):
    """With the server's --log-requests: median ms from submit to memory ready, admission and
    first token, for the first questions of every run (wave 1, all sent at once) and the second
    ones (wave 2, sent as first answers complete). Engine ids count every request from 1 in
    submission order, so run r holds ids first_id + r * 2 * users ... + 2 * users - 1, wave 1
    first."""
    seen = {}
    with open(log_path) as f:
        for line in f:
            m = MILESTONE.search(line)
            if m:
                seen[int(m.group(1))] = [float(x) for x in m.groups()[2:]]
    waves = {1: [], 2: []}
    for r in range(runs):
        base = first_id + r * 2 * users
        for i in range(2 * users):
            if base + i in seen:
                waves[1 if i < users else 2].append(seen[base + i])
    if not waves[1]:
        return None
    return {f"wave{w}": {name: statistics.median(row[k] for row in rows)
                         for k, name in enumerate(("memory_ms", "admitted_ms", "first_token_ms"))}
            for w, rows in waves.items() if rows}


def http_get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def engine_counters(url):
    """Engine steps and their wall and forward seconds, from the server's /metrics."""
    names = {"inferscale_engine_steps_total": "steps", "inferscale_engine_step_seconds_total": "step_s",
             "inferscale_engine_forward_seconds_total": "forward_s"}
    out = {}
    for m in re.finditer(r"^(\w+)(?:\{[^}]*\})? (\S+)$", http_get(url + "/metrics"), re.M):
        if m.group(1) in names:
            out[names[m.group(1)]] = float(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "inferscale"))
    ap.add_argument("--server-args", default="", help="extra `inferscale serve` flags (model, device)")
    ap.add_argument("--users", default="10,25,50,75,100")
    ap.add_argument("--modes", default="kv,prompt")
    ap.add_argument("--top-k", type=int, default=50)
    ap.add_argument("--context-window", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=50)
    ap.add_argument("--lone", type=int, default=5, help="lone-user kv requests for the TTFT baseline")
    ap.add_argument("--repeats", type=int, default=1, help="measured runs per users level and mode")
    ap.add_argument("--conversation", default=os.path.join(os.environ.get(
        "INFERSCALE_LOCOMO", os.path.join(ROOT, "..", "shared", "data", "locomo10")), "26.json"))
    ap.add_argument("--out", default="", help="write the results as JSON here")
    ap.add_argument("--server-log", default="", help="keep the server's log here")
    ap.add_argument("--compare-answers", default="",
                    help="another run's --out JSON: count the measured answers equal to its own")
    args = ap.parse_args()
    levels = [int(u) for u in args.users.split(",")]
    modes = args.modes.split(",")

    work = tempfile.mkdtemp(prefix="serve_bench_")
    db = os.path.join(work, "memory.db")
    print(f"importing {max(levels)} users' memories", file=sys.stderr)
    for u in range(max(levels)):
        subprocess.run([args.bin, "memory", "import-locomo", args.conversation, "--user", f"u{u}",
                        "--db", db], check=True, capture_output=True)
    questions = load_questions(args.conversation, max(levels))

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [args.bin, "serve", "--port", str(port), "--db", db, "--chunk-dir", os.path.join(work, "chunks"),
           "--no-prefix-cache", "--max-requests", "4096"] + shlex.split(args.server_args)
    print("server:", " ".join(cmd), file=sys.stderr)
    log = open(args.server_log or os.path.join(work, "server.log"), "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 600
        while True:
            if server.poll() is not None:
                sys.exit("the server exited: " + open(log.name).read())
            try:
                http_get(url + "/health")
                break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.time() > deadline:
                sys.exit("the server did not start")
            time.sleep(0.2)
        model = json.loads(http_get(url + "/v1/models"))["data"][0]["id"]
        for line in open(log.name):
            if "GPU memory:" in line:
                print(line.strip(), file=sys.stderr)

        def batch(users, mode, max_tokens):
            return asyncio.run(run_batch(port, model, users, mode, max_tokens, args.top_k, args.context_window))

        sent = 0  # requests so far: the engine numbers them from 1 in this order

        def counted(users, mode, max_tokens):
            nonlocal sent
            out = batch(users, mode, max_tokens)
            sent += sum(len(qs) for _, qs in users)
            return out

        results = {"levels": levels, "top_k": args.top_k, "max_tokens": args.max_tokens,
                   "context_window": args.context_window, "server_args": args.server_args, "rows": [],
                   "answers": {}}
        # The lone user: kv requests one at a time (chunks warmed first).
        lone_requests = [(f"u{u}", [questions[u][0]]) for u in range(args.lone)]
        counted(lone_requests, "kv", 1)
        lone = [counted([r], "kv", args.max_tokens) for r in lone_requests]
        # Alone, each request runs in steps of the same shapes whatever the server's state, so
        # these answers are comparable bit for bit across runs (batched ones round by batch).
        results["answers"]["kv/lone"] = {q: a for run in lone for q, a in run[3].items()}
        results["kv_lone_ttft_ms"] = statistics.median(run[1][0] for run in lone) * 1e3
        print(f"lone user kv TTFT p50 {results['kv_lone_ttft_ms']:.1f} ms", file=sys.stderr)
        # The marginal prefill rate: the same questions in prompt mode prefill the memory too.
        lone_prompt = [counted([r], "prompt", 1) for r in lone_requests]
        extra_tokens = statistics.median(p[2][0] - k[2][0] for p, k in zip(lone_prompt, lone))
        extra_s = statistics.median(p[1][0] - k[1][0] for p, k in zip(lone_prompt, lone))
        results["prefill_tokens_per_s"] = extra_tokens / extra_s
        print(f"marginal prefill rate {results['prefill_tokens_per_s']:.0f} tokens/s ({extra_tokens:.0f} "
              f"more tokens in prompt mode take {extra_s * 1e3:.1f} ms more)", file=sys.stderr)
        for users in levels:
            sessions = [(f"u{u}", questions[u]) for u in range(users)]
            requests = sum(len(qs) for _, qs in sessions)
            row = {"users": users, "requests": requests}
            for mode in modes:
                counted(sessions, mode, 1)  # warm: chunks encoded, nothing else kept
                before = engine_counters(url)
                first_id = sent + 1
                walls, ttfts, prefilled = [], [], []
                for _ in range(args.repeats):
                    wall, run_ttfts, run_prefilled, answers = counted(sessions, mode, args.max_tokens)
                    results["answers"][f"{mode}/{users}"] = answers
                    walls.append(wall)
                    ttfts += run_ttfts
                    prefilled += run_prefilled
                after = engine_counters(url)
                steps = int(after["steps"] - before["steps"])
                step_s = after["step_s"] - before["step_s"]
                row[mode] = {"qps": statistics.median(requests / w for w in walls),
                             "qps_runs": [requests / w for w in walls], "wall_s": sum(walls),
                             "ttft_p50_ms": percentile(ttfts, 50) * 1e3,
                             "ttft_p99_ms": percentile(ttfts, 99) * 1e3,
                             "steps": steps, "step_ms": step_s / max(steps, 1) * 1e3,
                             "host_share": 1 - (after["forward_s"] - before["forward_s"]) / max(step_s, 1e-9),
                             "prefilled_p50": statistics.median(prefilled)}
                print(f"users {users:3d} {mode:6s} QPS {row[mode]['qps']:7.2f}  TTFT p50 "
                      f"{row[mode]['ttft_p50_ms']:8.1f} ms  p99 {row[mode]['ttft_p99_ms']:8.1f} ms  "
                      f"{steps} steps of {row[mode]['step_ms']:.1f} ms, host "
                      f"{row[mode]['host_share'] * 100:.0f}%", file=sys.stderr)
                if mode == "kv":
                    # The median of U simultaneous questions waits for half of their prefill.
                    kv, lone_ms, rate = row[mode], results["kv_lone_ttft_ms"], results["prefill_tokens_per_s"]
                    ahead = (users + 1) // 2 - 1
                    kv["burst_bound_ms"] = lone_ms + ahead * kv["prefilled_p50"] / rate * 1e3
                    print(f"    burst bound {kv['burst_bound_ms']:.1f} ms (lone + {ahead} x "
                          f"{kv['prefilled_p50']:.0f} prefilled tokens at {rate:.0f} tokens/s): p50 / bound "
                          f"{kv['ttft_p50_ms'] / kv['burst_bound_ms']:.2f}, bound / lone "
                          f"{kv['burst_bound_ms'] / lone_ms:.2f}", file=sys.stderr)
                waves = wave_milestones(log.name, first_id, args.repeats, users)
                if waves:
                    row[mode]["server_milestones"] = waves
                    for name, w in waves.items():
                        print(f"    {name}: memory {w['memory_ms']:.1f}, admitted "
                              f"{w['admitted_ms']:.1f}, first token {w['first_token_ms']:.1f} ms "
                              f"(median from submit, server log)", file=sys.stderr)
            if "kv" in row and "prompt" in row:
                row["qps_kv_over_prompt"] = row["kv"]["qps"] / row["prompt"]["qps"]
            if "kv" in row:
                row["kv_ttft_p50_over_lone"] = row["kv"]["ttft_p50_ms"] / results["kv_lone_ttft_ms"]
            results["rows"].append(row)
        results["metrics_after"] = http_get(url + "/metrics")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)  # the disk tier holds GBs of chunks

    print("\n| users | kv QPS | prompt QPS | kv/prompt | kv TTFT p50 / p99 ms | prompt TTFT p50 / p99 ms | kv p50 / lone | burst bound / lone |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results["rows"]:
        kv, pr = r.get("kv", {}), r.get("prompt", {})
        print(f"| {r['users']} | {kv.get('qps', 0):.2f} | {pr.get('qps', 0):.2f} | "
              f"{r.get('qps_kv_over_prompt', 0):.2f} | {kv.get('ttft_p50_ms', 0):.0f} / {kv.get('ttft_p99_ms', 0):.0f} | "
              f"{pr.get('ttft_p50_ms', 0):.0f} / {pr.get('ttft_p99_ms', 0):.0f} | {r.get('kv_ttft_p50_over_lone', 0):.2f} | "
              f"{kv.get('burst_bound_ms', 0) / results['kv_lone_ttft_ms']:.2f} |")
    print(f"lone-user kv TTFT p50: {results['kv_lone_ttft_ms']:.1f} ms; marginal prefill rate "
          f"{results['prefill_tokens_per_s']:.0f} tokens/s")
    pool = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^inferscale_chunk_pool_(promotions|demotions|served_from_host)_total(?:\{[^}]*\})? (\S+)$",
        results["metrics_after"], re.M)}
    moved = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^inferscale_chunk_pool_moved_bytes_total\{[^}]*direction="(\w+)"[^}]*\} (\S+)$',
        results["metrics_after"], re.M)}
    wait = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^inferscale_memory_(requests|wait_seconds)_total(?:\{[^}]*\})? (\S+)$",
        results["metrics_after"], re.M)}
    print("chunk pool: " + ", ".join(f"{k} {v:.0f}" for k, v in pool.items()) + "; moved " +
          ", ".join(f"{k} {v / 2**30:.1f} GiB" for k, v in moved.items()))
    transfer = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
        r'^inferscale_transfer_(bytes|seconds)_total\{[^}]*direction="(\w+)"[^}]*\} (\S+)$',
        results["metrics_after"], re.M)}
    limit = re.search(r"^inferscale_chunk_pool_upload_limit_bytes_per_second(?:\{[^}]*\})? (\S+)$",
                      results["metrics_after"], re.M)
    up_bytes, up_s = transfer.get(("bytes", "up"), 0), transfer.get(("seconds", "up"), 0)
    if up_s > 0 and limit and float(limit.group(1)) > 0:
        rate, peak = up_bytes / up_s, float(limit.group(1))
        print(f"promotion bandwidth: {rate / 1e9:.1f} GB/s over {up_bytes / 2**30:.1f} GiB = "
              f"{rate / peak:.0%} of pinned host-to-device {peak / 1e9:.1f} GB/s measured at start")
    if wait.get("requests"):
        print(f"memory wait: {wait['wait_seconds'] / wait['requests'] * 1e3:.1f} ms per request "
              f"over {wait['requests']:.0f} requests")
    if args.compare_answers:
        other = json.load(open(args.compare_answers))["answers"]
        for key, answers in results["answers"].items():
            theirs = other.get(key, {})
            same = sum(1 for q, a in answers.items() if theirs.get(q) == a)
            print(f"answers {key} equal to {os.path.basename(args.compare_answers)}'s: "
                  f"{same} of {len(answers)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
