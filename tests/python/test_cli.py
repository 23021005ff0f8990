"""The inferscale CLI as a user runs it: the bundled model answers, and bad model files or bad
flags end in a one-line error and a non-zero exit, never a crash."""
import json
import os
import shutil
import struct
import subprocess

import pytest

import gguf_bytes as gb

BIN = os.path.join(os.environ.get("INFERSCALE_BIN", "build/bin"), "inferscale")
MODEL = os.path.join(os.environ.get("INFERSCALE_MODELS", "models"), "SmolLM2-135M-Instruct.Q4_1.gguf")
GOLDEN = os.path.join(os.environ.get("INFERSCALE_FIXTURES", "tests/fixtures"), "golden", "llama_gqa")

needs_model = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")


def run(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def assert_clean_failure(res, fragment):
    assert res.returncode == 1, (res.returncode, res.stderr)  # 1: our error, not a signal
    assert res.stderr.startswith("error: "), res.stderr
    assert fragment in res.stderr, res.stderr


@needs_model
def test_generate_json_is_greedy_and_repeatable():
    args = ("generate", "--model", MODEL, "--prompt", "The capital of France is",
            "--max-tokens", "8", "--json")
    a, b = run(*args), run(*args)
    assert a.returncode == 0, a.stderr
    out = json.loads(a.stdout)
    assert out == json.loads(b.stdout)
    assert len(out["token_ids"]) == 8 and out["finish_reason"] == "length"
    assert "Paris" in out["text"]


@needs_model
def test_chat_one_shot_answers():
    res = run("chat", "--model", MODEL, "--message",
              "What is the capital of France? Answer in one word.",
              "--max-tokens", "32")
    assert res.returncode == 0, res.stderr
    assert "Paris" in res.stdout


@needs_model
def test_structured_output_flags(tmp_path):
    """--grammar, --json-schema and --json-object constrain generate and chat as the server's
    grammar and response_format do; a bad schema or two formats are a clean failure."""
    gbnf = tmp_path / "yes_no.gbnf"
    gbnf.write_text('root ::= ("yes" | "no") "."\n')
    res = run("generate", "--model", MODEL, "--prompt", "Is the sky green?", "--grammar", str(gbnf),
              "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["text"] in ("yes.", "no.") and out["finish_reason"] == "stop"
    schema = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]},
                                               "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    schema_file = tmp_path / "city.json"
    schema_file.write_text(json.dumps(schema))
    res = run("chat", "--model", MODEL, "--message", "Describe the capital of France.",
              "--json-schema", str(schema_file), "--max-tokens", "64")
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)
    assert list(answer) == ["city", "population"] and answer["city"] in ("Paris", "Rome")
    assert isinstance(answer["population"], int)
    res = run("chat", "--model", MODEL, "--message", "Hi", "--json-object", "--max-tokens", "48")
    assert res.returncode == 0 and res.stdout.lstrip().startswith("{"), res.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "array", "uniqueItems": True}))
    assert_clean_failure(run("generate", "--model", MODEL, "--prompt", "x", "--json-schema",
                             str(bad)), "uniqueItems")
    assert run("generate", "--model", MODEL, "--prompt", "x", "--json-object", "--grammar",
               str(gbnf)).returncode != 0


@needs_model
def test_chat_interactive_reads_stdin():
    res = subprocess.run([BIN, "chat", "--model", MODEL, "--max-tokens", "16"],
                         input="Say hello.\n\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip()


@needs_model
def test_chat_template_file_replaces_the_models(tmp_path):
    fixed = tmp_path / "fixed.jinja"
    fixed.write_text("{% for m in messages %}{% endfor %}The capital of France is")
    chat = run("chat", "--model", MODEL, "--chat-template", str(fixed), "--message", "Hi",
               "--max-tokens", "8", "--temperature", "0")
    generate = run("generate", "--model", MODEL, "--prompt", "The capital of France is",
                   "--max-tokens", "8", "--temperature", "0", "--json")
    assert chat.returncode == 0, chat.stderr
    assert "Paris" in chat.stdout
    assert chat.stdout.strip() == json.loads(generate.stdout)["text"].strip()


# Templates the fuzzer found to crash the parser: now a parse error at load.
@needs_model
@pytest.mark.parametrize("source,fragment", [
    ("{{ 99999999999999999999 }}", "integer literal 99999999999999999999 does not fit"),
    ("{{ '\\xZZ' }}", "truncated \\x escape"),
])
def test_fuzzed_chat_template_fails_at_load(tmp_path, source, fragment):
    bad = tmp_path / "fuzzed.jinja"
    bad.write_text(source)
    assert_clean_failure(run("chat", "--model", MODEL, "--chat-template", str(bad), "--message", "Hi"),
                         fragment)


@needs_model
def test_unsupported_chat_template_fails_at_load(tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ bos_token }}\n{{ messages | frobnicate }}")
    assert_clean_failure(run("chat", "--model", MODEL, "--chat-template", str(bad), "--message", "Hi"),
                         "chat template line 2: unsupported filter 'frobnicate'")


