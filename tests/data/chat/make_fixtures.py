#!/usr/bin/env python3
"""Parity fixtures for the chat templates (dataset/chat_template.c, issue 28).

Renders generated conversations through transformers' apply_chat_template
with each built-in's Jinja source and the real tokenizer folders in
../shared/vocab/hf/ (Qwen2 for the ChatML family, Llama 3 for the others that
only need bos/eos), and writes tests/data/chat/fixtures.jsonl: per case the
record, the rendered text, the reference ids and loss mask (or the template's
error). test_chat replays it against ds_chat_render + ds_chat_encode; CI never
needs transformers.

Reference ids: apply_chat_template(messages, tokenize=True). Where a
message's content holds special-token text, transformers turns that text into
the special token; mkshards keeps it text (a user must not be able to forge a
turn), so for those cases the reference is the rendered text split at the
template's own special tokens, text encoded with special-token text as text
(the script checks this splitter equals apply_chat_template on every case
without special-token text in content). Loss mask: the tokens that overlap
each assistant message's rendered content through the end-of-turn string
that follows it (ChatML <|im_end|>, Llama 3 <|eot_id|>, ...), from the fast
tokenizer's offsets. Gemma and Phi-3 special tokens are in neither tokenizer:
their cases check the rendered text only.

    pip install transformers jinja2   # no torch needed
    python3 tests/data/chat/make_fixtures.py [SHARED_DIR]
"""
import json
import os
import random
import sys

import transformers
from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "..", "shared")

# The families' Jinja sources, as dataset/chat_template.c holds them (test_chat
# checks the two are the same string).
T = {}
T["chatml"] = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
               "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
               "{% endif %}")
T["qwen2"] = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
              "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
              "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
              "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
T["qwen2.5"] = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""
T["llama3"] = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
               "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
               "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content "
               "}}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
               "}}{% endif %}")
T["llama2"] = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
               "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false "
               "%}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 "
               "== 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
               "{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
               "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
               "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
               "content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + "
               "' ' + eos_token }}{% endif %}{% endfor %}")
T["mistral"] = ("{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == "
                "0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% "
                "endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif "
                "message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ "
                "raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
T["gemma"] = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
              "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
              "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
              "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role "
              "= 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + "
              "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}"
              "{{'<start_of_turn>model\\n'}}{% endif %}")
T["phi3"] = ("{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\\n' "
             "+ message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + "
             "'<|end|>\\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + "
             "'<|end|>\\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}"
             "{{ eos_token }}{% endif %}")
T["deepseek"] = ("{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ "
                 "bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + "
                 "message['content'] + '\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + "
                 "message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ message['content'] + "
                 "'\\n\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}")

# Mistral's own templates (no copy ships in a package reachable here): the chat_template strings of
# mistralai/Mistral-7B-Instruct-v0.2 as mistralai updated it ('v1', with a system prompt),
# mistralai/Mistral-Large-Instruct-2407 ('v3') and mistralai/Mistral-Nemo-Instruct-2407 ('v3-tekken'), as quoted
# verbatim in llama.cpp's tests/test-chat-template.cpp (commit 03f94f19a2c4c9d039fa1a84838fe3e2110cc28d), where
# they render its reference conversation to the outputs recorded there (checked with transformers 5.25).
T["mistral-v1"] = ("{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n "
    "   {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%"
    "- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == "
    "'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message"
    ", conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%"
    "- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n     "
    "       {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- "
    "else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    "
    "{%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    "
    "{%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exce"
    "ption of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n")
T["mistral-v3"] = ("{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"]"
    " %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
    "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set"
    " user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This b"
    "lock checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns ="
    " namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (messa"
    "ge.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and messag"
    "e.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0)"
    " %}\n            {{- raise_exception(\"After the optional system message, conversation roles must al"
    "ternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns"
    ".index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages"
    " %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == u"
    "ser_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools "
    "%}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", "
    "\"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n     "
    "               {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '"
    "\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojso"
    "n }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n               "
    "         {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n           "
    "     {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n    "
    "            {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n           "
    " {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if "
    "loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n"
    "\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + messa"
    "ge[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls is defined a"
    "nd message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for tool_call i"
    "n message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out"
    "[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n           "
    "     {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n      "
    "      {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not"
    " loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + e"
    "os_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"as"
    "sistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- elif message[\"ro"
    "le\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is def"
    "ined and message.content.content is defined %}\n            {%- set content = message.content.conten"
    "t %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n "
    "       {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not message."
    "tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"To"
    "ol call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '"
    "\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- rais"
    "e_exception(\"Only user and assistant roles are supported, with the exception of an initial optional"
    " system message!\") }}\n    {%- endif %}\n{%- endfor %}\n")
