#!/usr/bin/env bash
# bench's own ceiling and timing error against the built-in mock server.
#
#   bash scripts/perf.sh            # release build (about 8 minutes on 2 cores the first time)
#   PROFILE=dev bash scripts/perf.sh
#
# Ceiling: zero-delay server, 128-token streams, random dataset with 128-token prompts,
# request rate inf, concurrency 64 and 512. Timing error: a server with TTFT 50 ms and
# ITL 10 ms, 64-token streams; the error is bench's mean minus the server's own recorded
# mean (GET /mock/timing: when each chunk actually left, from the request's arrival).
# With two or more cores the server is pinned to core 1 and bench to core 0.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${PROFILE:-release}
cargo build --profile "$profile" -p bench
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
bench=target/$dir/bench
tmp=$(mktemp -d)
port=${PORT:-18123}
pin_server="" pin_client=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server="taskset -c 1" pin_client="taskset -c 0"
fi

run() { # label concurrency prompts ttft_ms itl_ms output_len
  local label=$1 conc=$2 n=$3 ttft=$4 itl=$5 out=$6
  $pin_server "$bench" mock-server --port "$port" --ttft-ms "$ttft" --itl-ms "$itl" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
  $pin_client "$bench" --backend openai --model mock --tokenizer tests/data/tokenizers/gpt2 \
    --base-url "http://127.0.0.1:$port" --random-input-len 128 --random-output-len "$out" \
    --num-prompts "$n" --max-concurrency "$conc" --disable-tqdm \
    --save-result --result-dir "$tmp" --result-filename "$label.json" >"$tmp/$label.log" 2>&1 \
    || { cat "$tmp/$label.log"; kill $server; exit 1; }
  curl -sf "http://127.0.0.1:$port/mock/timing" >"$tmp/$label.server.json"
  kill $server; wait $server 2>/dev/null || true
  python3 - "$tmp/$label.json" "$label" "$conc" "$ttft" "$itl" "$tmp/$label.server.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); label, conc = sys.argv[2], int(sys.argv[3])
# The truth is what the server did (its own send times), not only what it was asked.
s = json.load(open(sys.argv[6]))
ttft, itl = (s["mean_ttft_ms"], s["mean_itl_ms"]) if float(sys.argv[4]) > 0 else (0, 0)
err = lambda v, t: f"{v - t:+.2f}" if t > 0 else "-"
print(f"| {label:<11} | {conc:>5} | {r['completed']:>6} | {r['request_throughput']:>9.0f} | {r['output_throughput']:>11.0f} "
      f"| {r['mean_ttft_ms']:>8.2f} | {err(r['mean_ttft_ms'], ttft):>7} | {r['mean_itl_ms']:>7.2f} | {err(r['mean_itl_ms'], itl):>7} "
      f"| {r.get('schedule_lag_ms_p99', float('nan')):>8.3f} |")
PY
}

echo "| scenario    | conc. |   reqs |     req/s | output tok/s | TTFT ms | TTFT err | ITL ms | ITL err | lag p99 ms |"
echo "|-------------|------:|-------:|----------:|-------------:|--------:|---------:|-------:|--------:|-----------:|"
run ceiling-64 64 ${N_CEILING:-20000} 0 0 128
run ceiling-512 512 ${N_CEILING:-20000} 0 0 128
run timing-64 64 ${N_TIMING:-640} 50 10 64
run timing-256 256 ${N_TIMING_256:-2560} 50 10 64
rm -rf "$tmp"
