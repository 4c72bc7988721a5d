#!/usr/bin/env bash
# CLI test for fine-tuning records in `mkshards encode`, `build`, `lint`, `hist` (issue 28): --format,
# --chat-template (names, auto, files), --messages-field, --loss-on, --mask-out;
# ids and masks against transformers' (tests/data/chat/make_fixtures.py wrote
# cli_*.jsonl/.ids/.mask), refusals and their exit codes.
# Usage: cli_chat.sh MKSHARDS SHARED_DIR TEST_DATA_DIR
set -uo pipefail

MKS=$1
SHARED=$2
DATA=$3/chat
HF=$SHARED/vocab/hf
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_chat.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }
run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    err=$(cat "$TMP/err")
}
expect_rc() { if [ "$rc" -eq "$2" ]; then pass "$1 (exit $rc)"; else fail "$1: exit $rc, want $2; stderr: $err"; fi; }
expect_err() { if grep -qF -- "$2" "$TMP/err"; then pass "$1"; else fail "$1: stderr lacks '$2': $err"; fi; }
same_file() { if cmp -s "$2" "$3"; then pass "$1"; else fail "$1: $2 differs from $3"; diff "$2" "$3" | head -6; fi; }

if [ ! -x "$MKS" ]; then echo "mkshards binary not found: $MKS"; exit 1; fi
if [ ! -f "$HF/qwen2/tokenizer.json" ]; then echo "SKIP: no $HF/qwen2/tokenizer.json"; exit 77; fi
Q=$HF/qwen2/tokenizer.json
L=$HF/llama3/tokenizer.json

