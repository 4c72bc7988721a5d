#!/usr/bin/env bash
# cli_hf_shards.sh MKSHARDS SHARED_DIR DATA_DIR - shards for open models'
# tokenizer.json files (issue 15 item 6):
#   framing: Llama 3 <|begin_of_text|> ... <|end_of_text|>, Qwen2 ... <|endoftext|>
#   (defaults), --bos/--eos TOKEN|none, unknown token refused (exit 2), the
#   manifest records it; encode --bos/--eos;
#   u32 shards (Qwen2, 151,646 ids) that llmtrain trains on (tiny model, CPU),
#   and a tokenizer of another vocabulary refused by llmtrain.
# Exit 77 when the shared tokenizers or corpus are missing.
set -u
MKS=$1
SHARED=$2
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
Q=$SHARED/vocab/hf/qwen2/tokenizer.json
L3=$SHARED/vocab/hf/llama3/tokenizer.json
for f in "$Q" "$L3" "$SHARED/corpus/web.jsonl.zst"; do [ -f "$f" ] || { echo "skip: $f missing"; exit 77; }; done
[ -x "$LLM" ] || { echo "skip: no llmtrain at $LLM"; exit 77; }
command -v zstd >/dev/null || { echo "skip: no zstd"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
zstd -dc "$SHARED/corpus/web.jsonl.zst" 2>/dev/null | head -n 40 >"$T/in.jsonl"
man() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1]+"/manifest.json")); print(eval(sys.argv[2]))' "$@"; }

# ---- framing defaults
"$MKS" build -t "$L3" -L 64 -o "$T/l3" -j 2 --no-shuffle "$T/in.jsonl" >"$T/out" 2>"$T/err"
expect_rc 0 $? "build with Llama 3"
grep -q "framed as BOS <|begin_of_text|> (128000) + text + EOS <|end_of_text|> (128001)" "$T/err" &&
    ok "Llama 3 framing reported" || bad "framing line: $(cat "$T/err")"
[ "$(man "$T/l3" '[m["tokenizer"][k] for k in ("bos_id","bos","eos_id","eos","eot_id","pad_id")]')" = \
  "[128000, '<|begin_of_text|>', 128001, '<|end_of_text|>', 128001, 128001]" ] &&
    ok "manifest: tokenizer.bos/eos" || bad "manifest tokenizer: $(man "$T/l3" 'm["tokenizer"]')"
[ "$(man "$T/l3" 'm["config"]["framing"]["bos"]["id"], m["accounting"]["tokens"]["bos"]')" = "(128000, 40)" ] &&
    ok "manifest: config.framing, accounting.tokens.bos" || bad "manifest config/accounting"
"$MKS" verify "$T/l3" >"$T/out" 2>"$T/err"; expect_rc 0 $? "verify Llama 3 shards"
"$MKS" inspect "$T/l3" --row 0 --ids >"$T/out" 2>"$T/err"
grep -q "^    128000 1340 " "$T/out" && grep -q "BOS" <("$MKS" inspect "$T/l3") && ok "inspect shows BOS" || bad "inspect: $(head -30 "$T/out")"

"$MKS" build -t "$Q" -L 64 -o "$T/q" -j 2 "$T/in.jsonl" >"$T/out" 2>"$T/err"
expect_rc 0 $? "build with Qwen2"
grep -q "framed as" "$T/err" && bad "Qwen2 framing is tiktoken's: no framing line expected" || ok "Qwen2: no BOS, <|endoftext|> (no framing line)"
[ "$(man "$T/q" 'm["dtype"], m["tokenizer"]["eot_id"], m["tokenizer"]["vocab_size"], "framing" in m["config"]')" = \
  "('u32', 151643, 151646, False)" ] && ok "Qwen2 manifest: u32, eot 151643" || bad "Qwen2 manifest: $(man "$T/q" 'm["tokenizer"]')"
"$MKS" inspect "$T/q" >"$T/out" 2>&1
grep -q "u32" "$T/out" && ok "Qwen2 shard dtype u32" || bad "inspect: $(head -5 "$T/out")"
python3 - "$T/q" <<'EOF' && ok "shard header: dtype 4 bytes, ids above 65535 present" || bad "shard header"
import glob, struct, sys
f = sorted(glob.glob(sys.argv[1] + "/train-*.mks"))[0]
b = open(f, "rb").read()
dtype, row_len, vocab, pad, eot = struct.unpack_from("<IIIII", b, 16)[0], *struct.unpack_from("<IIII", b, 24)
assert dtype == 4 and vocab == 151646 and eot == 151643, (dtype, vocab, eot)
n = struct.unpack_from("<Q", b, 48)[0]
ids = struct.unpack_from("<%dI" % (n * row_len), b, 192)
assert max(ids) > 65535, max(ids)
EOF