T["mistral-tekken"] = ("{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"]"
    " %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages "
    "%}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set"
    " user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This b"
    "lock checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns ="
    " namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (messa"
    "ge.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and messag"
    "e.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0)"
    " %}\n            {{- raise_exception(\"After the optional system message, conversation roles must al"
    "ternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns"
    ".index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages"
    " %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == u"
    "ser_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- for tool in tools %"
    "}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \""
    "function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n       "
    "             {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"'"
    " }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }"
    "}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                  "
    "      {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n              "
    "  {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n       "
    "         {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%"
    "- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loo"
    "p.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
    "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"c"
    "ontent\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif (message.tool_calls is defined and me"
    "ssage.tool_calls is not none) %}\n        {{- \"[TOOL_CALLS][\" }}\n        {%- for tool_call in mes"
    "sage.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1]"
    " }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                "
    "{{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n           "
    " {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not loop"
    ".last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_to"
    "ken }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"assista"
    "nt\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- elif message[\"role\"] == \"tool_re"
    "sults\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.c"
    "ontent.content is defined %}\n            {%- set content = message.content.content %}\n        {%- "
    "else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_"
    "RESULTS]{\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is def"
    "ined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should "
    "be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + "
    "message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only "
    "user and assistant roles are supported, with the exception of an initial optional system message!\")"
    " }}\n    {%- endif %}\n{%- endfor %}\n")

# Qwen3 (Qwen/Qwen3-0.6B, the family's template): the published copy in published/ (make_published.py takes it
# from the llama-cpp-python 0.3.36 sdist, as its MANIFEST says), so the built-in is the published text itself.
with open(os.path.join(HERE, "published", "Qwen-Qwen3-0.6B.jinja"), encoding="utf-8") as _f:
    T["qwen3"] = _f.read()

# Mistral v7 (mistralai/Mistral-Small-3.2-24B-Instruct-2506): the published copy, as for Qwen3. No Mistral
# vocabulary is in ../shared: its cases check the text and the refusals. Its default system prompt holds
# strftime_now's date, so mkshards refuses a record without a system message (V7_NO_SYSTEM).
with open(os.path.join(HERE, "published", "Mistral-Small-3.2-24B-Instruct-2506.jinja"), encoding="utf-8") as _f:
    T["mistral-v7"] = _f.read()
V7_NO_SYSTEM = "mkshards: the default system prompt holds the current date (not reproducible): refused"

# template -> (tokenizer folder or None: text only, bos, eos, the template's special tokens,
#              end-of-turn string after an assistant message, contents stripped by the template)
L3_BOS, L3_EOS = "<|begin_of_text|>", "<|end_of_text|>"
SETUP = {
    "chatml": ("qwen2", "", "", ["<|im_start|>", "<|im_end|>"], "<|im_end|>", False),
    "qwen2": ("qwen2", "", "", ["<|im_start|>", "<|im_end|>"], "<|im_end|>", False),
    "qwen2.5": ("qwen2", "", "", ["<|im_start|>", "<|im_end|>"], "<|im_end|>", False),
    "qwen3": ("qwen2", "", "", ["<|im_start|>", "<|im_end|>"], "<|im_end|>", False),
    "mistral-v7": (None, "<s>", "</s>", [], "</s>", False),
    "llama3": ("llama3", L3_BOS, L3_EOS, [L3_BOS, "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
               "<|eot_id|>", True),
    "llama2": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], " " + L3_EOS, True),
    "mistral": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], L3_EOS, False),
    "mistral-v1": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], L3_EOS, False),
    "mistral-v3": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], L3_EOS, True),
    "mistral-tekken": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], L3_EOS, False),
    "deepseek": ("llama3", L3_BOS, L3_EOS, [L3_BOS, L3_EOS], L3_EOS, False),
    "gemma": (None, "<bos>", "<eos>", ["<bos>", "<start_of_turn>", "<end_of_turn>"], "<end_of_turn>", True),
    "phi3": (None, "<s>", "<|endoftext|>", ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"],
             "<|end|>", False),
}

WORDS = ["the", "model", "tokens", "shard", "loss", "mask", "Grüße", "naïve", "東京", "데이터", "👍🏽", "x=1;",
         "  spaced  ", "tab\there", "new\nline", "résumé", "π≈3.14", "ﬁ", "Å", "e\u0301"]
