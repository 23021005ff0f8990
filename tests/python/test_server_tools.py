"""OpenAI tool calling against the real `inferscale serve` binary through the official `openai`
client: request validation (a 400 naming the field), the history of calls and results, the
generic format for templates without tools (the bundled SmolLM2), and with Qwen2.5-Coder-0.5B
(whose template renders tools) real calls, streamed calls reassembled by the client's own
stream accumulation, a tool-result turn, and the rendered prompt against transformers'."""
import json
import os

import httpx
import openai
import pytest

from server_process import MODEL, MODEL_ID, Server

MODELS_DIR = os.environ.get("INFERSCALE_MODELS", "models")
QWEN = os.path.join(MODELS_DIR, "qwen2.5-coder-0.5b.gguf")

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "description": "The city name"}},
                   "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_abc", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_abc", "content": "Sunny, 21 degrees Celsius."}


def start(tmp_path_factory, name, model):
    server = Server(tmp_path_factory.mktemp(name), "--max-context", "2048", model=model)
    return server, openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    if not os.path.exists(MODEL):
        pytest.skip("run scripts/setup.sh first")
    server, client = start(tmp_path_factory, "smol", MODEL)
    yield server, client
    server.stop()


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    if not os.path.exists(QWEN):
        pytest.skip(f"{QWEN} missing: scripts/fetch_model.sh qwen2.5-coder-0.5b")
    server, client = start(tmp_path_factory, "qwen", QWEN)
    yield server, client
    server.stop()


def chat(client, messages, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 64)
    return client.chat.completions.create(model=client.models.list().data[0].id,
                                          messages=messages, **kw)


def bad_param(call):
    with pytest.raises(openai.BadRequestError) as e:
        call()
    return e.value.body["param"]


def tokenize(server, body):
    r = httpx.post(server.url + "/tokenize", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def detokenize(server, tokens):
    return httpx.post(server.url + "/detokenize", json={"tokens": tokens}, timeout=60).json()["prompt"]


def streamed(client, messages, **kw):
    """The answer streamed, reassembled by the openai client's own accumulation."""
    with client.chat.completions.stream(model=client.models.list().data[0].id,
                                        messages=messages, temperature=0,
                                        max_tokens=kw.pop("max_tokens", 64), **kw) as stream:
        for _ in stream:
            pass
        # The accumulated snapshot: get_final_completion() refuses a "length" finish.
        return stream.current_completion_snapshot


def test_malformed_tool_requests_are_400s_naming_the_field(smol):
    _, c = smol
    fn = WEATHER["function"]
    cases = [
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": []}, "tools"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"description": "x"}}]},
         "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "has space"}}]},
         "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {**fn, "parameters": "object"}}]},
         "tools[0].function.parameters"),
        ({"tools": [WEATHER, WEATHER]}, "tools[1].function.name"),
        ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
         "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ]
    for extra, param in cases:
        assert bad_param(lambda: chat(c, ASK, extra_body=extra)) == param, extra
    history = [
        (ASK + [CALL, {"role": "tool", "content": "21"}], "messages[2].tool_call_id"),
        (ASK + [{**CALL, "tool_calls": [{"id": "a", "type": "function",
                                         "function": {"name": "get_weather",
                                                      "arguments": {"city": "Paris"}}}]}],
         "messages[1].tool_calls[0].function.arguments"),
        (ASK + [{**CALL, "tool_calls": [{"id": "a", "type": "function",
                                         "function": {"name": "get_weather",
                                                      "arguments": "{not json"}}]}],
         "messages[1].tool_calls[0].function.arguments"),
        ([{**ASK[0], "tool_calls": CALL["tool_calls"]}], "messages[0].tool_calls"),
        (ASK + [{"role": "assistant", "content": None}], "messages[1].content"),
    ]
    for messages, param in history:
        assert bad_param(lambda: chat(c, messages)) == param, messages


def test_generic_format_and_history_render_on_a_template_without_tools(smol):
    server, c = smol
    messages = ASK + [CALL, RESULT, {"role": "user", "content": "Thanks!"}]
    text = detokenize(server, tokenize(server, {"messages": messages, "tools": [WEATHER]}))
    assert "You can call these tools" in text
    assert '{"name": "get_weather", "description": "Get the current weather in a city."' in text
    assert '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}' in text
    assert ('{"tool_results": [{"tool_call_id": "call_abc", "name": "get_weather", '
            '"content": "Sunny, 21 degrees Celsius."}]}') in text
    reply = chat(c, messages, tools=[WEATHER])
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    # tool_choice "none": the tools are not in the prompt.
    plain = chat(c, ASK, max_tokens=4)
    none = chat(c, ASK, max_tokens=4, tools=[WEATHER], tool_choice="none")
    auto = chat(c, ASK, max_tokens=4, tools=[WEATHER])
    assert none.usage.prompt_tokens == plain.usage.prompt_tokens < auto.usage.prompt_tokens
    assert none.choices[0].message.content == plain.choices[0].message.content


def test_streamed_answers_equal_whole_ones(smol):
    _, c = smol
    for kw in ({"tools": [WEATHER]}, {"tools": [WEATHER], "tool_choice": "required"},
               {"tools": [WEATHER], "parallel_tool_calls": False}):
        whole = chat(c, ASK, max_tokens=48, **kw).choices[0]
        stream = streamed(c, ASK, max_tokens=48, **kw).choices[0]
        assert stream.finish_reason == whole.finish_reason, kw
        assert stream.message.content == whole.message.content, kw
        calls = lambda m: [(t.function.name, t.function.arguments) for t in m.tool_calls or []]
        assert calls(stream.message) == calls(whole.message), kw
        if whole.message.tool_calls:
            assert whole.finish_reason == "tool_calls"
            assert all(t.id.startswith("call_") for t in whole.message.tool_calls)


def test_qwen_calls_the_tool(qwen):
    _, c = qwen
    reply = chat(c, ASK, tools=[WEATHER], tool_choice="auto", max_tokens=100)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


def test_qwen_streamed_call_is_reassembled_by_the_client(qwen):
    _, c = qwen
    final = streamed(c, ASK, tools=[WEATHER], max_tokens=100).choices[0]
    assert final.finish_reason == "tool_calls"
    (call,) = final.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # The raw chunks: role first, then the call in one delta, then the finish.
    chunks = list(c.chat.completions.create(model=c.models.list().data[0].id, messages=ASK,
                                            tools=[WEATHER], temperature=0, max_tokens=100,
                                            stream=True))
    deltas = [ch.choices[0].delta.tool_calls for ch in chunks if ch.choices[0].delta.tool_calls]
    assert len(deltas) == 1 and deltas[0][0].index == 0
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def forced_calls_parse(c, max_tokens):
    """tool_choice "required" and a named function, streamed and not: constrained decoding
    makes every answer one call of the tool whose arguments parse and carry the required
    field."""
    other = {"type": "function", "function": {
        "name": "get_time", "description": "The time in a time zone.",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                       "required": ["zone"]}}}
    for choice, names in (("required", {"get_weather", "get_time"}),
                          ({"type": "function", "function": {"name": "get_time"}}, {"get_time"})):
        for stream in (False, True):
            kw = dict(tools=[WEATHER, other], tool_choice=choice, max_tokens=max_tokens,
                      parallel_tool_calls=False)
            final = (streamed(c, ASK, **kw) if stream else chat(c, ASK, **kw)).choices[0]
            assert final.finish_reason == "tool_calls", (choice, stream, final)
            (call,) = final.message.tool_calls
            assert call.function.name in names
            args = json.loads(call.function.arguments)
            assert isinstance(args["city" if call.function.name == "get_weather" else "zone"], str)


