#!/usr/bin/env python3
"""CPU throughput of inferscale next to llama.cpp (llama-cpp-python) on the same GGUF file and
thread count, measured in one run. Prints prefill and decode tokens/s for both and the ratios.

  python3 bench/cpu_vs_llama_cpp.py [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# The same text `inferscale bench` builds its prompt from (apps/cli/bench_command.cpp).
BENCH_TEXT = (
    "The history of computing is a story of ideas meeting machines. Early mechanical "
    "calculators gave way to electronic computers, which grew from rooms of vacuum tubes into "
    "chips holding billions of transistors. Along the way, programmers learned to describe "
    "problems precisely, and engineers learned to build hardware that runs those descriptions "
    "quickly. ")


def llama_cpp_bench(model, threads, prompt_tokens, gen_tokens, repeats):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=model, n_ctx=2048, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    text = BENCH_TEXT
    ids = llm.tokenize(text.encode(), add_bos=False, special=False)
    while len(ids) < prompt_tokens:
        text += BENCH_TEXT
        ids = llm.tokenize(text.encode(), add_bos=False, special=False)
    ids = ids[:prompt_tokens]
    best_prefill = best_decode = float("inf")
    for r in range(repeats + 1):  # the first run warms up
        llm.reset()
        t = time.perf_counter()
        llm.eval(ids)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        tok = int(np.argmax(logits))
        prefill = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(gen_tokens - 1):
            llm.eval([tok])
            logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
            tok = int(np.argmax(logits))
        decode = (time.perf_counter() - t) / (gen_tokens - 1)
        if r > 0:
            best_prefill, best_decode = min(best_prefill, prefill), min(best_decode, decode)
    return prompt_tokens / best_prefill, 1.0 / best_decode


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=os.path.join(root, "build", "bin", "inferscale"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    ours = json.loads(subprocess.run(
        [args.bin, "bench", "--model", args.model, "--threads", str(args.threads),
         "--prompt-tokens", str(args.prompt_tokens), "--gen-tokens", str(args.gen_tokens),
         "--repeats", str(args.repeats), "--json"],
        check=True, capture_output=True, text=True).stdout)
    peer_prefill, peer_decode = llama_cpp_bench(args.model, args.threads, args.prompt_tokens,
                                                args.gen_tokens, args.repeats)
    import llama_cpp
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
    host_avx512 = "avx512f" in flags and "avx512dq" in flags
    peer_isa = "avx512" if "AVX512 = 1" in llama_cpp.llama_print_system_info().decode() else "avx2"
    # inferscale's own kernels are AVX2 code on every host; its ggml arithmetic follows the host
    # unless INFERSCALE_CPU_ISA caps it (src/backends/cpu/ggml_isa.h).
    ours_isa = os.environ.get("INFERSCALE_CPU_ISA") or ("avx512" if host_avx512 else "avx2")
    print(f"cpu {cpu} (AVX-512: {'yes' if host_avx512 else 'no'}); llama.cpp built for {peer_isa}, "
          f"inferscale's ggml arithmetic {ours_isa}")
    rows = [("prefill", ours["prefill_tokens_per_s"], peer_prefill),
            ("decode", ours["decode_tokens_per_s"], peer_decode)]
    print(f"model {os.path.basename(args.model)}, {args.threads} threads, "
          f"prompt {args.prompt_tokens} tokens, {args.gen_tokens} generated")
    print(f"{'phase':<8} {'inferscale tok/s':>17} {'llama.cpp tok/s':>16} {'ratio':>6}")
    for name, a, b in rows:
        print(f"{name:<8} {a:>17.1f} {b:>16.1f} {a / b:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