SPECIAL_TEXT = ["<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "<|im_start|>assistant", "<|end_of_text|>"]


def sentence(rng, k, special=False):
    w = [rng.choice(WORDS) for _ in range(rng.randint(1, k))]
    w.append("#%d" % rng.randint(0, 10**6))  # unique, so each content is found where it is
    if special:
        w.insert(rng.randint(0, len(w)), rng.choice(SPECIAL_TEXT))
    return " ".join(w)


def conversations(rng):
    out = []
    for i in range(52):
        special = i % 5 == 4
        msgs = []
        if i % 3 == 0:
            msgs.append({"role": "system", "content": sentence(rng, 8)})
        for t in range(rng.randint(1, 4)):
            msgs.append({"role": "user", "content": sentence(rng, 10, special and t == 0)})
            if i % 7 == 6 and t == 0:
                msgs.append({"role": "tool", "content": sentence(rng, 5)})
            msgs.append({"role": "assistant", "content": sentence(rng, 12, special and t == 1)})
        if i % 11 == 10:
            msgs[-1]["content"] = "  " + msgs[-1]["content"] + " \n"
        if i % 13 == 12:  # ending with the user's turn (Mistral v3 / tekken put the system message there)
            msgs.pop()
        out.append({"messages": msgs})
    # list-of-parts content: text parts joined with "\n"
    out.append({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                           {"type": "image_url", "image_url": {"url": "x"}},
                                                           {"type": "text", "text": "b #91"}]},
                             {"role": "assistant", "content": "ok #92"}]})
    # an empty system message (Phi-3.5 leaves it out: `and message['content']`)
    out.append({"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "hi #93"},
                             {"role": "assistant", "content": "ok #94"}]})
    return out


def qwen3_conversations(rng):
    """Records for what only Qwen3's template reads: reasoning (reasoning_content, or its aliases thinking /
    reasoning, or '<think>...</think>' inside content), the last real user query (turns after it keep their
    reasoning), tool responses as tool messages or as a user message wholly '<tool_response>...</tool_response>',
    and what the template raises on. A separate generator, so the other templates' cases stay as they were."""
    def s(k=8, special=False):
        return sentence(rng, k, special)
    out = []
    for i in range(40):
        msgs = []
        if i % 4 == 0:
            msgs.append({"role": "system", "content": s()})
        turns = rng.randint(1, 3)
        for t in range(turns):
            msgs.append({"role": "user", "content": s(10, i % 9 == 8 and t == 0)})
            if i % 5 == 1 and t == turns - 1:  # a tool round inside the last turn
                msgs.append({"role": "assistant", "content": s(4)})
                for _ in range(rng.randint(1, 2)):
                    msgs.append({"role": "tool", "content": s(5)})
            a = {"role": "assistant", "content": s(10, i % 9 == 8 and t == 1)}
            kind = (i + t) % 8
            if kind == 1:
                a["reasoning_content"] = s(6)
            elif kind == 2:
                a["content"] = "<think>\n" + s(6) + "\n</think>\n\n" + a["content"]
            elif kind == 3:  # no <think>, several </think>, newlines to strip
                a["content"] = "\n" + s(3) + "\n\n</think>" + s(2) + "</think>\n\n" + a["content"]
            elif kind == 4:
                a["thinking"] = "\n\n" + s(4) + "\n"
            elif kind == 5:
                a["reasoning"] = s(4)
                a["reasoning_content"] = None  # null: the next name is taken
            elif kind == 6:
                a["reasoning_content"] = ""  # empty: the think block only on the last message
                a["content"] = "\n\n" + a["content"]
            elif kind == 7:  # reasoning_content wins over '</think>' in content, which then stays
                a["reasoning_content"] = "\n" + s(3) + "\n"
                a["content"] = "<think>x</think>" + a["content"]
            msgs.append(a)
        if i % 7 == 3:
            msgs.insert(len(msgs) - 1, {"role": "system", "content": s(3)})  # a system message not first
        if i % 6 == 5:  # a tool response given as a user message: not a query
            msgs.append({"role": "user", "content": "<tool_response>\n" + s(4) + "\n</tool_response>"})
            msgs.append({"role": "assistant", "content": s(5), "reasoning_content": s(3)})
        if i % 10 == 9:
            msgs.pop()  # ending with the user's turn
        out.append({"messages": msgs})
    # what the template raises on: no message; a reasoning that is not a string where it is rendered
    out.append({"messages": []})
    for bad in (5, 0, [], True, {"a": 1}):
        out.append({"messages": [{"role": "user", "content": "q #95"},
                                 {"role": "assistant", "content": "a #96", "reasoning_content": bad}]})
    # ... and where it is not rendered (before the last query), so no error
    out.append({"messages": [{"role": "user", "content": "q #97"},
                             {"role": "assistant", "content": "a #98", "reasoning_content": 7},
                             {"role": "user", "content": "q #99"}, {"role": "assistant", "content": "b #100"}]})
    # a falsy non-string reasoning on a non-last message after the query: not rendered either
    out.append({"messages": [{"role": "user", "content": "q #101"},
                             {"role": "assistant", "content": "a #102", "reasoning_content": 0},
                             {"role": "tool", "content": "r #103"},
                             {"role": "assistant", "content": "b #104", "reasoning_content": "why #105"}]})
    out.append({"messages": [{"role": "assistant", "content": "<think>\nonly #106\n</think>\n\nx #107"}]})
    return out


