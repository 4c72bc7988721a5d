#!/usr/bin/env bash
# CLI test for SentencePiece .model files (tests/data/tk_spm): every command
# that takes --tokenizer accepts a BPE .model (by suffix or by content), the
# ids are sentencepiece's (edge cases from refs.jsonl.zst through
# make_tk_spm_fixtures.py: here a few fixed ones), a Unigram model encodes
# (tokenizer/unigram.c), and a WORD model is refused with exit 2 naming
# trainer_spec.model_type.
# Usage: cli_spm.sh MKSHARDS SHARED_DIR TEST_DATA_DIR
set -uo pipefail
MKS=$1
DATA=$3/tk_spm
T=$(mktemp -d "${TMPDIR:-/tmp}/mks_spm.XXXXXX")
trap 'rm -rf "$T"' EXIT
. "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
LL=$DATA/bpe_llama.model

printf '{"text":"Hello  World, \\uff46\\uff55\\uff4c\\uff4c 123 \\ud83d\\ude00"}\n{"text":"second doc"}\n' >"$T/in.jsonl"
# sentencepiece 0.2.3: SentencePieceProcessor(model_file=bpe_llama.model).encode([...])
cat >"$T/want" <<'IDS'
[511,320,329,259,2645,274,418,2575,2555,242,192,137,242,192,152,242,192,143,242,192,143,2555,2603,2607,2638,2555,243,162,155,131]
[524,1693,2352]
IDS
run 0 "encode with a .model" -- "$MKS" encode -t "$LL" -j 1 "$T/in.jsonl" --ids-out "$T/ids"
cmp -s "$T/ids" "$T/want" && ok "ids equal sentencepiece's" || bad "ids: $(cat "$T/ids")"
cp "$LL" "$T/tokenizer_file"   # no suffix: recognised by its content
run 0 "encode with a .model without its suffix" -- "$MKS" encode -t "$T/tokenizer_file" "$T/in.jsonl" --ids-out "$T/ids2"
cmp -s "$T/ids2" "$T/want" && ok "same ids by content" || bad "ids by content: $(cat "$T/ids2")"
mkdir "$T/folder" && cp "$LL" "$T/folder/tokenizer.model"   # a model folder without tokenizer.json
run 0 "encode with a folder holding tokenizer.model" -- "$MKS" encode -t "$T/folder" "$T/in.jsonl" --ids-out "$T/ids3"
cmp -s "$T/ids3" "$T/want" && ok "same ids from the folder" || bad "ids from the folder: $(cat "$T/ids3")"
run 0 "decode" -- "$MKS" decode -t "$LL" "$T/ids" -o "$T/text"
printf 'Hello  World, \xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c 123 \xf0\x9f\x98\x80\nsecond doc\n' >"$T/text_want"
cmp -s "$T/text" "$T/text_want" && ok "decode round trip (byte fallback)" || bad "decode: $(od -c "$T/text" | head)"
run 0 "tokenizer info" -- "$MKS" tokenizer info -t "$DATA/bpe_nmt.model"
"$MKS" tokenizer info -t "$DATA/bpe_nmt.model" 2>/dev/null | grep -q "pipeline: sentencepiece .model: charsmap nmt_nfkc" &&
    ok "info names the pipeline" || bad "info: $("$MKS" tokenizer info -t "$DATA/bpe_nmt.model" 2>&1 | head -5)"
run 0 "lint" -- "$MKS" lint -t "$LL" "$T/in.jsonl"
run 0 "hist" -- "$MKS" hist -t "$LL" "$T/in.jsonl"
run 0 "build" -- "$MKS" build -q -t "$LL" -L 16 -o "$T/shards" --no-shuffle "$T/in.jsonl"
run 0 "verify" -- "$MKS" verify "$T/shards"
"$MKS" inspect "$T/shards" --row 0 --ids >"$T/out" 2>&1
grep -q "^    1 511 320 " "$T/out" && ok "shards framed <s> ... </s> (ids 1, 2)" || bad "inspect: $(head -20 "$T/out")"
# Unigram: encoded (ids of sentencepiece 0.2.3 for "hello world"); WORD is refused by name
printf '{"text":"hello world"}\n' >"$T/hw.jsonl"
run 0 "Unigram .model encodes" -- "$MKS" encode -t "$DATA/unigram.model" "$T/hw.jsonl" --ids-out "$T/uni.ids"
grep -qx '\[206,402,15,3,47,45,24,9\]' "$T/uni.ids" && ok "Unigram ids = sentencepiece's" || bad "Unigram ids: $(cat "$T/uni.ids")"
"$MKS" tokenizer info -t "$DATA/unigram.model" >"$T/info" 2>&1
grep -q "| Unigram (Viterbi" "$T/info" && ok "tokenizer info names the Unigram pipeline" || bad "info: $(cat "$T/info")"
printf '\x0a\x09\x0a\x05<unk>\x18\x02\x12\x02\x18\x03' >"$T/word.model"
run 2 "WORD model refused" "trainer_spec.model_type" "model type WORD is not supported" -- "$MKS" encode -t "$T/word.model" "$T/hw.jsonl" --ids-out "$T/x"
printf '\x0a\x05\x0a\x03abc\x12\x02\x18' >"$T/broken.model"
run 2 "malformed protobuf refused" "broken.model" "malformed protobuf" -- "$MKS" encode -t "$T/broken.model" "$T/in.jsonl" --ids-out "$T/x"
run 2 "tokenizer export to tokenizer.json refused" "unsupported" -- "$MKS" tokenizer export -t "$LL" --out "$T/x.json"
run 2 "tokenizer export to .tiktoken refused" "unsupported" -- "$MKS" tokenizer export -t "$LL" --out "$T/x.tiktoken"
run 2 "--pattern refused" "--pattern" -- "$MKS" encode -t "$LL" -p cl100k "$T/in.jsonl" --ids-out "$T/x"
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
if [ -x "$LLM" ]; then
    for k in 1 2 3 4 5 6 7 8; do cat "$T/in.jsonl"; done >"$T/in8.jsonl"
    "$MKS" build -q -t "$LL" -L 16 -o "$T/s16" "$T/in8.jsonl" 2>"$T/err" || bad "build s16: $(cat "$T/err")"
    run 0 "llmtrain --tokenizer X.model (fingerprint matches the shards)" -- "$LLM" --data "$T/s16" --model tiny \
        --seq-len 16 --steps 2 --token-budget 64 --batch-tokens 64 --tokenizer "$LL" --quiet
    run 2 "llmtrain: another .model refused" "fingerprint" -- "$LLM" --data "$T/s16" --model tiny --seq-len 16 \
        --steps 1 --token-budget 64 --batch-tokens 64 --tokenizer "$DATA/bpe_ident_bf.model" --quiet
else
    echo "skip llmtrain: none at $LLM"
fi
exit $fail
