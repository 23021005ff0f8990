"""A fetched real model served as a new user would serve it: `scripts/fetch_model.sh NAME`, then
`inferscale serve --model models/NAME.gguf`, asked through the official `openai` client. The
chat prompt comes from the file's own chat template (the Jinja interpreter); the answer must be
the right one, which a wrong template, tokenizer or weight type would not give. Each model runs
where its file is in INFERSCALE_MODELS (scripts/setup.sh --tests fetches the 0.5B)."""
import os

import openai
import pytest

from server_process import Server

MODELS_DIR = os.environ.get("INFERSCALE_MODELS", "models")


@pytest.fixture(scope="module", params=["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"])
def served(request, tmp_path_factory):
    path = os.path.join(MODELS_DIR, request.param + ".gguf")
    if not os.path.exists(path):
        pytest.skip(f"{path} missing: scripts/fetch_model.sh {request.param}")
    server = Server(tmp_path_factory.mktemp(request.param), "--max-context", "1024",
                    "--kv-tokens", "4096", model=path)
    yield server, openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    server.stop()


def test_the_served_model_answers_through_the_openai_client(served):
    server, client = served
    model_id = client.models.list().data[0].id
    reply = client.chat.completions.create(
        model=model_id, temperature=0, max_tokens=24,
        messages=[{"role": "user", "content": "What is the capital of France? One word."}])
    answer = reply.choices[0].message.content
    assert "Paris" in answer, answer
    assert reply.usage.prompt_tokens > 10  # the template's system prompt and turn markup
    code = client.chat.completions.create(
        model=model_id, temperature=0, max_tokens=64,
        messages=[{"role": "user",
                   "content": "Write a Python function add(a, b) that returns a + b. Code only."}])
    assert "def add(a, b)" in code.choices[0].message.content, code.choices[0].message.content