def chatml_tagged(j, reps, calls):
    """A ChatML template's Jinja j with {% generation %} opened by reps (each (published text, tagged text); the
    published text must be there) and closed at the assistant turn's '<|im_end|>\\n' (the first after `calls`, the
    template's tool-call branch): '<|im_end|>' {% endgeneration %} '\\n', so the span ends with <|im_end|>."""
    for a, b in reps:
        assert a in j, a
        j = j.replace(a, b)
    k = j.index(calls)
    end = "{{- '<|im_end|>\\n' }}"
    e = j.index(end, k)
    return j[:e] + "{{- '<|im_end|>' }}{% endgeneration %}{{- '\\n' }}" + j[e + len(end):]


# Qwen3 with {% generation %} around what mkshards marks: from after an assistant message's
# '<|im_start|>assistant\n' through its <|im_end|> (think block, content). Used only for the mask's reference
# spans (transformers' return_assistant_tokens_mask indices); its text must equal the published template's.
def qwen3_tagged(j):
    reps = [
        ("{%- if loop.index0 > ns.last_query_index %}",
         "{{- '<|im_start|>' + message.role + '\\n' }}{% generation %}{%- if loop.index0 > ns.last_query_index %}"),
        ("{{- '<|im_start|>' + message.role + '\\n<think>\\n' + ", "{{- '<think>\\n' + "),
        ("{{- '<|im_start|>' + message.role + '\\n' + content }}", "{{- content }}"),
    ]
    return chatml_tagged(j, reps, "{%- if message.tool_calls %}")