@needs_model
def test_tokenize_prints_ids():
    res = run("tokenize", "--model", MODEL, "Hello world")
    assert res.returncode == 0, res.stderr
    assert [int(x) for x in res.stdout.split()] == [19556, 905]


@needs_model
def test_stop_string_cuts_output():
    res = run("generate", "--model", MODEL, "--prompt", "Count: 1, 2, 3, 4,", "--max-tokens", "24",
              "--stop", "7", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert "7" not in out["text"] and out["finish_reason"] == "stop"


def test_missing_model_file():
    assert_clean_failure(run("generate", "--model", "/nonexistent/model.gguf", "--prompt", "x"),
                         "/nonexistent/model.gguf")


@needs_model
@pytest.mark.parametrize("fraction", [0.0001, 0.01, 0.5, 0.999])
def test_truncated_gguf(tmp_path, fraction):
    data = open(MODEL, "rb").read()
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(data[: int(len(data) * fraction)])
    res = run("generate", "--model", str(bad), "--prompt", "x")
    assert res.returncode == 1 and res.stderr.startswith("error: "), res.stderr


def test_corrupt_gguf(tmp_path):
    bad = tmp_path / "corrupt.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(4096))
    res = run("generate", "--model", str(bad), "--prompt", "x")
    assert res.returncode == 1 and res.stderr.startswith("error: "), res.stderr


# Hand-made GGUF files that lie about their sizes: each must be refused before anything that big
# is allocated or read.
ARCH = gb.kv_string("general.architecture", "llama")
HOSTILE_GGUF = {
    "huge_tensor_count": gb.header(2**63, 1) + ARCH,
    "huge_kv_count": gb.header(0, 2**64 - 1) + ARCH,
    "huge_key_length": gb.header(0, 1) + struct.pack("<Q", 2**62) + b"general",
    "huge_string_array": gb.header(0, 2) + ARCH + gb.string("tokenizer.ggml.tokens") +
    struct.pack("<IIQ", gb.ARRAY, gb.STRING, 2**60),
    "deeply_nested_arrays": gb.header(0, 2) + ARCH + gb.string("x") + struct.pack("<I", gb.ARRAY) +
    struct.pack("<IQ", gb.ARRAY, 1) * 64 + struct.pack("<IQ", gb.U32, 0),
    "huge_dims": gb.header(1, 1) + ARCH + gb.tensor_info("token_embd.weight", [2**40, 2**40]),
    "too_many_dims": gb.header(1, 1) + ARCH + gb.tensor_info("token_embd.weight", [1] * 64),
    "unknown_tensor_type": gb.header(1, 1) + ARCH + gb.tensor_info("token_embd.weight", [32], 999),
    "offset_past_end": gb.header(1, 1) + ARCH + gb.tensor_info("token_embd.weight", [8], 0, 2**63),
    "zero_alignment": gb.header(0, 2) + ARCH + gb.kv_u32("general.alignment", 0),
    "odd_alignment": gb.header(0, 2) + ARCH + gb.kv_u32("general.alignment", 3),
    "unknown_version": gb.header(0, 1, version=99) + ARCH,
}


@pytest.mark.parametrize("command", ["generate", "serve"])
@pytest.mark.parametrize("name", sorted(HOSTILE_GGUF))
def test_hostile_gguf(tmp_path, command, name):
    bad = tmp_path / f"{name}.gguf"
    bad.write_bytes(HOSTILE_GGUF[name] + bytes(64))
    args = ("--prompt", "x") if command == "generate" else ("--port", "0", "--no-memory")
    res = run(command, "--model", str(bad), *args, timeout=60)
    assert_clean_failure(res, str(bad))


# Fields of the bundled model overwritten with all-ones bytes: counts, lengths, a tensor's shape,
# type and offset.
DAMAGED_FIELDS = {"tensor_count": 8, "kv_count": 8, "first_key_length": 8,
                  "tensor_name_length": 8, "tensor_n_dims": 4, "tensor_dim0": 8,
                  "tensor_type": 4, "tensor_offset": 8}


@needs_model
@pytest.mark.parametrize("field", sorted(DAMAGED_FIELDS))
def test_damaged_gguf_header(tmp_path, field):
    data = bytearray(open(MODEL, "rb").read())
    at = gb.field_offsets(data)[field]
    data[at:at + DAMAGED_FIELDS[field]] = b"\xff" * DAMAGED_FIELDS[field]
    bad = tmp_path / "damaged.gguf"
    bad.write_bytes(bytes(data))
    command = "serve" if field.startswith("tensor_") else "generate"
    args = ("--port", "0", "--no-memory") if command == "serve" else ("--prompt", "x")
    assert_clean_failure(run(command, "--model", str(bad), *args, timeout=60), "damaged.gguf")


@needs_model
@pytest.mark.parametrize("size", [3, 23, 4096, 1 << 20, 1 << 22])
def test_gguf_cut_short_at_serve(tmp_path, size):
    bad = tmp_path / "short.gguf"
    with open(MODEL, "rb") as f:
        bad.write_bytes(f.read(size))
    assert_clean_failure(run("serve", "--model", str(bad), "--port", "0", "--no-memory",
                             timeout=60), "short.gguf")


def test_unknown_pre_tokenizer_is_refused():
    # tools/make_loader_fixtures.py: a tiny qwen2 GGUF whose tokenizer.ggml.pre no split matches.
    model = os.path.join(os.environ.get("INFERSCALE_FIXTURES", "tests/fixtures"), "loader",
                         "tiny_unknown_pre.gguf")
    assert_clean_failure(run("generate", "--model", model, "--prompt", "x"),
                         "unknown pre-tokenizer type 'no-such-split'")


def copy_golden(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(GOLDEN, model)
    return model


def test_unknown_architecture(tmp_path):
    model = copy_golden(tmp_path)
    cfg = json.loads((model / "config.json").read_text())
    cfg["architectures"] = ["GPTNeoXForCausalLM"]
    cfg["model_type"] = "gpt_neox"
    (model / "config.json").write_text(json.dumps(cfg))
    assert_clean_failure(run("generate", "--model", str(model), "--prompt", "x"), "GPTNeoX")


def test_bad_config_field(tmp_path):
    model = copy_golden(tmp_path)
    cfg = json.loads((model / "config.json").read_text())
    cfg["hidden_size"] = "wide"
    (model / "config.json").write_text(json.dumps(cfg))
    assert_clean_failure(run("generate", "--model", str(model), "--prompt", "x"), "hidden_size")


def test_config_not_json(tmp_path):
    model = copy_golden(tmp_path)
    (model / "config.json").write_text("{ not json")
    res = run("generate", "--model", str(model), "--prompt", "x")
    assert res.returncode == 1 and res.stderr.startswith("error: "), res.stderr


def test_truncated_safetensors(tmp_path):
    model = copy_golden(tmp_path)
    st = model / "model.safetensors"
    st.write_bytes(st.read_bytes()[:-100])
    res = run("generate", "--model", str(model), "--prompt", "x")
    assert res.returncode == 1 and res.stderr.startswith("error: "), res.stderr


@needs_model
def test_bad_sampling_flag():
    assert_clean_failure(run("generate", "--model", MODEL, "--prompt", "x", "--top-p", "0"),
                         "top_p")


def test_gpu_memory_utilization_out_of_range():
    for value in ("0", "1.5", "-0.2"):
        assert_clean_failure(run("serve", "--gpu-memory-utilization", value),
                             "--gpu-memory-utilization must be in (0, 1]")


@needs_model
def test_unknown_device():
    assert_clean_failure(run("generate", "--model", MODEL, "--prompt", "x", "--device", "tpu"),
                         "unknown device 'tpu'")


@needs_model
def test_cuda_device_without_cuda_or_gpu():
    res = run("generate", "--model", MODEL, "--prompt", "x", "--max-tokens", "2",
              "--device", "cuda")
    if res.returncode == 0:
        pytest.skip("this build has CUDA and the machine a GPU")
    # A CPU-only build says so; a CUDA build on a machine without a GPU names the runtime error.
    assert_clean_failure(res, "device cuda: ")


def tiny_config(tmp_path, vocab_size=49152):
    """A Llama config.json small enough for the CPU whose vocabulary holds SmolLM2's ids."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": vocab_size, "max_position_embeddings": 256,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@needs_model
def test_random_weights_use_the_config_shape_and_the_model_tokenizer(tmp_path):
    cfg = tiny_config(tmp_path)
    args = ("generate", "--model", MODEL, "--random-weights", cfg, "--prompt",
            "The capital of France is", "--max-tokens", "6", "--ignore-eos", "--json")
    a, b = run(*args), run(*args)
    assert a.returncode == 0, a.stderr
    out = json.loads(a.stdout)
    assert out == json.loads(b.stdout)  # seeded: the same weights every run
    # The prompt is tokenized by the bundled model's tokenizer.
    assert out["prompt_token_ids"] == json.loads(
        run("generate", "--model", MODEL, "--prompt", "The capital of France is",
            "--max-tokens", "1", "--json").stdout)["prompt_token_ids"]
    assert len(out["token_ids"]) == 6 and all(0 <= t < 49152 for t in out["token_ids"])


@needs_model
def test_random_weights_in_the_q4_k_m_mix(tmp_path):
    """--quant q4_k_m makes the random matrices K-quant blocks: seeded, and not the dense run."""
    cfg = json.loads(open(tiny_config(tmp_path)).read())
    cfg.update({"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4})
    path = tmp_path / "k.json"
    path.write_text(json.dumps(cfg))
    args = ("generate", "--model", MODEL, "--random-weights", str(path), "--prompt", "Hello there",
            "--max-tokens", "6", "--ignore-eos", "--json")
    a, b = run(*args, "--quant", "q4_k_m"), run(*args, "--quant", "Q4_K_M")
    assert a.returncode == 0, a.stderr
    assert json.loads(a.stdout)["token_ids"] == json.loads(b.stdout)["token_ids"]
    assert json.loads(a.stdout)["token_ids"] != json.loads(run(*args).stdout)["token_ids"]
    # The blocks need rows of whole 256-element super-blocks; other errors are named too.
    assert_clean_failure(run("generate", "--model", MODEL, "--random-weights", tiny_config(tmp_path),
                             "--quant", "q4_k_m", "--prompt", "x"), "multiples of 256")
    assert_clean_failure(run("generate", "--model", MODEL, "--random-weights", str(path),
                             "--quant", "q3_k_s", "--prompt", "x"), "unknown weight quantization")
    assert_clean_failure(run("generate", "--model", MODEL, "--quant", "q4_k_m", "--prompt", "x"),
                         "--quant needs --random-weights")


@needs_model
def test_random_weights_config_errors(tmp_path):
    assert_clean_failure(run("generate", "--model", MODEL, "--prompt", "x", "--random-weights",
                             str(tmp_path / "missing.json")), "missing.json")
    # Prompt ids the random model's vocabulary does not have are refused, not looked up.
    cfg = tiny_config(tmp_path, vocab_size=64)
    assert_clean_failure(run("generate", "--model", MODEL, "--random-weights", cfg, "--prompt",
                             "The capital of France is"), "outside the vocabulary")


@needs_model
def test_a_sliding_window_caps_the_context(tmp_path):
    """No windowed attention here: a Mistral model with an 8-token window serves at most 8
    tokens of context (where full attention is exact) and refuses longer prompts."""
    cfg = json.loads(open(tiny_config(tmp_path)).read())
    cfg.update({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 8})
    path = tmp_path / "mistral.json"
    path.write_text(json.dumps(cfg))
    prompt = "The capital of France is a city on the river Seine"
    res = run("generate", "--model", MODEL, "--random-weights", str(path), "--prompt", prompt)
    assert res.returncode == 1, res.stderr
    assert "capped at the model's sliding window of 8 tokens" in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "context holds 8" in last, res.stderr
    ok = run("generate", "--model", MODEL, "--random-weights", str(path), "--prompt", "Hi",
             "--max-tokens", "2", "--ignore-eos", "--json")
    assert ok.returncode == 0, ok.stderr
