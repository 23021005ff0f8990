#!/usr/bin/env python3
"""Writes the model-loader test fixtures into tests/fixtures/loader/.

  tiny_hf/                 config.json + model.safetensors (F32/F16/BF16 tensors)
  tiny_hf_sharded/         the same weights split over two shards with an index
  misaligned.safetensors   a header whose length is not a multiple of 8 (misaligned data)
  tiny_llama.gguf          1-layer llama, every tensor type we dequantize, Q/K permuted the way
                           llama.cpp's convert_hf_to_gguf.py does, tokenizer metadata
  tiny_llama_expected.bin  the HF-layout f32 values the loader must return, concatenated
  tiny_llama_expected.json name -> {shape, offset (in floats)} into the .bin
  tiny_qwen2.gguf          1-layer qwen2 (no Q/K permutation, q/k/v biases, tied embeddings)
  tiny_unknown_pre.gguf    tiny_qwen2.gguf with a tokenizer.ggml.pre no loader knows
  tiny_llama31.gguf        2-layer Q8_0 llama with rope_freqs.weight written from a llama3
                           rope_scaling the way llama.cpp's converter does, and a byte-level
                           vocabulary llama.cpp can load
  tiny_llama31_expected.json  its llama3 scaling, factors, prompt ids and the f64 numpy
                           forward's logits (RoPE angle pos * theta^(-2i/d) / factor_i over
                           the dequantized weights), the same without the factors, and
                           llama.cpp's logits of the file (llama-cpp-python)
  smollm2_spot.json        a few HF-layout values of models/SmolLM2-135M-Instruct.Q4_1.gguf as
                           dequantized by the gguf package (skipped when the model is absent)

Safetensors values follow a formula the C++ test recomputes: tensor k, element i holds
((i % 7) - 3) * 0.25 + k, exact in f16 and bf16.

Needs numpy, the PyPI `gguf` package and llama-cpp-python. Run from the repository root:
  python3 tools/make_loader_fixtures.py
"""
import json
import math
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "loader")


# ---------------------------------------------------------------- safetensors

def st_values(k, shape):
    n = int(np.prod(shape)) if shape else 1
    i = np.arange(n)
    return (((i % 7) - 3) * 0.25 + k).astype(np.float32).reshape(shape)


def bf16_bytes(a):
    bits = np.asarray(a, dtype=np.float32).view(np.uint32)
    return (bits >> 16).astype(np.uint16).tobytes()  # values are exact in bf16: no rounding