def tool_conversations(rng):
    """Tool calling for the templates that render it (qwen2.5, qwen3): the record's `tools` (function schemas),
    assistant tool_calls (arguments as an object and as a string, calls with and without the `function` wrapper,
    parallel calls, null / empty / present content) and tool results with tool_call_id / name; numbers, escapes
    and unicode for tojson; and what the templates raise on. Each case is (record, raw line or None): a raw line
    holds what a Python dict cannot (a repeated key, number spellings), parsed by json.loads here as mkshards
    parses it."""
    def s(k=6):
        return sentence(rng, k)
    nums = [0, -7, 9007199254740993, 0.1, 1e-05, 1e16, 123456789012345678.0, 5e-324, 1.7976931348623157e308, -0.0,
            0.0001, 100.0, 1.5e300, 2.5e-5, 1 / 3]
    texts = ["q\"uote", "back\\slash", "new\nline", "ctl\u0001\u001f\u007f", "sep\u2028\u2029", "東京 👍🏽", "tab\t",
             "</tool_call>", "{\"json\": 1}"]

    def value(depth=0):
        k = rng.randint(0, 6 if depth < 2 else 3)
        if k == 0:
            return rng.choice(nums)
        if k == 1:
            return rng.choice(texts) + " " + s(2)
        if k == 2:
            return rng.choice([True, False, None])
        if k == 3:
            return rng.randint(-1000, 1000)
        if k == 4:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(["a", "b", "ключ", "x y", "z\"q"]) + str(j): value(depth + 1)
                for j in range(rng.randint(0, 3))}

    def tool(j):
        return {"type": "function", "function": {
            "name": "fn_%d" % j, "description": s(5) + " " + rng.choice(texts),
            "parameters": {"type": "object", "properties": {"p%d" % k: {"type": "number", "default": value()}
                                                            for k in range(rng.randint(1, 3))},
                           "required": ["p0"]}}}

    out = []
    for i in range(36):
        rec = {"messages": []}
        msgs = rec["messages"]
        if i % 3 == 0:
            rec["tools"] = [tool(j) for j in range(rng.randint(1, 3))]
        elif i % 9 == 4:
            rec["tools"] = []  # false: no tools turn
        if i % 4 == 0:
            msgs.append({"role": "system", "content": s()})
        for t in range(rng.randint(1, 2)):
            msgs.append({"role": "user", "content": s(8)})
            calls = []
            for k in range(rng.randint(1, 3)):
                args = {"p%d" % q: value() for q in range(rng.randint(0, 3))}
                form = (i + k) % 4
                if form == 1:
                    args = json.dumps(args)  # arguments as a string
                elif form == 2:
                    args = json.dumps(args, ensure_ascii=True, separators=(",", ":"))
                name = "fn_%d" % k
                call = {"id": "call%05d" % rng.randint(0, 99999), "type": "function",
                        "function": {"name": name, "arguments": args}}
                if (i + k) % 5 == 3:  # no function wrapper
                    call = {"id": call["id"], "name": name, "arguments": args}
                calls.append(call)
            a = {"role": "assistant", "tool_calls": calls}
            c = (i + t) % 3
            a["content"] = None if c == 0 else "" if c == 1 else s(5)
            if i % 7 == 2:
                a["reasoning_content"] = s(4)
            msgs.append(a)
            for call in calls:
                msgs.append({"role": "tool", "content": json.dumps(value(), ensure_ascii=False),
                             "tool_call_id": call["id"], "name": call.get("function", call)["name"]})
            msgs.append({"role": "assistant", "content": s(6)})
        out.append((rec, None))

    def one(call, content="x #201", **extra):
        a = {"role": "assistant", "content": content, "tool_calls": [call] if not isinstance(call, list) else call}
        a.update(extra)
        return {"messages": [{"role": "user", "content": "q #200"}, a,
                             {"role": "tool", "content": "r #202"}, {"role": "assistant", "content": "done #203"}]}
    # names that are not strings (printed through str()), a missing name, a missing arguments (tojson raises)
    for name in (7, 2.5, True, None):
        out.append((one({"function": {"name": name, "arguments": {"a": 1}}}), None))
    out.append((one({"function": {"arguments": {"a": 1}}}), None))
    out.append((one({"function": {"name": "f"}}), None))
    # function that is empty / null / not an object: Qwen2.5 reads it (and raises), Qwen3 reads the call itself
    for fn in ({}, None, "x", 0):
        out.append((one({"function": fn, "name": "g", "arguments": "{\"b\": 2}"}), None))
    # tool_calls that are false (rendered as a plain message) or true but not a list, or hold a non-object
    out.append((one([], "plain #204"), None))
    rec = one([], "plain #205")
    rec["messages"][1]["tool_calls"] = {}
    out.append((rec, None))
    rec = one([], "plain #206")
    rec["messages"][1]["tool_calls"] = "ab"
    out.append((rec, None))
    out.append((one([5]), None))
    # arguments null / a list / a number
    for args in (None, [1, "two", 3.0], 42):
        out.append((one({"function": {"name": "h", "arguments": args}}), None))
    # raw lines: repeated keys (first place, last value), number spellings json.loads turns into other text
    raw = [
        '{"messages":[{"role":"user","content":"q #210"},{"role":"assistant","content":null,"tool_calls":[{"function":'
        '{"name":"f","arguments":{"a":1,"b":2,"a":3,"c":{"d":1,"d":[1E2,-0,0.50,1e-7,12345678901234567890e-10]}}}}]},'
        '{"role":"tool","content":"r #211"},{"role":"assistant","content":"ok #212"}]}',
        '{"tools":[{"x":1,"y":2,"x":{"z":-0.0}}],"messages":[{"role":"user","content":"q #213"},'
        '{"role":"assistant","content":"ok #214"}]}',
    ]
    big = {"k%d" % (j % 23): j for j in range(40)}  # over 16 keys, many repeated: the sorted path
    raw.append(json.dumps({"messages": [{"role": "user", "content": "q #215"},
                                        {"role": "assistant", "content": "", "tool_calls": [
                                            {"function": {"name": "big", "arguments": {}}}]}]})
               .replace('"arguments": {}', '"arguments": {' + ", ".join('"k%d": %d' % (j % 23, j)
                                                                         for j in range(40)) + "}"))
    assert len(big) == 23
    for line in raw:
        out.append((json.loads(line), line))
    return out


