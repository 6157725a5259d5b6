#!/usr/bin/env bash
# Every command of issue 15's suite, end to end, against `bench mock-server` as the server
# bench starts and stops itself (its TTFT grows by --ttft-per-running-ms per request
# already running, so the server has a known capacity). No GPU, model or network.
#
#   bash examples/sweep/run.sh [OUT]       # OUT: where everything goes (default target/sweep-example)
#   BENCH=target/release/bench bash examples/sweep/run.sh
#
# The parameter files beside this script are vLLM's format: serve.json (server flags, two
# servers), bench.json (bench serve flags) and sla.json (the SLO of the search).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bench=${BENCH:-$repo/target/debug/bench}
out=${1:-$repo/target/sweep-example}
port=${PORT:-18765}
rm -rf "$out" && mkdir -p "$out"

serve_cmd="$bench mock-server --port $port --ttft-ms 20 --itl-ms 5"
bench_cmd="bench serve --model mock --base-url http://127.0.0.1:$port \
  --tokenizer $repo/tests/data/tokenizers/gpt2 --dataset-name random \
  --random-input-len 32 --random-output-len 8 --num-prompts 40 --disable-tqdm"

set -x
# 2 servers x 3 concurrencies, each run twice; then the curves and the Pareto front.
"$bench" sweep serve --serve-cmd "$serve_cmd" --bench-cmd "$bench_cmd" \
  --serve-params "$here/serve.json" --bench-params "$here/bench.json" --num-runs 2 \
  -o "$out" -e grid
"$bench" sweep plot "$out/grid" --var-x max_concurrency --var-y p99_ttft_ms \
  --curve-by ttft_per_running_ms --fig-dir "$out/figures"
"$bench" sweep plot_pareto "$out/grid"
# The largest concurrency whose p99 TTFT stays under 95 ms, per server: TTFT is 20 ms plus
# 1 or 16 ms per request already running, so the heavy server meets it up to 5 at once
# (20 + 16 x 4 = 84 ms; 6 give 100 ms), and the light one even with all 40 requests at once
# (59 ms), which the search reports as 65536, vLLM's stand-in for unbounded, after one run.
"$bench" sweep serve_sla --serve-cmd "$serve_cmd" --bench-cmd "$bench_cmd" \
  --serve-params "$here/serve.json" --sla-params "$here/sla.json" \
  --sla-variable max_concurrency --num-runs 1 -o "$out" -e sla
# An even scan from serial to batch load, 4 levels.
"$bench" sweep serve_workload --serve-cmd "$serve_cmd" --bench-cmd "$bench_cmd" \
  --workload-var max_concurrency --workload-iters 4 --num-runs 1 -o "$out" -e scan
# Cold and warm start times of the server.
"$bench" startup --serve-cmd "$serve_cmd" --num-iters-cold 2 --num-iters-warm 2 \
  --output-json "$out/startup.json"
# One serving run with figures, repeated 3 times for its noise; then two runs compared.
"$bench" mock-server --port "$port" --ttft-ms 20 --itl-ms 5 >/dev/null 2>&1 &
mock=$!
trap 'kill $mock 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
"$bench" ${bench_cmd#bench } --max-concurrency 4 --request-rate 50 --save-result --save-detailed \
  --result-dir "$out/runs" --result-filename base.json --num-runs 3 \
  --plot-timeline --plot-dataset-stats
"$bench" ${bench_cmd#bench } --max-concurrency 16 --request-rate 50 --save-result --save-detailed \
  --result-dir "$out/runs" --result-filename more.json
"$bench" compare "$out/runs/base-run1.json" "$out/runs/more.json"
"$bench" report "$out/runs/base-run1.json" "$out/runs/more.json" "$out/grid" \
  -o "$out/report.html"
