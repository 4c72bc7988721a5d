#!/usr/bin/env python3
"""Published chat_template strings, to check that `--chat-template auto`
recognises what real tokenizer_config.json files hold (dataset/chat_template.c;
test_chat's published_cases).  Each <name>.jinja is one model's chat_template
exactly as its tokenizer_config.json gives it (the JSON string decoded), and
MANIFEST lists which built-in it must be recognised as.

Sources (no Hub access here):
* llama.cpp's models/templates/*.jinja, written by its
  scripts/get_chat_template.py from the models' tokenizer_config.json; taken
  from the llama-cpp-python 0.3.36 sdist, which vendors llama.cpp
  (pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all:).
* meta-llama/Llama-2-13b-chat-hf and google/gemma-7b-it as Hugging Face's
  text-generation-inference quotes them in router/src/infer/chat_template.rs
  (commit 058162685f05), its test of the same strings; written below with
  the Rust escapes decoded.

    python3 tests/data/chat/published/make_published.py [SDIST.tar.gz]
"""
import io
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SDIST_VERSION = "0.3.36"
FROM_LLAMA_CPP = {  # file in models/templates -> built-in it must be recognised as
    "google-gemma-2-2b-it.jinja": "gemma",
    "microsoft-Phi-3.5-mini-instruct.jinja": "phi3",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "qwen2.5",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral-tekken",
    "Qwen-Qwen3-0.6B.jinja": "qwen3",
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral-v7",
}
FROM_TGI = {
    "meta-llama-Llama-2-13b-chat-hf.jinja": ("llama2",
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
        "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% "
        "endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
        "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
        "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
        "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
        "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif "
        "message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"),
    "google-gemma-7b-it.jinja": ("gemma",
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% "
        "endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
        "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
        "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% "
        "endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% "
        "if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"),
}


def sdist(path):
    if path:
        return path
    d = tempfile.mkdtemp()
    subprocess.check_call([sys.executable, "-m", "pip", "download", "llama-cpp-python==" + SDIST_VERSION,
                           "--no-deps", "--no-binary", ":all:", "-d", d])
    return os.path.join(d, "llama_cpp_python-%s.tar.gz" % SDIST_VERSION)


def main():
    manifest = []
    with tarfile.open(sdist(sys.argv[1] if len(sys.argv) > 1 else None)) as tf:
        for name, builtin in FROM_LLAMA_CPP.items():
            member = "llama_cpp_python-%s/vendor/llama.cpp/models/templates/%s" % (SDIST_VERSION, name)
            data = tf.extractfile(member).read()
            with open(os.path.join(HERE, name), "wb") as f:
                f.write(data)
            manifest.append((name, builtin))
    for name, (builtin, text) in FROM_TGI.items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
        manifest.append((name, builtin))
    with open(os.path.join(HERE, "MANIFEST"), "w") as f:
        f.write("# file  built-in that --chat-template auto must recognise it as (make_published.py)\n")
        for name, builtin in sorted(manifest):
            f.write("%s %s\n" % (name, builtin))


if __name__ == "__main__":
    main()