# ---- overrides
"$MKS" build -q -t "$L3" -L 64 -o "$T/l3n" --bos none --eos '<|eot_id|>' "$T/in.jsonl" 2>"$T/err"
expect_rc 0 $? "--bos none --eos <|eot_id|>"
[ "$(man "$T/l3n" 'm["tokenizer"]["bos_id"], m["tokenizer"]["eos_id"], m["tokenizer"]["eot_id"]')" = "(None, 128009, 128009)" ] &&
    ok "override recorded" || bad "override manifest: $(man "$T/l3n" 'm["tokenizer"]')"
"$MKS" build -q -t "$L3" -L 64 -o "$T/l3x" --pack none --bos none --eos none "$T/in.jsonl" 2>"$T/err"
expect_rc 0 $? "--bos none --eos none"
"$MKS" verify "$T/l3x" >/dev/null 2>"$T/err"; expect_rc 0 $? "verify unframed shards"
"$MKS" build -q -t "$L3" -L 64 -o "$T/bad" --bos '<|no_such_token|>' "$T/in.jsonl" >"$T/out" 2>"$T/err"
expect_rc 2 $? "unknown --bos token refused"
grep -q "not a token" "$T/err" && ok "message: $(head -c 100 "$T/err")" || bad "message: $(cat "$T/err")"
[ -e "$T/bad/manifest.json" ] && bad "refused build wrote a manifest" || ok "nothing written"
# a different framing is another configuration: refused in the same folder without --force
"$MKS" build -q -t "$L3" -L 64 -o "$T/l3" --no-shuffle --bos none "$T/in.jsonl" >"$T/out" 2>"$T/err"
expect_rc 2 $? "other framing in a built folder refused without --force"

# ---- parts + merge = one build, with framing
mkdir -p "$T/two" && head -n 20 "$T/in.jsonl" >"$T/two/a.jsonl" && tail -n 20 "$T/in.jsonl" >"$T/two/b.jsonl"
"$MKS" build -q -t "$L3" -L 64 --pack bfd -o "$T/one" "$T/two" 2>"$T/err" &&
"$MKS" build -q -t "$L3" -L 64 --pack bfd --part 1/2 -o "$T/p1" "$T/two" 2>"$T/err" &&
"$MKS" build -q -t "$L3" -L 64 --pack bfd --part 2/2 -o "$T/p2" "$T/two" 2>"$T/err" &&
"$MKS" merge -q -o "$T/m" "$T/p1" "$T/p2" 2>"$T/err"
expect_rc 0 $? "framed parts built and merged"
diff -r "$T/one" "$T/m" >/dev/null && ok "merge of framed parts = one build (byte for byte)" || bad "merged differs: $(diff -r "$T/one" "$T/m" | head -5)"

# ---- encode --bos / --eos
head -n 2 "$T/in.jsonl" | "$MKS" encode -t "$L3" --bos default --eos default --ids-out - >"$T/ids" 2>"$T/err"
expect_rc 0 $? "encode --bos default --eos default"
python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; assert len(r)==2 and all(x[0]==128000 and x[-1]==128001 for x in r), r' "$T/ids" &&
    ok "encode framing" || bad "encode ids: $(head -c 200 "$T/ids")"
head -n 1 "$T/in.jsonl" | "$MKS" encode -t "$Q" --eos nope --ids-out - >"$T/ids" 2>"$T/err"
expect_rc 2 $? "encode: unknown --eos refused"

# ---- llmtrain on u32 shards (151,646-id embedding, tiny model)
"$MKS" build -q -t "$Q" -L 32 -o "$T/q32" "$T/in.jsonl" 2>"$T/err" || bad "build q32"
# a step of the 151,646-wide output layer takes ~30 s in a sanitizer build at -O0: one step there
STEPS=4
grep -qa __asan_init "$LLM" && STEPS=1 # an ASan build (the symbol, not ldd: ldd is not everywhere)
"$LLM" --data "$T/q32" --model tiny --seq-len 32 --steps $STEPS --token-budget 128 --batch-tokens 128 --lr 3e-3 \
    --seed 1 --log "$T/q.jsonl" --quiet >"$T/out" 2>"$T/err"
expect_rc 0 $? "llmtrain on Qwen2 u32 shards"
python3 - "$T/q.jsonl" $STEPS <<'EOF' && ok "$STEPS step(s), finite losses near ln(151646) = 11.9, falling" || bad "losses: $(cat "$T/q.jsonl")"
import json, math, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1]) if '"loss"' in x]
assert len(l) == int(sys.argv[2]) and all(math.isfinite(v) for v in l), l
assert 9 < l[0] < 14 and (len(l) == 1 or l[-1] < l[0]), l
EOF
"$LLM" --data "$T/q32" --model tiny --seq-len 32 --steps 1 --token-budget 128 --batch-tokens 128 --tokenizer "$L3" \
    >"$T/out" 2>"$T/err"
expect_rc 2 $? "llmtrain: Llama 3 tokenizer on Qwen2 shards refused"
grep -qi "tokenizer\|fingerprint\|vocab" "$T/err" && ok "message: $(head -c 140 "$T/err")" || bad "message: $(cat "$T/err")"
exit $fail