def mistral_tool_conversations():
    """What only Mistral's tool rendering reads: tool call ids of 9 characters (and not), tool results'
    tool_call_id, tools before every user message equal to the last one, tools [] (defined: an empty list is
    still rendered), tool_calls [] (an unclosed '[TOOL_CALLS]['), a function that is not an object, a 'return'
    key left out of the tools list."""
    fn = {"name": "f", "description": "d \"q\" \u00e9", "parameters": {"type": "object"}, "return": {"x": 1},
          "n": 2.5}
    tools = [{"type": "function", "function": fn}]
    def call(i, **kw):
        c = {"id": i, "function": {"name": "f", "arguments": {"a": 1, "b": [True, None]}}}
        c.update(kw)
        return c
    u1, a1 = {"role": "user", "content": "same #300"}, {"role": "assistant", "content": "a #301"}
    out = []
    conv = [u1, a1, dict(u1), {"role": "assistant", "content": None, "tool_calls": [call("abcdefghi"), call("東京東京東京東京東")]},
            {"role": "tool", "content": "{\"r\": 1}", "tool_call_id": "abcdefghi"},
            {"role": "tool", "content": "plain #302", "tool_call_id": "東京東京東京東京東"},
            {"role": "assistant", "content": "done #303"}]
    out.append(({"tools": tools, "messages": conv}, None))  # user 0 == user 2: the tools before both
    out.append(({"tools": [], "messages": [u1, a1]}, None))
    out.append(({"messages": [u1, {"role": "assistant", "content": None, "tool_calls": []}]}, None))
    out.append(({"messages": [u1, {"role": "assistant", "content": "", "tool_calls": [call("short")]}]}, None))
    out.append(({"messages": [u1, {"role": "assistant", "content": "", "tool_calls": [call(123456789)]}]}, None))
    out.append(({"messages": [u1, {"role": "assistant", "content": "", "tool_calls": [call("abcdefghi", function="s")]}]},
                None))
    out.append(({"messages": [u1, {"role": "assistant", "content": "", "tool_calls": [{"id": "abcdefghi"}]}]}, None))
    out.append(({"tools": [{"type": "function"}], "messages": [u1, a1]}, None))
    out.append(({"tools": [{"function": "x"}], "messages": [u1, a1]}, None))
    out.append(({"messages": [u1, {"role": "tool", "content": "r #304", "tool_call_id": "123456789"},
                              {"role": "assistant", "content": "a #305"}]}, None))
    out.append(({"messages": [u1, {"role": "tool", "content": "r #306"}]}, None))
    out.append(({"tools": tools, "messages": [{"role": "system", "content": "sys #307"}, u1, a1,
                                              {"role": "user", "content": "last #308"}]}, None))
    return out


def v7_conversations():
    """Mistral v7 with a system message (its default one is refused): multi-turn, a later system message,
    tool calls with string and object arguments, a non-string name, tools with equal user messages, what it
    raises on (tool_calls not a list, a missing function, a bad id, a role it has no branch for)."""
    s0 = {"role": "system", "content": "You are terse. #400"}
    u = lambda k: {"role": "user", "content": "q #%d" % k}
    a = lambda k: {"role": "assistant", "content": "a #%d" % k}
    def call(i, name="f", args=None):
        return {"id": i, "type": "function", "function": {"name": name, "arguments": {"x": [1, 2.5, None]}
                                                          if args is None else args}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "n": 1e-05}}]
    out = []
    out.append(({"messages": [s0, u(401), a(402), {"role": "system", "content": "later #403"}, u(404), a(405)]}, None))
    out.append(({"tools": tools, "messages": [s0, u(406), {"role": "assistant", "content": None, "tool_calls": [
        call("abcdefghi"), call("bcdefghij", "g", "{\"raw\": \"str\"}")]},
        {"role": "tool", "content": "r1 #407", "tool_call_id": "abcdefghi"},
        {"role": "tool", "content": "r2 #408", "tool_call_id": "bcdefghij"}, a(409), u(406), a(410)]}, None))
    out.append(({"tools": [], "messages": [s0, u(411), a(412)]}, None))
    out.append(({"messages": [s0, u(413), {"role": "assistant", "content": "x", "tool_calls": [call("abcdefghi", 5)]}]},
                None))
    out.append(({"messages": [s0, u(414), {"role": "assistant", "content": "x", "tool_calls": "ab"}]}, None))
    out.append(({"messages": [s0, u(415), {"role": "assistant", "content": "x", "tool_calls": [{"id": "abcdefghi"}]}]},
                None))
    out.append(({"messages": [s0, u(416), {"role": "assistant", "content": "", "tool_calls": [call("abc")]}]}, None))
    out.append(({"messages": [s0, u(417), {"role": "assistant", "content": "", "tool_calls": []}]}, None))
    out.append(({"messages": [s0, u(418), a(419), a(420)]}, None))
    out.append(({"messages": [s0, {"role": "tool", "content": "r #421", "tool_call_id": "abcdefghi"}, u(422), a(423)]},
                None))
    out.append(({"messages": [s0, u(424), {"role": "assistant", "content": "[INST]x[/INST] #425"}]}, None))
    return out