# --- ids and masks = transformers' apply_chat_template, on 1 and 2 threads
for t in qwen2.5:$Q llama3:$L; do
    name=${t%%:*} tok=${t#*:}
    for j in 1 2; do
        run "$MKS" encode -t "$tok" --format chat --chat-template "$name" -j $j "$DATA/cli_$name.jsonl" \
            --ids-out "$TMP/$name.$j.ids" --mask-out "$TMP/$name.$j.mask"
        expect_rc "encode --format chat --chat-template $name -j $j" 0
        same_file "$name -j $j ids = transformers" "$TMP/$name.$j.ids" "$DATA/cli_$name.ids"
        same_file "$name -j $j masks = transformers" "$TMP/$name.$j.mask" "$DATA/cli_$name.mask"
    done
done
# auto by the fields gives the same
run "$MKS" encode -t "$Q" --format auto --chat-template qwen2.5 "$DATA/cli_qwen2.5.jsonl" --ids-out "$TMP/auto.ids"
same_file "--format auto on chat records" "$TMP/auto.ids" "$DATA/cli_qwen2.5.ids"

# --- --messages-field, list-of-parts content, prompt/completion, --loss-on
printf '%s\n' '{"conv":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"image_url"}]},{"role":"assistant","content":"Yo"}]}' >"$TMP/f.jsonl"
run "$MKS" encode -t "$Q" --format chat --chat-template chatml --messages-field conv "$TMP/f.jsonl" -o "$TMP/f.ids" --mask-out "$TMP/f.mask"
expect_rc "--messages-field conv" 0
# <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n
# (the ids HF tokenizers gives that text; the image part is left out)
if [ "$(cat "$TMP/f.ids")" = "[151644,872,198,13048,151645,198,151644,77091,198,64725,151645,198]" ]; then
    pass "--messages-field ids"; else fail "--messages-field ids: $(cat "$TMP/f.ids")"; fi
if [ "$(cat "$TMP/f.mask")" = "[0,0,0,0,0,0,0,0,0,1,1,0]" ]; then pass "mask: assistant content + <|im_end|>, not the newline"
else fail "mask: $(cat "$TMP/f.mask")"; fi
printf '%s\n' '{"prompt":"2+2=","completion":"4"}' >"$TMP/pc.jsonl"
run "$MKS" encode -t "$Q" --format prompt-completion --chat-template chatml "$TMP/pc.jsonl" -o "$TMP/pc.ids" --mask-out "$TMP/pc.mask"
expect_rc "prompt-completion strings" 0
if [ "$(cat "$TMP/pc.mask")" = "[0,0,0,0,1,1]" ]; then pass "prompt-completion: the completion and eos are the targets"
else fail "prompt-completion mask: $(cat "$TMP/pc.mask")"; fi
run "$MKS" encode -t "$Q" --format prompt-completion --chat-template chatml --loss-on all "$TMP/pc.jsonl" -o "$TMP/pc.ids" --mask-out "$TMP/pc.mask"
if [ "$(cat "$TMP/pc.mask")" = "[1,1,1,1,1,1]" ]; then pass "--loss-on all"; else fail "--loss-on all: $(cat "$TMP/pc.mask")"; fi

# conversational prompt-completion: by default only the completion's assistant turn, not the prompt's few-shot one
printf '%s\n' '{"prompt":[{"role":"user","content":"q"},{"role":"assistant","content":"shot"},{"role":"user","content":"q2"}],"completion":[{"role":"assistant","content":"ans"}]}' >"$TMP/pcl.jsonl"
run "$MKS" encode -t "$Q" --format auto --chat-template chatml "$TMP/pcl.jsonl" -o "$TMP/pcl.ids" --mask-out "$TMP/pcl.mask"
if [ "$(cat "$TMP/pcl.mask")" = "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,0]" ]; then
    pass "prompt-completion lists: the completion is the target"; else fail "prompt-completion lists mask: $(cat "$TMP/pcl.mask")"; fi
run "$MKS" encode -t "$Q" --format auto --chat-template chatml --loss-on assistant "$TMP/pcl.jsonl" -o "$TMP/pcl.ids" --mask-out "$TMP/pcl.mask"
if [ "$(cat "$TMP/pcl.mask")" = "[0,0,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0,0,0,0,0,1,1,0]" ]; then
    pass "--loss-on assistant: every assistant turn"; else fail "--loss-on assistant mask: $(cat "$TMP/pcl.mask")"; fi

# --- refusals: records skipped with file:line and why; the run goes on
printf '%s\n' '{"messages":[{"role":"robot","content":"x"}]}' '{"messages":[{"role":"user","content":7}]}' \
    '{"messages":[{"role":"user","content":"ok"},{"role":"assistant","content":"fine"}]}' >"$TMP/bad.jsonl"
run "$MKS" encode -t "$Q" --format chat --chat-template chatml "$TMP/bad.jsonl" -o "$TMP/bad.ids"
expect_rc "bad records skipped" 0
expect_err "unknown role named with file:line" "bad.jsonl:1: chat record refused: unknown role 'robot'"
expect_err "non-string content" "bad.jsonl:2: chat record refused"
if [ "$(wc -l <"$TMP/bad.ids")" -eq 1 ]; then pass "one record encoded"; else fail "bad.ids: $(cat "$TMP/bad.ids")"; fi
printf '%s\n' '{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}' >"$TMP/sys.jsonl"
run "$MKS" encode -t "$Q" --format chat --chat-template mistral "$TMP/sys.jsonl" -o "$TMP/sys.ids"
expect_rc "every record refused by its template" 2
expect_err "the template's own message" "Conversation roles must alternate"
run "$MKS" encode -t "$Q" --format chat --chat-template gemma "$DATA/cli_qwen2.5.jsonl" -o "$TMP/g.ids"
expect_rc "template specials the tokenizer lacks" 2
expect_err "the missing special is named" "<start_of_turn>"

# --- --chat-template: names, files, auto
run "$MKS" encode -t "$Q" --chat-template chatml "$TMP/pc.jsonl" -o "$TMP/x.ids"
expect_rc "--chat-template without a chat --format" 64
run "$MKS" encode -t "$Q" --format dialog "$TMP/pc.jsonl" -o "$TMP/x.ids"
expect_rc "unknown --format" 64
expect_err "--format lists the names" "text, chat, prompt-completion or auto"
run "$MKS" encode -t "$Q" --format chat --chat-template vicuna "$TMP/pc.jsonl" -o "$TMP/x.ids"
expect_rc "unknown template name" 64
expect_err "unknown template lists the built-ins" "chatml, qwen2, qwen2.5, qwen3, llama3"
run "$MKS" encode -t "$Q" --format chat --loss-on prompt "$TMP/pc.jsonl" -o "$TMP/x.ids"
expect_rc "unknown --loss-on" 64
run "$MKS" encode -t "$Q" --format chat "$TMP/pc.jsonl" -o "$TMP/x.ids"
expect_rc "auto without tokenizer_config.json" 2
expect_err "auto lists the built-ins" "llama3"
mkdir -p "$TMP/tokdir"
ln -s "$Q" "$TMP/tokdir/tokenizer.json"
# chatml's Jinja, laid out on several lines as a tokenizer_config.json may hold it
printf '%s\n' '{"chat_template": "{% for message in messages %}\n{{'"'"'<|im_start|>'"'"' + message['"'"'role'"'"'] + '"'"'\\n'"'"' + message['"'"'content'"'"'] + '"'"'<|im_end|>'"'"' + '"'"'\\n'"'"'}}\n{% endfor %}{% if add_generation_prompt %}{{ '"'"'<|im_start|>assistant\\n'"'"' }}{% endif %}"}' >"$TMP/tokdir/tokenizer_config.json"
run "$MKS" encode -t "$TMP/tokdir" --format chat "$TMP/f.jsonl" --messages-field conv -o "$TMP/auto2.ids"
expect_rc "auto recognises chatml in tokenizer_config.json" 0
run "$MKS" encode -t "$Q" --format chat --chat-template "$TMP/tokdir/tokenizer_config.json" --messages-field conv "$TMP/f.jsonl" -o "$TMP/auto3.ids"
expect_rc "--chat-template FILE (tokenizer_config.json)" 0
same_file "auto = the file = chatml" "$TMP/auto2.ids" "$TMP/auto3.ids"
printf '%s' "{{ messages[0]['content'] }}" >"$TMP/other.jinja"
run "$MKS" encode -t "$Q" --format chat --chat-template "$TMP/other.jinja" "$TMP/f.jsonl" -o "$TMP/x.ids"
expect_rc "an unrecognised template file" 2
expect_err "refused with the names, not guessed" "none of the built-in templates"
run "$MKS" encode -t "$Q" --format chat --chat-template chatml "$TMP/f.jsonl" -o "$TMP/x.ids" --mask-out "$TMP/f.jsonl"
expect_rc "--mask-out over an input" 2

# --- build, lint and hist take the same options (one parser: tools/cli_chat.c)
for c in build lint hist; do
    extra=""
    [ $c = build ] && extra="-L 64 -o $TMP/bo"
    run "$MKS" $c -t "$Q" --chat-template chatml $extra "$TMP/pc.jsonl"
    expect_rc "$c --chat-template without a chat --format" 64
    run "$MKS" $c -t "$Q" --format dialog $extra "$TMP/pc.jsonl"
    expect_rc "$c: unknown --format" 64
    expect_err "$c --format lists the names" "text, chat, prompt-completion or auto"
    run "$MKS" $c -t "$Q" --format chat --loss-on prompt $extra "$TMP/pc.jsonl"
    expect_rc "$c: unknown --loss-on" 64
done
run "$MKS" build -t "$Q" -L 64 --over-long drop-turns -o "$TMP/bo" "$TMP/pc.jsonl"
expect_rc "build --over-long drop-turns on text records" 64

# --- build: chat records into version-2 shards; the same bytes on 1 and 2 threads, and with --part + merge
python3 - "$TMP" <<'PY'
import json, sys
t = sys.argv[1]
for k in range(2):  # two input files: --part 1/2 and 2/2 take one each
    with open(f"{t}/conv{k}.jsonl", "w") as f:
        for i in range(60):
            msgs = [{"role": "system", "content": "be brief"}]
            for j in range(1 + (i % 4)):
                msgs += [{"role": "user", "content": f"question {k} {i} {j} " + "why " * (i % 7)},
                         {"role": "assistant", "content": f"answer {k} {i} {j} " + "because " * (i % 9)}]
            if i % 13 == 5:
                msgs = msgs[:2]  # no assistant turn: dropped as no-loss-tokens
            f.write(json.dumps({"messages": msgs}) + "\n")
PY
common=(-t "$Q" --format chat --chat-template qwen2.5 -L 96 --pack bfd --over-long drop-turns --shard-tokens 2K -q)
run "$MKS" build "${common[@]}" -j1 -o "$TMP/j1" "$TMP/conv0.jsonl" "$TMP/conv1.jsonl"
expect_rc "build --format chat -j1" 0
run "$MKS" build "${common[@]}" -j2 -o "$TMP/j2" "$TMP/conv0.jsonl" "$TMP/conv1.jsonl"
expect_rc "build --format chat -j2" 0
for f in "$TMP"/j1/*.mks "$TMP/j1/manifest.json" "$TMP/j1/rejects.jsonl"; do
    same_file "-j1 = -j2: $(basename "$f")" "$f" "$TMP/j2/$(basename "$f")"
done
for k in 1 2; do
    run "$MKS" build "${common[@]}" --part $k/2 -o "$TMP/p$k" "$TMP/conv0.jsonl" "$TMP/conv1.jsonl"
    expect_rc "build --part $k/2" 0
done
run "$MKS" merge --out "$TMP/merged" "$TMP/p1" "$TMP/p2"
expect_rc "merge the two parts" 0
for f in "$TMP"/j1/*.mks "$TMP/j1/manifest.json"; do
    same_file "--part + merge = one build: $(basename "$f")" "$f" "$TMP/merged/$(basename "$f")"
done
run "$MKS" verify "$TMP/j1"
expect_rc "verify the chat set" 0
if grep -q '"no-loss-tokens"' "$TMP/j1/rejects.jsonl"; then pass "no-target samples listed as no-loss-tokens"
else fail "rejects.jsonl: $(head -3 "$TMP/j1/rejects.jsonl")"; fi
if python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); a=m["accounting"]; r=m["config"]["records"]
assert m["shard_format_version"] == 2 and r["chat_template"] == "qwen2.5" and 0 < a["tokens"]["loss"] < a["tokens"]["written"]
assert a["documents"]["turns_dropped"] > 0 and a["reject_reasons"]["no-loss-tokens"] == 10' "$TMP/j1/manifest.json"; then
    pass "manifest: version 2, records config, loss tokens beside tokens, turns dropped"
else fail "manifest accounting: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["accounting"])' "$TMP/j1/manifest.json")"; fi

# --- lint and hist on the same records
run "$MKS" lint -t "$Q" --format chat --chat-template qwen2.5 -L 96 "$TMP/conv0.jsonl"
expect_rc "lint: warnings only" 1
expect_err_out() { if grep -qF -- "$2" "$TMP/out"; then pass "$1"; else fail "$1: stdout lacks '$2': $(head -20 "$TMP/out")"; fi; }
expect_err_out "lint: chat-no-assistant with file:line" "conv0.jsonl:6 @"
expect_err_out "lint: over-long conversations and what drop-turns does" "drop-turns would drop"
run "$MKS" hist -t "$Q" --format chat --chat-template qwen2.5 -L 96 "$TMP/conv0.jsonl"
expect_rc "hist --format chat" 0
expect_err_out "hist: loss tokens" "target tokens"
expect_err_out "hist: drop-turns policy line" "drop-turns"

# --- tool calling (qwen2.5): a call without arguments is the template's refusal (lint error, one build
# reject); a tool-call message with null content is not an empty-content warning; the other record builds
printf '%s\n' '{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f"}}]}]}' \
    '{"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":1.5}}}]},{"role":"tool","content":"r"},{"role":"assistant","content":"done"}]}' \
    >"$TMP/tools.jsonl"
run "$MKS" lint -t "$Q" --format chat --chat-template qwen2.5 "$TMP/tools.jsonl"
expect_rc "lint: tool call without arguments is an error" 2
expect_err_out "lint: the template's message, file:line" "tools.jsonl:1 @0  Object of type Undefined is not JSON serializable"
if grep -qF chat-empty-content "$TMP/out"; then fail "lint: null content beside tool_calls flagged empty"; else
    pass "lint: null content beside tool_calls is not empty content"; fi
run "$MKS" build -t "$Q" --format chat --chat-template qwen2.5 -L 256 -o "$TMP/tools_out" "$TMP/tools.jsonl"
if [ "$rc" -le 1 ] && grep -q '"chat-template-refused' "$TMP/tools_out/rejects.jsonl" 2>/dev/null &&
    [ "$(wc -l <"$TMP/tools_out/rejects.jsonl")" -eq 1 ]; then pass "build: one reject for the refused record (exit $rc)"
else fail "build with a refused tool record: exit $rc; $err; $(cat "$TMP/tools_out/rejects.jsonl" 2>/dev/null)"; fi

echo "cli_chat: $fails failure(s)"
[ "$fails" -eq 0 ]
