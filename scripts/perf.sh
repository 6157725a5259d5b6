#!/usr/bin/env bash
# bench's own limits against the built-in mock server: ceiling, timing error, rate
# accuracy and memory.
#
#   bash scripts/perf.sh            # release build (about 8 minutes on 2 cores the first time)
#   PROFILE=dev bash scripts/perf.sh
#   ROWS="ceiling-64 rate-5000" bash scripts/perf.sh   # only some rows
#
# All rows use the random dataset with 128-token prompts, `ignore_eos`, and the first-party
# `openai` wasm backend decoding every chunk. With two or more cores the server is pinned
# to core 1 and bench to core 0.
#   ceiling-N: zero-delay server, 128-token streams, request rate inf, concurrency N.
#   timing-N:  server TTFT 50 ms / ITL 10 ms, 64-token streams, concurrency N; "err" is
#              bench's mean minus the server's own recorded mean (GET /mock/timing: when
#              each chunk actually left, from the request's arrival); "p99 err" is exact:
#              bench runs with --save-detailed and --request-id-prefix perf-, the server
#              keeps what it did per request id (GET /mock/requests), and each request's
#              TTFT and each of its gaps is paired with the server's (bench's request i is
#              perf-<i>; when an id has two entries, the ready check's and the run's, the
#              later one is the run's); the column is the p99 of |bench - server| over
#              requests (TTFT) or gaps (ITL). "unpaired" counts successful requests the
#              server has no entry for, and requests whose number of gaps differs from the
#              server's (their gaps are left out, not paired); both should be 0.
#   rate-R:    zero-delay server, 16-token streams, Poisson arrivals at R req/s, no
#              concurrency cap; achieved send rate and schedule lag (intended vs actual send).
#   memory-*:  peak RSS of bench (GNU time) for 100,000 requests with --save-detailed, and
#              for 10,000 concurrent streams.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${PROFILE:-release}
cargo build --profile "$profile" -p bench
dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
bench=$PWD/target/$dir/bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=${PORT:-18123}
pin_server="" pin_client=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server="taskset -c 1" pin_client="taskset -c 0"
fi
rows=${ROWS:-ceiling-64 ceiling-512 timing-64 timing-256 timing-1024 rate-1000 rate-5000 memory-100k memory-10k-streams}
want() { [[ " $rows " == *" $1 "* ]]; }

# label conc(or "none") prompts ttft_ms itl_ms output_len [extra bench flags...]
run() {
  local label=$1 conc=$2 n=$3 ttft=$4 itl=$5 out=$6
  shift 6
  local conc_flag=()
  [ "$conc" != none ] && conc_flag=(--max-concurrency "$conc")
  $pin_server "$bench" mock-server --port "$port" --ttft-ms "$ttft" --itl-ms "$itl" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
  /usr/bin/time -f %M -o "$tmp/$label.rss" $pin_client "$bench" --backend openai --model mock \
    --tokenizer tests/data/tokenizers/gpt2 --base-url "http://127.0.0.1:$port" \
    --random-input-len 128 --random-output-len "$out" --num-prompts "$n" "${conc_flag[@]}" \
    --disable-tqdm --save-result --result-dir "$tmp" --result-filename "$label.json" "$@" \
    >"$tmp/$label.log" 2>&1 || { cat "$tmp/$label.log"; kill $server; exit 1; }
  curl -sf "http://127.0.0.1:$port/mock/timing" >"$tmp/$label.server.json"
  if [[ $label == timing-* ]]; then
    curl -sf "http://127.0.0.1:$port/mock/requests" >"$tmp/$label.requests.json"
  fi
  kill $server; wait $server 2>/dev/null || true
}

