#!/usr/bin/env python3
"""Builds the tiny golden checkpoints under tests/fixtures/golden/<name>/.

Each checkpoint is a seeded random-weight Hugging Face model (config.json + model.safetensors)
plus what transformers computes for a fixed prompt, so the C++ forward pass can be checked
against the reference implementation:
  logits.bin   [prompt_len, vocab] f32 little-endian, every position of the prompt
  golden.json  prompt ids, 16 greedy tokens, storage dtype, smallest greedy top-1 margin

Weights are first rounded to their storage dtype and the reference runs in float32 on those
rounded values, so the C++ side (which widens bf16/f16 to f32 exactly) sees the same numbers.
Norm weights and biases are randomized too, and the init scale is raised, so that logits are
far from uniform and greedy decoding has no near-ties. Run on CPU; needs torch + transformers.
"""

import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file

PROMPT_LEN = 48
NUM_GREEDY = 16

BASE = dict(
    vocab_size=320,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    initializer_range=0.25,
    bos_token_id=1,
    eos_token_id=2,
    tie_word_embeddings=False,
)

# name -> (config class, model class, overrides, storage dtype)
MODELS = {
    "llama_gqa": ("LlamaConfig", "LlamaForCausalLM",
                  dict(rope_theta=10000.0), torch.float32),
    "llama3_scaled_tied": ("LlamaConfig", "LlamaForCausalLM",
                           dict(num_hidden_layers=3, rope_theta=500000.0,
                                tie_word_embeddings=True,
                                # original context 16 << prompt positions, so all three
                                # frequency bands of the llama3 rule are exercised.
                                rope_scaling=dict(rope_type="llama3", factor=8.0,
                                                  low_freq_factor=1.0, high_freq_factor=4.0,
                                                  original_max_position_embeddings=16)),
                           torch.bfloat16),
    # head_dim 32 != hidden/heads (16) checks that the engine reads head_dim from the config.
    "mistral": ("MistralConfig", "MistralForCausalLM",
                dict(head_dim=32, rope_theta=1000000.0, sliding_window=4096), torch.float16),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM",
              dict(rope_theta=1000000.0, use_sliding_window=False), torch.bfloat16),
}


MIN_MARGIN = 0.02


def build(name, seed, out_root):
    # Seeds are tried in order until the greedy run has no near-tie; the result is deterministic.
    for attempt in range(50):
        result = make(name, seed + 100 * attempt)
        if result[-1] >= MIN_MARGIN:
            return write(name, seed + 100 * attempt, out_root, *result)
    raise RuntimeError(f"{name}: no seed with greedy margin >= {MIN_MARGIN}")


def make(name, seed):
    cfg_cls, model_cls, overrides, dtype = MODELS[name]
    params = dict(BASE)
    params.update(overrides)
    config = getattr(transformers, cfg_cls)(**params)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()

    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif pname.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
        # Round to the storage dtype, compute in f32 on the rounded values.
        for p in model.parameters():
            p.copy_(p.to(dtype).to(torch.float32))

    gen = torch.Generator().manual_seed(seed + 1000)
    prompt = torch.randint(3, config.vocab_size, (1, PROMPT_LEN), generator=gen)

    with torch.no_grad():
        logits = model(prompt).logits[0].float()  # [prompt_len, vocab]
        out = model.generate(prompt, max_new_tokens=NUM_GREEDY, min_new_tokens=NUM_GREEDY,
                             do_sample=False, pad_token_id=0)
        greedy = out[0, PROMPT_LEN:].tolist()
        # Margin between the top two candidates at each greedy step: tiny margins would make
        # the exact-token test depend on summation order.
        full = model(out[:, :-1]).logits[0, PROMPT_LEN - 1:].float()
        top2 = full.topk(2, dim=-1).values
        margin = float((top2[:, 0] - top2[:, 1]).min())
        assert full.argmax(-1).tolist() == greedy, "generate() disagrees with argmax"
    return model, config, dtype, prompt, logits, greedy, margin


def write(name, seed, out_root, model, config, dtype, prompt, logits, greedy, margin):
    d = os.path.join(out_root, name)
    os.makedirs(d, exist_ok=True)
    state = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(d)
    with open(os.path.join(d, "config.json")) as f:
        cfg_json = json.load(f)
    cfg_json.pop("_attn_implementation", None)
    cfg_json.pop("dtype", None)
    cfg_json["torch_dtype"] = str(dtype).replace("torch.", "")
    # transformers 5 writes "rope_parameters"; checkpoints on the Hub (and our loader) use the
    # classic top-level rope_theta + rope_scaling, which transformers still reads.
    rope = cfg_json.pop("rope_parameters", None)
    if rope is not None:
        rope = dict(rope)
        cfg_json["rope_theta"] = rope.pop("rope_theta")
        if rope.get("rope_type", "default") != "default":
            cfg_json["rope_scaling"] = rope
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
    logits.numpy().astype("<f4").tofile(os.path.join(d, "logits.bin"))
    meta = dict(
        name=name,
        seed=seed,
        storage_dtype=str(dtype).replace("torch.", ""),
        prompt=prompt[0].tolist(),
        greedy=greedy,
        logits_shape=[PROMPT_LEN, config.vocab_size],
        logits_abs_max=float(logits.abs().max()),
        greedy_min_margin=margin,
        # What transformers rotates with (llama3 scaling included): [head_dim / 2]
        rope_inv_freq=model.model.rotary_emb.inv_freq.float().tolist(),
        transformers_version=transformers.__version__,
        torch_version=torch.__version__,
    )
    with open(os.path.join(d, "golden.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{name}: dtype={meta['storage_dtype']} |logit|max={meta['logits_abs_max']:.3f} "
          f"greedy margin={margin:.4f} greedy={greedy}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "golden"))
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    torch.set_num_threads(1)
    for i, name in enumerate(MODELS):
        build(name, args.seed + i, args.out)



if __name__ == "__main__":
    main()