def test_required_and_named_choices_force_a_parseable_call(smol):
    # SmolLM2's template renders no tools: the generic format, and the 135M model ignores its
    # instruction unless decoding forces the call.
    forced_calls_parse(smol[1], 96)


def test_qwen_required_and_named_choices_force_the_call(qwen):
    forced_calls_parse(qwen[1], 100)


def test_forced_call_with_response_format_is_a_400(smol):
    _, c = smol
    assert bad_param(lambda: chat(c, ASK, tools=[WEATHER], tool_choice="required",
                                  response_format={"type": "json_object"})) == "tool_choice"


def test_tool_result_turn_continues_the_chat(smol):
    _, c = smol
    reply = chat(c, ASK + [CALL, RESULT], tools=[WEATHER], tool_choice="none", max_tokens=32)
    assert reply.choices[0].finish_reason in ("stop", "length")
    assert reply.choices[0].message.content


def test_qwen_tool_result_turn_continues_the_chat(qwen):
    _, c = qwen
    # What the 0.5B model does with the result in context: it answers 200 with a message
    # (content, or calls again; it tends to repeat the call), never an error.
    reply = chat(c, ASK + [CALL, RESULT], tools=[WEATHER], max_tokens=48)
    message = reply.choices[0].message
    assert message.content or message.tool_calls
    # Asked in words after the result, tools declined, it answers from the result.
    follow = ASK + [CALL, RESULT, {"role": "user", "content": "So, what is the weather? One sentence."}]
    text = chat(c, follow, tools=[WEATHER], tool_choice="none", max_tokens=48).choices[0].message
    assert text.tool_calls is None and "21" in text.content, text.content


def test_qwen_tools_run_without_memory(qwen):
    _, c = qwen
    # A user rides along (the server's default memory mode is kv): answered without memory.
    reply = chat(c, ASK, tools=[WEATHER], user="alice", max_tokens=100)
    assert reply.choices[0].finish_reason == "tool_calls"
    assert bad_param(lambda: chat(c, ASK, tools=[WEATHER], user="alice",
                                  extra_body={"memory": {"mode": "kv"}})) == "memory.mode"


def test_qwen_prompt_with_tools_matches_transformers(qwen):
    transformers_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    gguf = pytest.importorskip("gguf")
    server, _ = qwen
    template = gguf.GGUFReader(QWEN).fields["tokenizer.chat_template"].contents()
    call_args = {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "function": {
        "name": "get_weather", "arguments": {"city": "Paris"}}}]}
    for messages in (ASK, ASK + [CALL, RESULT]):
        hf_messages = [call_args if m is CALL else m for m in messages]
        expected = transformers_utils.render_jinja_template(
            conversations=[hf_messages], chat_template=template, tools=[WEATHER],
            add_generation_prompt=True, bos_token=None, eos_token="<|im_end|>")[0][0]
        ours = tokenize(server, {"messages": messages, "tools": [WEATHER]})
        assert detokenize(server, ours) == expected
        assert ours == tokenize(server, {"prompt": expected, "add_special_tokens": False})