def write_safetensors(path, tensors, pad_to_8=True):
    """tensors: list of (name, dtype string, float32 array)."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, dtype, arr in tensors:
        if dtype == "F32":
            b = arr.astype("<f4").tobytes()
        elif dtype == "F16":
            b = arr.astype("<f2").tobytes()
        elif dtype == "BF16":
            b = bf16_bytes(arr)
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad_to_8:
        h += b" " * (-len(h) % 8)
    elif len(h) % 2 == 0:
        h += b" "  # odd length: every 2- and 4-byte tensor starts misaligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


TINY_HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 16,
    "hidden_size": 8,
    "intermediate_size": 12,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": [2, 3],
    "torch_dtype": "bfloat16",
}


def tiny_hf_tensors():
    c = TINY_HF_CONFIG
    h, v, f = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    hd = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    specs = [
        ("model.embed_tokens.weight", "BF16", (v, h)),
        ("model.layers.0.input_layernorm.weight", "F32", (h,)),
        ("model.layers.0.self_attn.q_proj.weight", "BF16", (h, h)),
        ("model.layers.0.self_attn.k_proj.weight", "F16", (kv, h)),
        ("model.layers.0.self_attn.v_proj.weight", "F16", (kv, h)),
        ("model.layers.0.self_attn.o_proj.weight", "BF16", (h, h)),
        ("model.layers.0.post_attention_layernorm.weight", "F32", (h,)),
        ("model.layers.0.mlp.gate_proj.weight", "BF16", (f, h)),
        ("model.layers.0.mlp.up_proj.weight", "BF16", (f, h)),
        ("model.layers.0.mlp.down_proj.weight", "BF16", (h, f)),
        ("model.norm.weight", "F32", (h,)),
        ("lm_head.weight", "F32", (v, h)),
    ]
    # k = position in this list, so the C++ test can recompute every value.
    return [(name, dt, st_values(k, shape)) for k, (name, dt, shape) in enumerate(specs)]


def make_safetensors():
    tensors = tiny_hf_tensors()
    d = os.path.join(OUT, "tiny_hf")
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(TINY_HF_CONFIG, f, indent=2)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"}, f)
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [3, 7]}, f)

    d = os.path.join(OUT, "tiny_hf_sharded")
    os.makedirs(d, exist_ok=True)
    shards = {"model-00001-of-00002.safetensors": tensors[:5],
              "model-00002-of-00002.safetensors": tensors[5:]}
    weight_map = {}
    for fname, part in shards.items():
        write_safetensors(os.path.join(d, fname), part)
        weight_map.update({name: fname for name, _, _ in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(TINY_HF_CONFIG, f, indent=2)

    write_safetensors(os.path.join(OUT, "misaligned.safetensors"),
                      [("a", "F32", st_values(0, (3, 5))), ("b", "BF16", st_values(1, (7,))),
                       ("c", "F16", st_values(2, (2, 3)))], pad_to_8=False)


# ---------------------------------------------------------------- GGUF

def hf_to_gguf_permute(w, n_head):
    """Our own statement of convert_hf_to_gguf.py's LlamaModel.permute: within each head, HF row
    s * (head_dim / 2) + i (rotate_half halves) moves to row 2 * i + s (interleaved pairs)."""
    rows = w.shape[0]
    head_dim = rows // n_head
    half = head_dim // 2
    out = np.empty_like(w)
    for h in range(n_head):
        for s in range(2):
            for i in range(half):
                out[h * head_dim + 2 * i + s] = w[h * head_dim + s * half + i]
    return out


def roundtrip(arr, qtype):
    """What a loader must return for `arr` stored as `qtype`: the gguf package's dequantization."""
    if qtype == QT.F32:
        return arr.astype(np.float32)
    if qtype == QT.F16:
        return arr.astype(np.float16).astype(np.float32)
    return quants.dequantize(quants.quantize(arr, qtype), qtype).reshape(arr.shape)


def add_tensor(writer, name, arr, qtype):
    if qtype == QT.F32:
        writer.add_tensor(name, arr.astype(np.float32))
    elif qtype == QT.F16:
        writer.add_tensor(name, arr.astype(np.float16))
    else:
        writer.add_tensor(name, quants.quantize(arr, qtype), raw_dtype=qtype)


