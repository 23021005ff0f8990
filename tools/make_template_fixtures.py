#!/usr/bin/env python3
"""Expected chat-template renderings for tests/template: transformers' own renderer.

For every template in tests/fixtures/templates/*.jinja (the models' original Hugging Face
templates, plus two written to exercise more constructs) and every conversation below, renders with add_generation_prompt false and true
through transformers.utils.chat_template_utils.render_jinja_template, the function behind
apply_chat_template(tokenize=False), and writes tests/fixtures/templates/expected.json.
Short snippets of the constructs templates use (loops, namespaces, macros, filters, tests,
methods, whitespace control) are rendered the same way. A conversation the template rejects (raise_exception, or a type error such as adding None
to a string) is recorded as an error.

The SmolLM2 and Qwen2.5-Coder templates are refreshed from the GGUF files in models/ when
those are present.

Needs: pip install transformers jinja2 gguf (no PyTorch).
"""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "templates")
MODELS = os.path.join(ROOT, "models")

# name -> (special tokens as the model's tokenizer_config passes them, extra variables)
TEMPLATES = {
    "llama3_1": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, {}),
    # Llama 3.2 puts today's date in the system header unless date_string is given.
    "llama3_2": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
                 {"date_string": "26 Jul 2024"}),
    "mistral_v0_3": ({"bos_token": "<s>", "eos_token": "</s>"}, {}),
    "qwen2_5": ({"bos_token": None, "eos_token": "<|im_end|>"}, {}),
    "qwen2_5_coder": ({"bos_token": None, "eos_token": "<|im_end|>"}, {}),
    "smollm2": ({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}, {}),
    "gemma3": ({"bos_token": "<bos>", "eos_token": "<eos>"}, {}),
    # Not a model's: written for these tests, one for the whitespace rules (trim_blocks,
    # lstrip_blocks, -/+ modifiers, comments), one in the style of newer tool-calling templates
    # (reverse scans with a namespace, str methods, selectattr/map, loop.cycle).
    "constructs_whitespace": ({"bos_token": "<s>", "eos_token": "</s>"}, {}),
    "constructs_reasoning_tools": ({"bos_token": "<s>", "eos_token": "</s>"}, {}),
}

GGUF_TEMPLATES = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2_5_coder": "qwen2.5-coder-1.5b.gguf",
}

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city (température, vent).",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}},
]


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# Messages carry their keys in the order the C++ ChatTemplate builds them.
CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello!"}],
    "with_system": [{"role": "system", "content": "You are a terse assistant."},
                    {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "user", "content": "Hi, I'm Caroline."},
                   {"role": "assistant", "content": "Hello Caroline! How can I help?"},
                   {"role": "user", "content": "  What did I say my name was?  "}],
    "system_multi_turn": [{"role": "system", "content": "  Remember facts about the user.\n"},
                          {"role": "user", "content": "I love hiking."},
                          {"role": "assistant", "content": " Noted: you love hiking. "},
                          {"role": "user", "content": "中文？ 😀 \"quoted\" \\ back\tslash"}],
    "tool_call": [{"role": "system", "content": "You can call tools."},
                  {"role": "user", "content": "What's the weather in Paris?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [call("call00001", "get_weather",
                                       {"city": "Paris", "unit": "celsius"})]},
                  {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}",
                   "tool_call_id": "call00001", "name": "get_weather"},
                  {"role": "assistant", "content": "It is 21.5 °C and clear in Paris."},
                  {"role": "user", "content": "And 2 + 3.5?"}],
    "parallel_tool_calls": [{"role": "user", "content": "Add 1 and 2, and 3 and 4."},
                            {"role": "assistant", "content": None,
                             "tool_calls": [call("call00002", "add", {"a": 1, "b": 2}),
                                            call("call00003", "add", {"a": 3, "b": 4})]},
                            {"role": "tool", "content": "3", "tool_call_id": "call00002"},
                            {"role": "tool", "content": "7", "tool_call_id": "call00003"}],
}

# (conversation, with tools)
CORPUS = [("single_user", False), ("with_system", False), ("multi_turn", False),
          ("system_multi_turn", False), ("single_user", True), ("with_system", True),
          ("tool_call", True), ("parallel_tool_calls", True)]


