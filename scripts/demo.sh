#!/usr/bin/env bash
# Builds bench (and its embedded plugins), starts the built-in mock server with known
# delays, and benchmarks it with the ShareGPT sample and the OpenAI chat backend.
set -euo pipefail
cd "$(dirname "$0")/.."

# The pinned toolchain and the wasm32-wasip2 target the plugins are built for.
bash scripts/toolchain.sh
cargo build
bench=target/debug/bench
port=${PORT:-18000}

"$bench" mock-server --port "$port" --ttft-ms 50 --itl-ms 10 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  sleep 0.1
done

"$bench" --plugin sharegpt --backend openai-chat \
  --dataset-path tests/data/datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json \
  --tokenizer tests/data/tokenizers/gpt2 --model mock \
  --base-url "http://127.0.0.1:$port" \
  --num-prompts 200 --max-concurrency 32 --request-rate 100 \
  --save-result --result-dir target/demo-results "$@"