# Qwen2.5 with {% generation %} around what mkshards marks (as qwen3_tagged): after 'assistant\n' through
# <|im_end|>, for plain assistant messages and those with tool_calls.
def qwen25_tagged(j):
    reps = [
        ("{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}",
         "{{- '<|im_start|>' + message.role + '\\n' }}{%- if message.role == \"assistant\" %}{% generation %}"
         "{{- message.content + '<|im_end|>' }}{% endgeneration %}{%- else %}{{- message.content + '<|im_end|>' }}"
         "{%- endif %}{{- '\\n' }}"),
        ("{{- '<|im_start|>' + message.role }}\n        {%- if message.content %}\n            "
         "{{- '\\n' + message.content }}\n        {%- endif %}",
         "{{- '<|im_start|>' + message.role + '\\n' }}{% generation %}{%- if message.content %}"
         "{{- message.content }}{%- endif %}"),
        ("{{- '\\n<tool_call>\\n{\"name\": \"' }}",
         "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}{{- '<tool_call>\\n{\"name\": \"' }}"),
    ]
    return chatml_tagged(j, reps, "{%- for tool_call in message.tool_calls %}")


# Mistral v3 / tekken with {% generation %} around what mkshards marks: an assistant message's content + eos
# (v3: after its ' '), a tool-call message's '[TOOL_CALLS]...' + eos.
def mistral_tagged(j):
    tekken = "[TOOL_CALLS][" in j
    calls = '{{- "[TOOL_CALLS][" }}' if tekken else '{{- "[TOOL_CALLS] [" }}'
    plain = ('{{- message["content"] + eos_token}}' if tekken else '{{- " " + message["content"]|trim + eos_token}}')
    tagged = ('{% generation %}{{- message["content"] + eos_token}}{% endgeneration %}' if tekken else
              '{{- " " }}{% generation %}{{- message["content"]|trim + eos_token}}{% endgeneration %}')
    assert j.count(calls) == 1 and j.count(plain) == 1
    k = j.index(calls)
    e = j.index("{%- endfor %}", k) + len("{%- endfor %}")
    j = j[:k] + "{% generation %}" + j[k:e] + "{% endgeneration %}" + j[e:]
    return j.replace(plain, tagged)


def joined(m):
    c = m["content"]
    return c if isinstance(c, str) else "\n".join(p["text"] for p in c if p.get("type") == "text")


def split_encode(tk, text, specials, content_spans):
    """ids and char offsets of text: the template's special tokens outside the
    content spans are special ids, everything else is text (special-token text
    inside it stays text)."""
    backend = tk.backend_tokenizer
    ids, offs = [], []
    i = 0
    chunk_start = 0

    def flush(end):
        if end > chunk_start:
            enc = backend.encode(text[chunk_start:end], add_special_tokens=False)
            ids.extend(enc.ids)
            offs.extend((chunk_start + a, chunk_start + b) for a, b in enc.offsets)

    while i < len(text):
        inside = any(a <= i < b for a, b in content_spans)
        hit = None if inside else next((s for s in specials if text.startswith(s, i)), None)
        if hit:
            flush(i)
            ids.append(tk.convert_tokens_to_ids(hit))
            offs.append((i, i + len(hit)))
            i += len(hit)
            chunk_start = i
        else:
            i += 1
    flush(len(text))
    return ids, offs