echo "| scenario    | conc. |   reqs |  req/s | output tok/s | client CPU % | decode % | TTFT ms | TTFT err | p99 err | ITL ms | ITL err | p99 err | unpaired |"
echo "|-------------|------:|-------:|-------:|-------------:|-------------:|---------:|--------:|---------:|--------:|-------:|--------:|--------:|---------:|"
speed_row() { # label conc ttft
  python3 - "$tmp/$1.json" "$1" "$2" "$3" "$tmp/$1.server.json" "$tmp/$1.requests.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); label, conc = sys.argv[2], sys.argv[3]
s = json.load(open(sys.argv[5]))
timed = float(sys.argv[4]) > 0
err = lambda v, t: f"{v - t:+.2f}" if timed else "-"
busy = 100 * r["client_cpu_seconds"] / r["duration"]

def p99(values):  # numpy's default (linear) percentile, as bench and vLLM use
    if not values:
        return float("nan")
    v = sorted(values); k = (len(v) - 1) * 0.99; i = int(k)
    return v[-1] if i >= len(v) - 1 else v[i] + (v[i + 1] - v[i]) * (k - i)

ttft_p99 = itl_p99 = unpaired = "-"
if timed:
    truth = {e["id"]: e for e in json.load(open(sys.argv[6]))}  # later entries win
    ttft_err, itl_err, no_entry, other_len = [], [], 0, 0
    for i, (ttft, gaps, error) in enumerate(zip(r["ttfts"], r["itls"], r["errors"])):
        if error:
            continue
        e = truth.get(f"perf-{i}")
        if e is None:
            no_entry += 1
            continue
        ttft_err.append(abs(ttft * 1e3 - e["ttft_ms"]))
        if len(gaps) != len(e["itl_ms"]):
            other_len += 1
            continue
        itl_err.extend(abs(g * 1e3 - t) for g, t in zip(gaps, e["itl_ms"]))
    ttft_p99, itl_p99 = f"{p99(ttft_err):.2f}", f"{p99(itl_err):.2f}"
    unpaired = f"{no_entry} none, {other_len} len" if no_entry or other_len else "0"
print(f"| {label:<11} | {conc:>5} | {r['completed']:>6} | {r['request_throughput']:>6.0f} | {r['output_throughput']:>12.0f} "
      f"| {busy:>12.0f} | {100 * r['decode_cpu_share']:>8.0f} "
      f"| {r['mean_ttft_ms']:>7.2f} | {err(r['mean_ttft_ms'], s['mean_ttft_ms']):>8} | {ttft_p99:>7} "
      f"| {r['mean_itl_ms']:>6.2f} | {err(r['mean_itl_ms'], s['mean_itl_ms']):>7} | {itl_p99:>7} | {unpaired:>8} |")
PY
}
for c in 64 512; do
  want "ceiling-$c" && { run "ceiling-$c" "$c" "${N_CEILING:-20000}" 0 0 128; speed_row "ceiling-$c" "$c" 0; }
done
for c in 64 256 1024; do
  want "timing-$c" && {
    run "timing-$c" "$c" $((c * ${ROUNDS:-10})) 50 10 64 --save-detailed --request-id-prefix perf-
    speed_row "timing-$c" "$c" 50
  }
done

echo
echo "| scenario  | target req/s | reqs | achieved send rate | error % | lag mean ms | lag p99 ms | lag max ms |"
echo "|-----------|-------------:|-----:|-------------------:|--------:|------------:|-----------:|-----------:|"
for rate in 1000 5000; do
  want "rate-$rate" || continue
  run "rate-$rate" none $((rate * ${RATE_SECONDS:-10})) 0 0 16 --request-rate "$rate" --seed 1
  python3 - "$tmp/rate-$rate.json" "$rate" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); target = float(sys.argv[2])
rate = r["achieved_send_rate"]
print(f"| rate-{int(target):<4} | {target:>12.0f} | {r['completed'] + r['failed']:>4} | {rate:>18.1f} | {100 * (rate - target) / target:>+7.2f} "
      f"| {r['schedule_lag_ms_mean']:>11.3f} | {r['schedule_lag_ms_p99']:>10.3f} | {r['schedule_lag_ms_max']:>10.3f} |")
PY
done

echo
echo "| scenario          | requests | concurrency | completed | peak RSS MiB |"
echo "|-------------------|---------:|------------:|----------:|-------------:|"
mem_row() { # label n conc
  python3 - "$tmp/$1.json" "$1" "$2" "$3" "$tmp/$1.rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); rss_kib = int(open(sys.argv[5]).read().split()[-1])
print(f"| {sys.argv[2]:<17} | {int(sys.argv[3]):>8} | {sys.argv[4]:>11} | {r['completed']:>9} | {rss_kib / 1024:>12.0f} |")
PY
}
if want memory-100k; then
  run memory-100k 512 100000 0 0 128 --save-detailed
  mem_row memory-100k 100000 512
fi
if want memory-10k-streams; then
  run memory-10k-streams 10000 10000 0 10 128
  mem_row memory-10k-streams 10000 10000
fi
