#!/usr/bin/env python3
"""PyTorch peer for gpu_bench's batched decode: a Llama-3.1-8B-shaped model in bf16 on one GPU.

Weights come from transformers' LlamaForCausalLM(config) built on the GPU with its own random
init (falling back to torch.randn weights when transformers is missing or its API moved). The
forward is a minimal hand-written Llama (the same math as LlamaForCausalLM, unfused q/k/v and
gate/up like HF) over a static KV cache [layers][batch, kv_heads, max_len, head_dim]:
  * prefill: `context` tokens per sequence, SDPA causal attention (flash), in chunks of sequences;
  * decode: one token per sequence per step, captured once per batch size in a CUDA graph and
    replayed; attention over the whole static cache with a position mask (SDPA with GQA when
    this torch supports it, else grouped matmuls); logits [batch, vocab] stay on the GPU.
Prints one JSON object: decode tokens/s at each batch size (median of timed replays).

  python3 tools/torch_decode_peer.py --config configs/llama-3.1-8b.json [--batches 64,128,256]
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

T0 = time.time()
DEV = "cuda"  # --cpu-smoke switches to "cpu" (no graphs) to check the math anywhere


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def load_config(path):
    with open(path) as f:
        return json.load(f)


def hf_weights(cfg_json):
    """Parameters of transformers' LlamaForCausalLM(config), random-initialised on the GPU."""
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**{k: v for k, v in cfg_json.items() if k not in ("architectures",)})
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(DEV):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    model = model.to(device=DEV, dtype=torch.bfloat16).eval()
    p = dict(model.named_parameters())
    L = cfg_json["num_hidden_layers"]
    layers = []
    for i in range(L):
        pre = f"model.layers.{i}."
        layers.append({
            "in_norm": p[pre + "input_layernorm.weight"],
            "q": p[pre + "self_attn.q_proj.weight"], "k": p[pre + "self_attn.k_proj.weight"],
            "v": p[pre + "self_attn.v_proj.weight"], "o": p[pre + "self_attn.o_proj.weight"],
            "post_norm": p[pre + "post_attention_layernorm.weight"],
            "gate": p[pre + "mlp.gate_proj.weight"], "up": p[pre + "mlp.up_proj.weight"],
            "down": p[pre + "mlp.down_proj.weight"],
        })
    head = p.get("lm_head.weight", p["model.embed_tokens.weight"])
    w = {"embed": p["model.embed_tokens.weight"], "norm": p["model.norm.weight"],
         "head": head, "layers": layers}
    return w, f"transformers {transformers.__version__} LlamaForCausalLM init", model


def random_weights(c):
    """U(+-1/sqrt(in)) matrices, unit norms: the same recipe as LlamaModel::create_random."""
    h, ffn, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    d = c.get("head_dim") or h // H
    g = torch.Generator(device=DEV).manual_seed(0)

    def mat(o, i):
        return (torch.rand(o, i, device=DEV, dtype=torch.bfloat16, generator=g) * 2 - 1) / math.sqrt(i)

    ones = lambda n: torch.ones(n, device=DEV, dtype=torch.bfloat16)
    layers = [{"in_norm": ones(h), "q": mat(H * d, h), "k": mat(KV * d, h), "v": mat(KV * d, h),
               "o": mat(h, H * d), "post_norm": ones(h), "gate": mat(ffn, h), "up": mat(ffn, h),
               "down": mat(h, ffn)} for _ in range(c["num_hidden_layers"])]
    return {"embed": mat(V, h) * math.sqrt(h), "norm": ones(h), "head": mat(V, h),
            "layers": layers}, "torch.rand", None


def rope_tables(c, max_len):
    H = c["num_attention_heads"]
    d = c.get("head_dim") or c["hidden_size"] // H
    theta = c.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=DEV, dtype=torch.float32) / d))
    rs = c.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        factor, lo, hi = rs["factor"], rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (1 - smooth) * inv / factor + smooth * inv
        is_mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(is_mid, mid, scaled)
    ang = torch.arange(max_len, device=DEV, dtype=torch.float32)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)


def rotate(x, cos, sin):
    # x [..., d]; rotate_half pairing, as HF.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def rms_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


