#!/bin/bash
# kill -9 a real `mkshards build` several times at random points, then run it
# again: the result must be byte-identical to an uninterrupted build. After
# every kill, each shard under its final name must verify (a half-written
# shard only ever exists as *.tmp) and a manifest, if present, must verify.
# Args: mkshards shared-dir tests-data-dir. Label: slow.
set -u
M=$1 SHARED=$2
export MKS_VOCAB_DIR=$SHARED/vocab
IN="$SHARED/corpus/web.jsonl.zst $SHARED/corpus/code.jsonl.zst $SHARED/corpus/multi.jsonl.zst"
for f in $IN; do [ -r "$f" ] || { echo "skip: $f missing"; exit 77; }; done
T=$(mktemp -d /tmp/cli_shards_kill.XXXXXX)
trap 'rm -rf "$T"' EXIT
OPTS="-t gpt2 -L 512 --val-fraction 0.02 --shard-tokens 128K --batch-bytes 256K"
if [ "${MKS_KILL_CHAT:-0}" = 1 ]; then
  # chat records (issue 28): conversations made from the corpus, version-2 shards with loss bits, drop-turns
  # fitting and bfd windows in the checkpoint (ctest cli_chat_kill)
  [ -r "$SHARED/vocab/hf/qwen2/tokenizer.json" ] || { echo "skip: no qwen2 tokenizer"; exit 77; }
  python3 - "$T/chat.jsonl" $IN <<'PY' || { echo "FAIL: making chat records"; exit 1; }
import json, subprocess, sys
with open(sys.argv[1], "w") as out:
    for path in sys.argv[2:]:
        for line in subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout.decode().splitlines():
            if not line.strip():
                continue
            parts = [p for p in json.loads(line)["text"].split("\n") if p.strip()][:9]
            msgs = [{"role": "system", "content": "be helpful"}]
            msgs += [{"role": "user" if i % 2 == 0 else "assistant", "content": p} for i, p in enumerate(parts)]
            out.write(json.dumps({"messages": msgs}) + "\n")
PY
  IN="$T/chat.jsonl"
  OPTS="-t $SHARED/vocab/hf/qwen2/tokenizer.json --format chat --chat-template qwen2.5 -L 512 --pack bfd \
        --bfd-window 16 --over-long drop-turns --val-fraction 0.02 --shard-tokens 128K --batch-bytes 256K"
fi
export MKS_CHECKPOINT_SECONDS=0   # checkpoint at every batch that wrote a shard (default: every 0.5 s)
fail() { echo "FAIL: $*"; trap - EXIT; echo "outputs kept in $T"; exit 1; }

start=$(date +%s.%N)
"$M" build $OPTS -j 1 -o "$T/ref" $IN || fail "reference build"
dur=$(echo "$(date +%s.%N) - $start" | bc)
dur_ms=$(echo "$dur * 1000 / 1" | bc)
echo "reference build: ${dur}s, $(ls "$T/ref" | wc -l) files"

RANDOM=4242
kills=0
for i in 1 2 3 4 5 6 7 8; do
  # a random point inside the expected run time
  ms=$(( 20 + RANDOM % (dur_ms * 3 / 10 + 1) ))
  "$M" build $OPTS -j 2 --resume -o "$T/out" $IN 2> >(tee -a "$T/stderr.log" >&2) &
  pid=$!
  sleep "$(printf '0.%03d' $((ms % 1000)))"; sleep $((ms / 1000))
  if kill -9 $pid 2>/dev/null; then kills=$((kills + 1)); fi
  wait $pid 2>/dev/null
  for s in "$T"/out/*.mks; do
    [ -e "$s" ] || continue
    "$M" verify -q "$s" || fail "after kill $i ($ms ms): $s is not a complete shard"
  done
  if [ -e "$T/out/manifest.json" ]; then
    "$M" verify -q "$T/out" || fail "after kill $i: manifest references a bad shard"
  fi
  echo "kill $i at ${ms} ms: $(ls "$T/out" | grep -c '\.mks$') shards on disk, $(ls "$T/out" | grep -c '\.tmp$') tmp, checkpoint: $([ -e "$T/out/build.ckpt" ] && echo yes || echo no)"
done
grep -q "resuming after" "$T/stderr.log" || fail "no run resumed from a checkpoint"
[ $kills -ge 3 ] || fail "only $kills runs were killed (machine too fast for the chosen delays?)"
"$M" build $OPTS -j 2 --resume -o "$T/out" $IN || fail "resume"
diff -r "$T/ref" "$T/out" || fail "resumed output differs from the uninterrupted build"
# and running once more on a complete set is a no-op
"$M" build $OPTS -o "$T/out" $IN || fail "rerun"
diff -r "$T/ref" "$T/out" || fail "rerun changed the output"
"$M" verify -q "$T/out" || fail "verify"
[ -e "$T/out/build.ckpt" ] && fail "checkpoint left behind"
echo "ok: $kills kills, resumed output byte-identical"
