#!/usr/bin/env bash
# Encoding a large text against the tokenizers library on the same text and threads: the license
# texts every Debian machine has, repeated to REPEAT x 237 KB (default 100: 23 MB), through each
# fixture tokenizer of tests/text/fixtures that TOKENIZERS names (default the byte-level ones:
# GPT-2's, Llama 3's and SmolLM2's pre-tokenizers; spm_legacy and metaspace are SentencePiece's). shardwise: `shardwise data prepare` (read, encoded as it streams, written as a
# token file) with THREADS threads (default 2). The library: Tokenizer.encode of the whole text
# (what transformers' tokenizer(text) does; RAYON_NUM_THREADS=THREADS), and encode_batch of its
# lines (its parallel form; ids differ from the whole text's where a line break joins a piece).
# The ids of `data prepare` are checked equal to encode's. Needs build/release and a Python with
# tokenizers (PY, default build/python-venv/bin/python). Prints a markdown table; rows in
# bench/results/tokenize.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/release/bin/shardwise
py=${PY:-build/python-venv/bin/python}
repeat=${REPEAT:-100}
threads=${THREADS:-2}
out=bench/results/tokenize.jsonl
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
find /usr/share/common-licenses -type f | LC_ALL=C sort | xargs cat >"$work/once.txt"
for _ in $(seq "$repeat"); do cat "$work/once.txt"; done >"$work/text.txt"
: >"$out"
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $threads threads," \
  "$(stat -c %s "$work/text.txt") bytes"
echo
echo "| tokenizer | shardwise MB/s | tokenizers encode MB/s | ratio | tokenizers encode_batch (lines) MB/s | ratio | same ids |"
echo "|---|---|---|---|---|---|---|"
for name in ${TOKENIZERS:-gpt2 llama3 smollm2}; do
  tokenizer=tests/text/fixtures/$name.tokenizer.json
  start=$(date +%s.%N)
  "$bin" data prepare "$work/text.txt" --tokenizer "$tokenizer" --out "$work/$name.u32" \
    --format tokens-u32 --threads "$threads" >/dev/null 2>&1
  end=$(date +%s.%N)
  RAYON_NUM_THREADS=$threads "$py" - "$tokenizer" "$work/text.txt" "$work/$name.u32" \
    "$start" "$end" "$name" "$out" <<'PY'
import array, json, sys, time
from tokenizers import Tokenizer
tokenizer_path, text_path, ids_path, began, ended, name, out = sys.argv[1:8]
tokenizer = Tokenizer.from_file(tokenizer_path)
text = open(text_path, encoding="utf-8").read()
size = len(text.encode("utf-8")) / 1e6
start = time.perf_counter()
ids = tokenizer.encode(text).ids
whole_s = time.perf_counter() - start
lines = text.splitlines(keepends=True)
start = time.perf_counter()
tokenizer.encode_batch(lines)
batch_s = time.perf_counter() - start
ours = array.array("I")
ours.frombytes(open(ids_path, "rb").read())
same = list(ours) == ids
ours_s = float(ended) - float(began)
row = {"tokenizer": name, "mb": size, "shardwise_s": ours_s, "encode_s": whole_s,
       "encode_batch_s": batch_s, "same_ids": same}
open(out, "a").write(json.dumps(row) + "\n")
print(f"| {name} | {size / ours_s:.1f} | {size / whole_s:.1f} | {whole_s / ours_s:.1f} | "
      f"{size / batch_s:.1f} | {batch_s / ours_s:.2f} | {'yes' if same else 'NO'} |")
PY
done