def main():
    rng = random.Random(28)
    convs = conversations(rng)
    tks = {}
    for name in ("qwen2", "llama3"):
        tk = PreTrainedTokenizerFast(tokenizer_file=os.path.join(SHARED, "vocab", "hf", name, "tokenizer.json"))
        tk.backend_tokenizer.encode_special_tokens = True
        tks[name] = tk
    qconvs = qwen3_conversations(random.Random(2803))
    tconvs = tool_conversations(random.Random(2804))
    rows = []

    def case(tname, jinja, ci, conv, line=None, full=False):
        folder, bos, eos, specials, eot, stripped = SETUP[tname]
        tools = conv.get("tools") if line is not None or "tools" in conv else None
        if full:
            msgs = [dict(m) for m in conv["messages"]]  # tool calling: every field as it is
        elif tname == "qwen3":  # the reasoning fields too
            msgs = [dict(m, content=joined(m)) for m in conv["messages"]]
        else:
            msgs = [{"role": m["role"], "content": joined(m)} for m in conv["messages"]]
        row = {"template": tname, "tokenizer": folder, "bos": bos, "eos": eos, "record": conv}
        if line is not None:
            row["line"] = line
        if tname == "mistral-v7" and (not msgs or msgs[0]["role"] != "system"):
            row["error"] = V7_NO_SYSTEM  # where transformers would render today's date
            rows.append(row)
            return
        try:
            text = transformers.utils.chat_template_utils.render_jinja_template(
                conversations=[msgs], tools=tools, chat_template=jinja, bos_token=bos, eos_token=eos)[0][0]
        except Exception as e:  # the template's raise_exception
            row["error"] = str(e)
            rows.append(row)
            return
        row["text"] = text
        # where each rendered message's content is
        spans, cur, targets = [], 0, []
        order = list(enumerate(msgs))
        tagged_of = {"qwen3": qwen3_tagged, "qwen2.5": qwen25_tagged, "mistral-v3": mistral_tagged,
                     "mistral-tekken": mistral_tagged}
        if tname == "qwen3" or (tname in tagged_of and full):
            # an assistant message's rendering is not its content: the tagged template's spans
            tagged, gen = transformers.utils.chat_template_utils.render_jinja_template(
                conversations=[msgs], tools=tools, chat_template=tagged_of[tname](jinja), bos_token=bos,
                eos_token=eos, return_assistant_tokens_mask=True)
            assert tagged[0] == text, (ci, tagged[0], text)
            targets = [tuple(g) for g in gen[0]]
            assert len(targets) == sum(m["role"] == "assistant" for m in msgs), ci
            spans = [(a, b - len(eot)) for a, b in targets]
            order = [(k, m) for k, m in order if m["role"] != "assistant"]
        if tname in ("mistral-v3", "mistral-tekken") and msgs[0]["role"] == "system" and \
                msgs[-1]["role"] == "user":  # these render the system message inside the last user turn
            order = order[1:-1] + [order[0], order[-1]]
        for k, m in order:
            c = m["content"]
            if tname in ("qwen3", "qwen2.5") and m["role"] == "system" and k == 0:
                cur = 0
            if stripped and not (tname == "llama2" and k == 0 and m["role"] == "system"):
                c = c.strip()
            at = text.find(c, cur) if c else -1
            if at < 0:
                continue  # not rendered (a role the template leaves out) or empty
            spans.append((at, at + len(c)))
            cur = at + len(c)
            if m["role"] == "assistant":
                assert text.startswith(eot, cur), (tname, ci, text[cur:cur + 20])
                targets.append((at, cur + len(eot)))
        if folder:
            tk = tks[folder]
            ids, offs = split_encode(tk, text, specials, spans)
            has_special = any(s in (m.get("content") or "") for m in msgs
                              for s in list(tk.get_added_vocab()) + specials)
            tk.backend_tokenizer.encode_special_tokens = False
            hf = tk.apply_chat_template(msgs, tools=tools, chat_template=jinja, tokenize=True, bos_token=bos,
                                        eos_token=eos, return_dict=False)
            tk.backend_tokenizer.encode_special_tokens = True
            if hasattr(hf, "keys"):
                hf = hf["input_ids"]
            if not has_special:
                assert ids == list(hf), (tname, ci)
            else:
                row["hf_ids_differ"] = ids != list(hf)
            row["ids"] = ids
            row["mask"] = [int(any(a < e and s < b for s, e in targets)) for a, b in offs]
        rows.append(row)

    for tname, jinja in T.items():
        if tname == "mistral-v7":
            continue  # after the tool calling rows (below), so those keep their places
        for ci, conv in enumerate(convs + (qconvs if tname == "qwen3" else [])):
            case(tname, jinja, ci, conv)
    # tool calling, after every other case (so those rows keep their places)
    for tname in ("qwen2.5", "qwen3"):
        for ci, (conv, line) in enumerate(tconvs):
            case(tname, T[tname], 1000 + ci, conv, line, True)
    # ... and Mistral v3 / tekken (after the Qwen rows, so those keep their places)
    for tname in ("mistral-v3", "mistral-tekken"):
        for ci, (conv, line) in enumerate(tconvs + mistral_tool_conversations()):
            case(tname, T[tname], 2000 + ci, conv, line, True)
    # Mistral v7: the shared conversations, then the tool records
    for ci, conv in enumerate(convs):
        case("mistral-v7", T["mistral-v7"], ci, conv)
    for ci, (conv, line) in enumerate(tconvs + mistral_tool_conversations() + v7_conversations()):
        case("mistral-v7", T["mistral-v7"], 3000 + ci, conv, line, True)
    with open(os.path.join(HERE, "fixtures.jsonl"), "w", encoding="utf-8") as f:
        f.write(json.dumps({"jinja": T, "transformers": transformers.__version__}, ensure_ascii=False) + "\n")
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    # mkshards encode's inputs and outputs for tests/cli_chat.sh (no JSON tool needed there)
    for tname in ("qwen2.5", "llama3"):
        sel = [r for r in rows if r["template"] == tname and "ids" in r][:12]
        with open(os.path.join(HERE, "cli_%s.jsonl" % tname), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r["record"], ensure_ascii=False) + "\n" for r in sel)
        for key in ("ids", "mask"):
            with open(os.path.join(HERE, "cli_%s.%s" % (tname, key)), "w") as f:
                f.writelines(json.dumps(r[key], separators=(",", ":")) + "\n" for r in sel)
    print("%d cases (%d with ids), transformers %s" % (len(rows), sum("ids" in r for r in rows),
                                                        transformers.__version__))


if __name__ == "__main__":
    main()