def add_vocab(w, n_vocab, pre="smollm"):
    tokens = ["<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"]
    tokens += ["t%d" % i for i in range(len(tokens), n_vocab)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_scores([float(-i) for i in range(n_vocab)])
    w.add_token_types([2, 3, 3, 3, 3, 3] + [1] * (n_vocab - 6))
    w.add_token_merges(["t 1", "t1 0", "t 2"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(3)
    w.add_eot_token_id(5)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}")


def add_metadata_samples(w):
    # One key of every GGUF value type, for the parser test.
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_uint64("test.u64", 1 << 40)
    w.add_int64("test.i64", -(1 << 40))
    w.add_float64("test.f64", 0.125)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "héllo")
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_array("test.arr_nested", [[1, 2], [3]])


def make_tiny_llama(rng):
    vocab, hidden, inter, n_head, n_kv = 32, 64, 64, 4, 2
    head_dim = hidden // n_head
    path = os.path.join(OUT, "tiny_llama.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(inter)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(50000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    add_vocab(w, vocab)
    add_metadata_samples(w)

    def rand(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    # (gguf name, hf name, hf-layout array, type, heads to permute by or None)
    specs = [
        ("token_embd.weight", "model.embed_tokens.weight", rand(vocab, hidden), QT.F16, None),
        ("blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", rand(hidden), QT.F32, None),
        ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", rand(hidden, hidden), QT.Q8_0, n_head),
        ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", rand(n_kv * head_dim, hidden), QT.Q4_1, n_kv),
        ("blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", rand(n_kv * head_dim, hidden), QT.Q4_0, None),
        ("blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight", rand(hidden, hidden), QT.BF16, None),
        ("blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight", rand(hidden), QT.F32, None),
        ("blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight", rand(inter, hidden), QT.Q4_0, None),
        ("blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight", rand(inter, hidden), QT.Q8_0, None),
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", rand(hidden, inter), QT.Q4_1, None),
        ("output_norm.weight", "model.norm.weight", rand(hidden), QT.F32, None),
        ("output.weight", "lm_head.weight", rand(vocab, hidden), QT.F32, None),
    ]
    # Quantization blocks run along rows, so quantizing the permuted matrix and un-permuting
    # equals quantizing the HF matrix: the expected values never use an inverse permutation.
    expected, index, offset = [], {}, 0
    for gname, hname, arr, qtype, heads in specs:
        stored = hf_to_gguf_permute(arr, heads) if heads else arr
        add_tensor(w, gname, stored, qtype)
        exp = roundtrip(arr, qtype).astype(np.float32)
        index[hname] = {"shape": list(arr.shape), "offset": offset, "gguf_type": qtype.name}
        expected.append(exp.ravel())
        offset += exp.size
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    np.concatenate(expected).astype("<f4").tofile(os.path.join(OUT, "tiny_llama_expected.bin"))
    with open(os.path.join(OUT, "tiny_llama_expected.json"), "w") as f:
        json.dump(index, f, indent=1)


def make_tiny_qwen2(rng, file_name="tiny_qwen2.gguf", pre="smollm"):
    vocab, hidden, inter, n_head, n_kv = 32, 32, 32, 2, 1
    head_dim = hidden // n_head
    w = gguf.GGUFWriter(os.path.join(OUT, file_name), "qwen2")
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(inter)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    add_vocab(w, vocab, pre)
    # Deterministic ramps: the test checks q rows and biases are NOT permuted for qwen2.
    def ramp(*shape):
        return (np.arange(int(np.prod(shape)), dtype=np.float32) * 0.5).reshape(shape)
    w.add_tensor("token_embd.weight", ramp(vocab, hidden))
    w.add_tensor("blk.0.attn_norm.weight", ramp(hidden))
    w.add_tensor("blk.0.attn_q.weight", ramp(hidden, hidden))
    w.add_tensor("blk.0.attn_q.bias", ramp(hidden))
    w.add_tensor("blk.0.attn_k.weight", ramp(n_kv * head_dim, hidden))
    w.add_tensor("blk.0.attn_k.bias", ramp(n_kv * head_dim))
    w.add_tensor("blk.0.attn_v.weight", ramp(n_kv * head_dim, hidden))
    w.add_tensor("blk.0.attn_v.bias", ramp(n_kv * head_dim))
    w.add_tensor("blk.0.attn_output.weight", ramp(hidden, hidden))
    w.add_tensor("blk.0.ffn_norm.weight", ramp(hidden))
    w.add_tensor("blk.0.ffn_gate.weight", ramp(inter, hidden))
    w.add_tensor("blk.0.ffn_up.weight", ramp(inter, hidden))
    w.add_tensor("blk.0.ffn_down.weight", ramp(hidden, inter))
    w.add_tensor("output_norm.weight", ramp(hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


LLAMA31_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 64}


def llama3_rope_factors(theta, head_dim, scaling):
    """Our statement of convert_hf_to_gguf.py's rope_freqs for rope_type llama3: f32 base
    frequencies, then per pair 1 (short wavelengths), `factor` (long ones) or the reciprocal of
    the smooth interpolation between, in Python floats, stored as f32."""
    freqs = 1.0 / (np.float32(theta) ** (np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_ctx = scaling["original_max_position_embeddings"]
    out = []
    for f in freqs.astype(np.float32):
        wavelen = 2 * math.pi / float(f)
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def reference_logits(weights, cfg, tokens, factors):
    """A float64 forward of the HF-layout weights: Llama with rotate_half RoPE whose angle for
    pair i at position p is p * theta^(-2i/d) / factors[i]."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    n_head, n_kv, hd, eps = cfg["n_head"], cfg["n_kv"], cfg["head_dim"], cfg["eps"]
    n = len(tokens)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    half = hd // 2
    inv = cfg["theta"] ** (-np.arange(half, dtype=np.float64) * 2 / hd) / factors.astype(np.float64)
    ang = np.arange(n, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(x):  # [n, heads, hd]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], -1)

    x = w["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(cfg["n_layer"]):
        p = "model.layers.%d." % layer
        h = rms(x, w[p + "input_layernorm.weight"])
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, n_head, hd))
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, n_kv, hd))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, n_kv, hd)
        k = np.repeat(k, n_head // n_kv, axis=1)
        v = np.repeat(v, n_head // n_kv, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        o = np.einsum("hqk,khd->qhd", s, v).reshape(n, n_head * hd)
        x = x + o @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"])
        g = h @ w[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
    return rms(x, w["model.norm.weight"]) @ w["lm_head.weight"].T


def make_tiny_llama31(rng):
    cfg = {"n_layer": 2, "hidden": 64, "inter": 64, "n_head": 4, "n_kv": 2, "head_dim": 16,
           "theta": 10000.0, "eps": 1e-5}
    hidden, inter, n_head, n_kv, hd = cfg["hidden"], cfg["inter"], cfg["n_head"], cfg["n_kv"], cfg["head_dim"]
    # Byte-level BPE tokens (GPT-2's byte alphabet: "Ġ" is a space, "Ċ" a newline) so that text
    # of the letters a-x tokenizes the same in llama.cpp and in inferscale.
    tokens = ["<unk>", "<s>", "</s>", "<pad>"] + [chr(c) for c in range(ord("a"), ord("y"))]
    tokens += ["Ġ", "Ċ", "Ġt", "th"]
    vocab = len(tokens)
    factors = llama3_rope_factors(cfg["theta"], hd, LLAMA31_SCALING)
    path = os.path.join(OUT, "tiny_llama31.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(cfg["n_layer"])
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(inter)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_rope_freq_base(cfg["theta"])
    w.add_layer_norm_rms_eps(cfg["eps"])
    w.add_rope_dimension_count(hd)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3] * 4 + [1] * (vocab - 4))
    w.add_token_merges(["Ġ t", "t h"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def rand(*shape):
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    weights = {}

    def add(gname, hname, arr, qtype, heads=None):
        add_tensor(w, gname, hf_to_gguf_permute(arr, heads) if heads else arr, qtype)
        weights[hname] = roundtrip(arr, qtype).astype(np.float32)

    add("token_embd.weight", "model.embed_tokens.weight", rand(vocab, hidden), QT.F32)
    w.add_tensor("rope_freqs.weight", factors)
    for layer in range(cfg["n_layer"]):
        g, p = "blk.%d." % layer, "model.layers.%d." % layer
        add(g + "attn_norm.weight", p + "input_layernorm.weight", 1 + 0.1 * rand(hidden), QT.F32)
        add(g + "attn_q.weight", p + "self_attn.q_proj.weight", rand(n_head * hd, hidden), QT.Q8_0, n_head)
        add(g + "attn_k.weight", p + "self_attn.k_proj.weight", rand(n_kv * hd, hidden), QT.Q8_0, n_kv)
        add(g + "attn_v.weight", p + "self_attn.v_proj.weight", rand(n_kv * hd, hidden), QT.Q8_0)
        add(g + "attn_output.weight", p + "self_attn.o_proj.weight", rand(hidden, n_head * hd), QT.Q8_0)
        add(g + "ffn_norm.weight", p + "post_attention_layernorm.weight", 1 + 0.1 * rand(hidden), QT.F32)
        add(g + "ffn_gate.weight", p + "mlp.gate_proj.weight", rand(inter, hidden), QT.Q8_0)
        add(g + "ffn_up.weight", p + "mlp.up_proj.weight", rand(inter, hidden), QT.Q8_0)
        add(g + "ffn_down.weight", p + "mlp.down_proj.weight", rand(hidden, inter), QT.Q8_0)
    add("output_norm.weight", "model.norm.weight", 1 + 0.1 * rand(hidden), QT.F32)
    add("output.weight", "lm_head.weight", rand(vocab, hidden), QT.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    prompt = [int(t) for t in rng.integers(4, vocab, size=40)]
    logits = reference_logits(weights, cfg, prompt, factors)
    unscaled = reference_logits(weights, cfg, prompt, np.ones_like(factors))
    # llama.cpp on the file itself (f32 KV cache, no flash attention): Q8_0 matrices multiply
    # Q8-quantized activations there, so these differ from the f64 forward by that rounding.
    import llama_cpp
    llm = llama_cpp.Llama(model_path=path, n_ctx=64, n_threads=2, type_k=0, type_v=0,
                          flash_attn=False, logits_all=True, verbose=False)
    llm.eval(prompt)
    from_llama_cpp = np.array(llm.scores[:len(prompt)], dtype=np.float32)

    def rows(a):
        return [[float(x) for x in row] for row in a]

    with open(os.path.join(OUT, "tiny_llama31_expected.json"), "w") as f:
        json.dump({"rope_theta": cfg["theta"], "head_dim": hd, "rope_scaling": LLAMA31_SCALING,
                   "rope_freqs": [float(x) for x in factors], "prompt": prompt,
                   "logits": rows(logits), "logits_without_factors": rows(unscaled),
                   "llama_cpp_logits": rows(from_llama_cpp)}, f)


def make_smollm2_spot():
    path = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(path):
        print("skipping smollm2_spot.json: %s absent" % path, file=sys.stderr)
        return
    r = gguf.GGUFReader(path)
    tensors = {t.name: t for t in r.tensors}
    n_head, n_kv = 9, 3

    def hf_rows(name, heads):
        t = tensors[name]
        full = quants.dequantize(t.data, t.tensor_type).reshape(
            [int(x) for x in reversed(t.shape)]).astype(np.float32)
        if heads:
            # Inverse of the converter's permute, written as a reshape rather than a loop.
            rows, cols = full.shape
            full = full.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)
        return full

    picks = [
        ("token_embd.weight", "model.embed_tokens.weight", None, [0, 1, 100, 49151]),
        ("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", n_head, [0, 1, 31, 32, 33, 63, 64, 575]),
        ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", n_kv, [0, 1, 32, 63, 100, 191]),
        ("blk.7.ffn_down.weight", "model.layers.7.mlp.down_proj.weight", None, [0, 575]),
        ("blk.29.attn_v.weight", "model.layers.29.self_attn.v_proj.weight", None, [5]),
        ("output_norm.weight", "model.norm.weight", None, None),
    ]
    spots = []
    for gname, hname, heads, rows in picks:
        full = hf_rows(gname, heads)
        if full.ndim == 1:
            spots.append({"name": hname, "row": -1, "cols": list(range(8)),
                          "values": [float(x) for x in full[:8]]})
            continue
        for row in rows:
            cols = [0, 1, 2, 31, 32, full.shape[1] - 1]
            spots.append({"name": hname, "row": row, "cols": cols,
                          "values": [float(full[row, c]) for c in cols]})
    with open(os.path.join(OUT, "smollm2_spot.json"), "w") as f:
        json.dump(spots, f, indent=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(1234)
    make_safetensors()
    make_tiny_llama(rng)
    make_tiny_qwen2(rng)
    make_tiny_qwen2(rng, "tiny_unknown_pre.gguf", pre="no-such-split")
    make_smollm2_spot()
    make_tiny_llama31(np.random.default_rng(31))


if __name__ == "__main__":
    main()
