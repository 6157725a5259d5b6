#!/bin/sh
# Builds the plugin, runs a benchmark with it against `bench mock-server` (an
# OpenAI-compatible server on a free local port) and checks that every request completed.
#   BENCH            the bench binary (default: bench on PATH)
#   BENCH_TOKENIZER  a tokenizer: a local directory or tokenizer.json, or a Hugging Face
#                    id in the local cache (default: tokenizer/, GPT-2's)
#   NUM_PROMPTS      how many requests (default: 8)
set -eu
cd "$(dirname "$0")"
BENCH=${BENCH:-bench}
NUM=${NUM_PROMPTS:-8}

{{build}}
wasm={{wasm}}

work=$(mktemp -d)
: >"$work/mock.log"
"$BENCH" mock-server --port 0 >"$work/mock.log" 2>&1 &
mock=$!
trap 'kill $mock 2>/dev/null || true; rm -rf "$work"' EXIT
url=
for _ in $(seq 100); do
    url=$(sed -n 's/^bench mock-server listening on \([^ ]*\).*/\1/p' "$work/mock.log")
    [ -n "$url" ] && break
    sleep 0.1
done
if [ -z "$url" ]; then
    cat "$work/mock.log" >&2
    echo "test.sh: bench mock-server did not start" >&2
    exit 1
fi

"$BENCH" {{run}} \
    --model mock --base-url "$url" --tokenizer "${BENCH_TOKENIZER:-tokenizer}" \
    --num-prompts "$NUM" --disable-tqdm \
    --save-result --result-dir "$work" --result-filename result.json

# The result's top-level counts (the first "completed" and "failed" keys of the file).
count() { grep -o "\"$1\": *[0-9]*" "$work/result.json" | head -n 1 | grep -o '[0-9]*$'; }
completed=$(count completed)
failed=$(count failed)
if [ "$completed" = "$NUM" ] && [ "$failed" = 0 ]; then
    echo "test.sh: OK: $completed of $NUM requests completed"
else
    cat "$work/result.json" >&2
    echo "test.sh: FAILED: $completed of $NUM requests completed, $failed failed" >&2
    exit 1
fi
