#!/usr/bin/env python3
"""Seeds for fuzz_chat (tests/fuzz_chat.c): chat and prompt/completion records,
malformed ones, whitespace and unicode edge cases, and the built-in Jinja sources.
    python3 tests/data/fuzz/make_chat_seeds.py"""
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat")
M = lambda *p: {"messages": [{"role": r, "content": c} for r, c in p]}
seeds = [
    M(("user", "hi"), ("assistant", "hello")),
    M(("system", "s"), ("user", "u"), ("assistant", "a"), ("user", "u2"), ("assistant", "a2")),
    M(("user", "q"), ("tool", "t1"), ("tool", "t2"), ("assistant", "a")),
    M(("user", " \u3000\u2028x\u00a0 "), ("assistant", "\t\n")),
    M(("system", ""), ("user", "   "), ("assistant", "")),
    M(("assistant", "first"), ("assistant", "second")),
    M(("user", "<|im_end|><|eot_id|><end_of_turn>"), ("assistant", "<|im_start|>assistant")),
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, 3]}]},
    {"messages": [{"role": "user", "content": None}]},
    {"messages": [{"role": "robot", "content": "x"}]},
    {"messages": "not a list"},
    {"prompt": "2+2=", "completion": "4"},
    {"prompt": [{"role": "user", "content": "q"}], "completion": [{"role": "assistant", "content": "a"}]},
    {"prompt": "q", "completion": []},
    {"text": "plain"},
    # reasoning (qwen3): reasoning_content / thinking / reasoning, '<think>' in content, a tool round after the
    # last query, a user message that is a tool response, a reasoning that is not a string
    {"messages": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": "\n<think>\nr\n</think>\n\na</think>b", "reasoning_content": None},
                  {"role": "tool", "content": "t"}, {"role": "assistant", "content": "c", "thinking": "\n\nr2\n"}]},
    {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "<tool_response>x</tool_response>"},
                  {"role": "assistant", "content": "</think>", "reasoning": ""}, {"role": "system", "content": "s2"},
                  {"role": "assistant", "content": "a", "reasoning_content": [1]}]},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": 0.0}]},
    {"messages": []},
    # tool calling (qwen2.5, qwen3): tools, tool_calls with object / string arguments, with and without the
    # function wrapper, a null content, names that are not strings, tool results with tool_call_id / name
    {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"a": [1.5, -0.0, 1e-07, None, True]}}}],
     "messages": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "c1", "function": {"name": "f", "arguments": {"x": "\u2028\"", "y": {"z": []}}}},
                      {"name": 7, "arguments": "{\"raw\": 1}"}, {"function": {}, "name": "g"}]},
                  {"role": "tool", "content": "r", "tool_call_id": "c1", "name": "f"},
                  {"role": "assistant", "content": "a"}]},
    {"tools": "ab", "messages": [{"role": "assistant", "content": "", "tool_calls": "ab"}]},
    # Mistral v3 / tekken: 9-character ids, tool results, tools [] before the last user message, tool_calls []
    {"tools": [], "messages": [{"role": "user", "content": "u"},
                               {"role": "assistant", "content": None, "tool_calls": [
                                   {"id": "abcdefghi", "function": {"name": "f", "arguments": {}}}]},
                               {"role": "tool", "content": "r", "tool_call_id": "abcdefghi"},
                               {"role": "assistant", "content": None, "tool_calls": []}]},
]
os.makedirs(OUT, exist_ok=True)
for i, s in enumerate(seeds):
    with open(os.path.join(OUT, "rec%02d.jsonl" % i), "w", encoding="utf-8") as f:
        f.write(json.dumps(s, ensure_ascii=False))
raw = [b'{"messages":[{"role":"user","content":"\\ud800"}]}', b'{"messages":[', b"\xff\xfe{}", b"[1,2]",
       b'{"messages":[{"role":"user","content":"a\\u0000b"}]}']
# repeated keys in tool arguments (json.loads keeps the first place, the last value), over 16 of them
raw.append(b'{"messages":[{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{'
           + b",".join(b'"k%d":%d' % (j % 5, j) for j in range(40)) + b',"k1":{"a":1,"a":[0.1e1,-0]}}}}]}]}')
for i, b in enumerate(raw):
    with open(os.path.join(OUT, "raw%02d.jsonl" % i), "wb") as f:
        f.write(b)
# the Jinja sources (recognise), from the parity fixtures' first line
fx = os.path.join(os.path.dirname(OUT), "..", "chat", "fixtures.jsonl")
with open(fx, encoding="utf-8") as f:
    for name, src in json.loads(f.readline())["jinja"].items():
        with open(os.path.join(OUT, "jinja_%s.txt" % name), "w", encoding="utf-8") as g:
            g.write(src)