# Constructs real templates use, each rendered alone over SNIPPET_CONTEXT.
SNIPPETS = [
    "{% for x in items %}{{ loop.index }}/{{ loop.revindex0 }}{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.previtem|default('-') }},{% endfor %}",
    "{% set ns = namespace(n=0, seen=[]) %}{% for x in items if x is odd %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}",
    "{% macro tag(name, body='') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}{{ tag('a') }}{{ tag('b', body=1 + 2) }}",
    "{{ items[1:] }} {{ items[::-1] }} {{ items[-1] }} {{ 'héllo'[1:3] }} {{ 'abc'|length }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}",
    "{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'x y  z'.split() }}|{{ 'Hello'.startswith(('He', 'x')) }}|{{ 'abc'.upper() ~ 1.0 }}",
    "{{ data|tojson }}|{{ data|tojson(indent=2) }}|{{ data|tojson(separators=(',', ':'), sort_keys=true) }}",
    "{{ data.b }} {{ data['c'] }} {{ data.get('z', 'none') }} {{ data.keys()|list }} {{ 'b' in data }} {{ none }} {{ true }} {{ 1e20 }} {{ 0.1 + 0.2 }}",
    "{%- for k, v in data.items() %}\n  {{ k }}={{ v -}}\n{% endfor %}\n  {% if true %}\n    yes\n  {% endif %}\n{# c #}\nend",
    "{{ items|select('odd')|list }} {{ people|selectattr('age', 'gt', 30)|map(attribute='name')|join(', ') }} {{ people|map(attribute='name')|map('upper')|list }} {{ people|rejectattr('admin')|list|length }}",
    "{{ 'a' if items|length > 2 else 'b' }} {{ items|first }} {{ items|last }} {{ items|sum }} {{ items|max }} {{ ['b','A','c']|sort }} {{ undefined_var is defined }} {{ none is none }} {{ 3 is divisibleby 3 }} {{ 'x' is string }}",
    "{% for x in items %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% else %}empty{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}",
    "{% set t %}inner {{ items|length }}{% endset %}[{{ t }}] {{ \"it's\" }} {{ {'k': \"it's\"} }} {{ range(3)|list }} {{ dict(a=1) }}",
    "{{ ' \u3000x é\u00a0'|trim }}|{{ 'a\u3000b  ü\u2003c'.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'x'.rstrip() ~ 'xyx'.strip('x') }}",
    "{% generation %}gen {{ 1 }}{% endgeneration %} {{ 'é'|tojson }} {{ 'é'|tojson(ensure_ascii=true) }} {{ 'a\"b\\n'|tojson }}",
]
SNIPPET_CONTEXT = {
    "items": [1, 2, 3, 4, 5], "data": {"b": 1, "a": [1.5, None, True], "c": "x"},
    "people": [{"name": "ann", "age": 31, "admin": True}, {"name": "bob", "age": 25, "admin": False}]}


def render_snippets():
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return [{"source": source, "rendered": _compile_jinja_template(source).render(**SNIPPET_CONTEXT)}
            for source in SNIPPETS]


def refresh_gguf_templates():
    try:
        import gguf
    except ImportError:
        print("gguf not installed: GGUF templates kept as committed")
        return
    for name, file in GGUF_TEMPLATES.items():
        path = os.path.join(MODELS, file)
        if not os.path.exists(path):
            continue
        field = gguf.GGUFReader(path).fields["tokenizer.chat_template"]
        with open(os.path.join(OUT, name + ".jinja"), "w") as f:
            f.write(field.contents())


def main():
    from jinja2.exceptions import TemplateError
    from transformers.utils.chat_template_utils import render_jinja_template

    refresh_gguf_templates()
    cases = []
    for name, (special, extra) in TEMPLATES.items():
        with open(os.path.join(OUT, name + ".jinja")) as f:
            source = f.read()
        for conversation, with_tools in CORPUS:
            for gen in (False, True):
                case = {"template": name, "conversation": conversation, "tools": with_tools,
                        "add_generation_prompt": gen, "extra": extra}
                try:
                    rendered = render_jinja_template(
                        conversations=[CONVERSATIONS[conversation]], chat_template=source,
                        tools=TOOLS if with_tools else None, add_generation_prompt=gen,
                        **special, **extra)
                    case["rendered"] = rendered[0][0]
                except (TemplateError, TypeError) as e:
                    case["error"] = f"{type(e).__name__}: {e}"
                cases.append(case)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"special_tokens": {n: s for n, (s, _) in TEMPLATES.items()},
                   "tools": TOOLS, "conversations": CONVERSATIONS, "cases": cases,
                   "snippet_context": SNIPPET_CONTEXT, "snippets": render_snippets()},
                  f, indent=1, ensure_ascii=False)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print(f"wrote {len(cases)} cases ({errors} rejected by their template)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