class Peer:
    def __init__(self, c, w, max_batch, max_len):
        self.c, self.w = c, w
        self.H, self.KV = c["num_attention_heads"], c["num_key_value_heads"]
        self.d = c.get("head_dim") or c["hidden_size"] // self.H
        self.eps = c.get("rms_norm_eps", 1e-5)
        self.max_len = max_len
        L = c["num_hidden_layers"]
        shape = (max_batch, self.KV, max_len, self.d)
        self.k_cache = [torch.zeros(shape, device=DEV, dtype=torch.bfloat16) for _ in range(L)]
        self.v_cache = [torch.zeros(shape, device=DEV, dtype=torch.bfloat16) for _ in range(L)]
        self.cos, self.sin = rope_tables(c, max_len)
        self.attn_impl = None

    def mlp(self, x, lw):
        return F.linear(F.silu(F.linear(x, lw["gate"])) * F.linear(x, lw["up"]), lw["down"])

    @torch.no_grad()
    def prefill(self, tokens, b0):
        """tokens [b, T]: fills cache rows b0..b0+b, positions 0..T-1."""
        b, T = tokens.shape
        x = self.w["embed"][tokens]
        cos, sin = self.cos[:T][None, None], self.sin[:T][None, None]
        group = self.H // self.KV
        for i, lw in enumerate(self.w["layers"]):
            h = rms_norm(x, lw["in_norm"], self.eps)
            q = F.linear(h, lw["q"]).view(b, T, self.H, self.d).transpose(1, 2)
            k = F.linear(h, lw["k"]).view(b, T, self.KV, self.d).transpose(1, 2)
            v = F.linear(h, lw["v"]).view(b, T, self.KV, self.d).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            self.k_cache[i][b0:b0 + b, :, :T] = k
            self.v_cache[i][b0:b0 + b, :, :T] = v
            a = F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1),
                                               v.repeat_interleave(group, 1), is_causal=True)
            x = x + F.linear(a.transpose(1, 2).reshape(b, T, self.H * self.d), lw["o"])
            x = x + self.mlp(rms_norm(x, lw["post_norm"], self.eps), lw)
        return F.linear(rms_norm(x[:, -1], self.w["norm"], self.eps), self.w["head"])

    def attend(self, q, kc, vc, mask):
        """q [B, H, 1, d], kc/vc [B, KV, S, d], mask [1, 1, 1, S] bool -> [B, H, 1, d]."""
        B = q.shape[0]
        if self.attn_impl == "sdpa_gqa":
            return F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
        group = self.H // self.KV
        qg = q.view(B, self.KV, group, self.d)
        s = torch.matmul(qg, kc.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))  # [B, KV, g, S]
        s = s.masked_fill(~mask.view(1, 1, 1, -1), float("-inf"))
        p = torch.softmax(s.float(), dim=-1).to(q.dtype)
        return torch.matmul(p, vc).view(B, self.H, 1, self.d)

    @torch.no_grad()
    def decode_step(self, tok, pos, B):
        """tok [B] long, pos [1] long (all sequences at the same position). Graph-safe."""
        x = self.w["embed"][tok].view(B, 1, -1)
        cos = self.cos.index_select(0, pos).view(1, 1, 1, self.d)
        sin = self.sin.index_select(0, pos).view(1, 1, 1, self.d)
        mask = (torch.arange(self.max_len, device=DEV) <= pos).view(1, 1, 1, self.max_len)
        for i, lw in enumerate(self.w["layers"]):
            h = rms_norm(x, lw["in_norm"], self.eps)
            q = F.linear(h, lw["q"]).view(B, 1, self.H, self.d).transpose(1, 2)
            k = F.linear(h, lw["k"]).view(B, 1, self.KV, self.d).transpose(1, 2)
            v = F.linear(h, lw["v"]).view(B, 1, self.KV, self.d).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            kc, vc = self.k_cache[i][:B], self.v_cache[i][:B]
            kc.index_copy_(2, pos, k)
            vc.index_copy_(2, pos, v)
            a = self.attend(q, kc, vc, mask)
            x = x + F.linear(a.transpose(1, 2).reshape(B, 1, self.H * self.d), lw["o"])
            x = x + self.mlp(rms_norm(x, lw["post_norm"], self.eps), lw)
        return F.linear(rms_norm(x[:, 0], self.w["norm"], self.eps), self.w["head"])

    def pick_attention(self, batch):
        """The faster of SDPA with enable_gqa (when this torch has it and it agrees with the
        grouped matmuls) and the grouped matmuls, timed at the real cache length."""
        B, S = batch, self.max_len
        q = torch.randn(B, self.H, 1, self.d, device=DEV, dtype=torch.bfloat16)
        kc = torch.randn(B, self.KV, S, self.d, device=DEV, dtype=torch.bfloat16)
        vc = torch.randn(B, self.KV, S, self.d, device=DEV, dtype=torch.bfloat16)
        mask = (torch.arange(S, device=DEV) < S // 2).view(1, 1, 1, S)
        self.attn_impl = "grouped_matmul"
        ref = self.attend(q, kc, vc, mask)
        timings = {}
        for impl in ("grouped_matmul", "sdpa_gqa"):
            self.attn_impl = impl
            try:
                got = self.attend(q, kc, vc, mask)
                if (got.float() - ref.float()).abs().max().item() > 5e-2:
                    raise RuntimeError("disagrees with the grouped matmuls")
                sync()
                t = time.time()
                for _ in range(5):
                    self.attend(q, kc, vc, mask)
                sync()
                timings[impl] = (time.time() - t) / 5 * 1e3
            except Exception as e:  # older torch, or no kernel for this combination
                log(f"decode attention {impl} unusable: {type(e).__name__}: {e}")
        self.attn_impl = min(timings, key=timings.get)
        log("decode attention ms per layer at batch %d: %s" % (
            B, ", ".join(f"{k} {v:.3f}" for k, v in timings.items())))
        return self.attn_impl


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/llama-3.1-8b.json")
    ap.add_argument("--batches", default="64,128,256")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=8, help="sequences per prefill forward")
    ap.add_argument("--no-transformers", action="store_true")
    ap.add_argument("--json", default="", help="also write the JSON here")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny configs only: run prefill and eager decode steps on the CPU")
    a = ap.parse_args()
    global DEV
    if a.cpu_smoke:
        DEV = "cpu"
        return smoke(a)

    c = load_config(a.config)
    batches = [int(b) for b in a.batches.split(",") if b]
    max_b = max(batches)
    max_len = a.context + a.warmup + a.steps + 8
    props = torch.cuda.get_device_properties(0)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    log(f"torch {torch.__version__} on {props.name}")

    model = None
    try:
        if a.no_transformers:
            raise RuntimeError("--no-transformers")
        w, source, model = hf_weights(c)
    except Exception as e:
        log(f"transformers weights unavailable ({type(e).__name__}: {e}); torch.rand weights")
        w, source, model = random_weights(c)
    torch.cuda.synchronize()
    log(f"weights ready ({source}), {torch.cuda.memory_allocated() / 1e9:.1f} GB allocated")

    peer = Peer(c, w, max_b, max_len)
    attn = peer.pick_attention(min(batches))
    log(f"KV cache {max_b} x {max_len} allocated; decode attention: {attn}")

    t = time.time()
    gen = torch.Generator(device=DEV).manual_seed(1)
    for b0 in range(0, max_b, a.prefill_chunk):
        b = min(a.prefill_chunk, max_b - b0)
        toks = torch.randint(0, c["vocab_size"], (b, a.context), device=DEV, generator=gen)
        logits = peer.prefill(toks, b0)
    torch.cuda.synchronize()
    prefill_s = time.time() - t
    finite = bool(torch.isfinite(logits).all().item())
    log(f"prefilled {max_b} x {a.context} tokens in {prefill_s:.1f} s "
        f"({max_b * a.context / prefill_s:.0f} tokens/s eager), logits finite: {finite}")

    results = []
    for B in batches:
        tok = torch.randint(0, c["vocab_size"], (B,), device=DEV, generator=gen)
        pos = torch.full((1,), a.context, device=DEV, dtype=torch.long)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up before capture (cuBLAS handles, allocator)
                out = peer.decode_step(tok, pos, B)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = peer.decode_step(tok, pos, B)
        times = []
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for step in range(a.warmup + a.steps):
            pos.fill_(a.context + step)
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            if step >= a.warmup:
                times.append(start.elapsed_time(stop))
        times.sort()
        ms = times[len(times) // 2]
        fin = bool(torch.isfinite(out).all().item())
        results.append({"batch": B, "context": a.context, "ms_per_step": ms,
                        "tokens_per_s": B / (ms * 1e-3), "min_ms": times[0], "max_ms": times[-1],
                        "logits_finite": fin})
        log(f"decode batch {B}: {ms:.2f} ms/step, {B / (ms * 1e-3):.0f} tokens/s (graph replay)")
        del graph, out
        torch.cuda.synchronize()

    report = {"peer": "pytorch", "torch": torch.__version__, "device": props.name,
              "config": a.config, "weights": source, "decode_attention": attn,
              "prefill_s": prefill_s, "logits_finite": finite, "decode": results,
              "elapsed_s": time.time() - T0}
    text = json.dumps(report, indent=2)
    print(text, flush=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")


def smoke(a):
    """Checks shapes and the prefill/decode agreement on the CPU with a tiny config."""
    c = load_config(a.config)
    try:
        w, source, _ = hf_weights(c)
    except Exception as e:
        log(f"transformers weights unavailable ({type(e).__name__}: {e})")
        w, source, _ = random_weights(c)
    T = a.context
    peer = Peer(c, w, 2, T + 8)
    log(f"decode attention: {peer.pick_attention(2)} (weights: {source})")
    toks = torch.randint(0, c["vocab_size"], (2, T + 1))
    full = peer.prefill(toks, 0).float()          # logits after T + 1 tokens
    peer.prefill(toks[:, :T], 0)                  # cache of the first T
    step = peer.decode_step(toks[:, T], torch.tensor([T]), 2).float()
    err = (full - step).abs().max().item()
    log(f"prefill vs prefill+decode max |diff| {err:.4f} (logit scale {full.abs().max().item():.3f})")
    assert err < 0.05 * max(1.0, full.abs().max().item()), err


if __name__ == "__main__":
    main()
