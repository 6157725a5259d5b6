#!/usr/bin/env bash
# bench's own limits against the built-in mock server: ceiling, timing error, rate
# accuracy and memory.
#
#   bash scripts/perf.sh            # release build (about 8 minutes on 2 cores the first time)
#   PROFILE=dev bash scripts/perf.sh
#   BENCH_BIN=path/to/bench bash scripts/perf.sh     # no build: that binary
#   ROWS="ceiling-64 rate-5000" bash scripts/perf.sh   # only some rows
#
# All rows use the random dataset with 128-token prompts, `ignore_eos`, and the first-party
# `openai` wasm backend decoding every chunk. With two or more cores the server is pinned
# to core 1 and bench to core 0.
#   ceiling-N: zero-delay server, 128-token streams, request rate inf, concurrency N.
#   ceiling-backends: ceiling-64 through each streaming backend (openai, openai-chat, tgi,
#              openai-responses, tensorrt-llm, sglang, llama.cpp, openai-audio), the mock
#              speaking its protocol.
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
#   prepare-L: preparing vLLM's default workload (`random`, L-token prompts, gpt2 tokenizer,
#              N_PREPARE_L prompts: 2,000 at 1024, 20,000 at 128): wall time of
#              `bench dataset sample` (the exact request set vLLM makes) against vLLM's Rust
#              client `vllm-bench --dry-run` (same dataset shape, its own draws), both on
#              core 0 alone, then both on every core. vllm-bench is looked for at
#              $VLLM_BENCH (default ~/.cache/bench-peers/vllm-bench/target/release/vllm-bench;
#              build it from github.com/vllm-project/vllm-bench with
#              `cargo build --release -p vllm-bench`); without it those columns say n/a.
#   prepare-100k: 100,000 prompts of 1,024 tokens on every core, bench only.
#   data-NAME: preparing dataset NAME (`bench dataset sample` with the options and data in
#              dataset_row below), against `vllm-bench --dry-run` with the same options
#              where vllm-bench has the dataset (it does not apply chat templates, and it
#              makes its own draws, not vLLM's request set), the same columns as prepare-L.
#              ROWS=data runs every dataset row.
#   workers-N: ceiling-512 (20,000 requests) as N client processes (`--workers N`, shards
#              of one run merged as `bench merge` does). The server needs cores of its own:
#              with 4 or more cores it gets the upper half and the clients the lower half
#              (WORKERS_CLIENT_CORES=C: the clients cores 0 to C-1, the server the rest);
#              on 2 cores the server keeps core 1 and every client process shares core 0,
#              so the rows there show what the shard path costs, not what more cores give.
#              "client CPU %" is the processes' CPU together, in % of one core.
#   dashboard: the live view's cost: ceiling-64 on a pseudo-terminal (`script`, 120 x 40)
#              with `--ui dashboard` and with the console, alternated DASHBOARD_ROUNDS (3)
#              times; median and range of req/s, and client CPU. Not in the default rows.
#   decode:    the plugin boundary's cost: `cargo bench -p bench --bench decode` (the OpenAI
#              completions decoder natively, in the `openai` wasm plugin, and the floor of
#              any wasm decoder; CPU time of the calling thread per chunk), its tables.
#   plugin-load: loading a plugin component: the first load (compiling it, fresh cache) and
#              the cached load (the median of 5), as the wall time of `bench plugin inspect`
#              (process start, load, instantiate, describe), for the Rust example
#              examples/dataset-lines (0.2 MB) and the Python example examples/dataset-python
#              (about 18 MB: it carries CPython; needs scripts/plugin-tools.sh, else n/a).
#
#   ROWS="..." bash scripts/perf.sh --write-readme MARKER
#              also writes the tables (those with rows) between the MARKER markers of the
#              page that holds them, docs/performance.md (scripts/readme_block.py: date,
#              commit, machine and this command); scripts/check_figures.py lists the perf
#              blocks and their rows.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --write-readme ]; then
  marker=${2:?--write-readme MARKER}
  report=$(mktemp)
  bash "$0" | tee "$report"
  # The tables that have rows: a header whose rows were not asked for is left out.
  python3 - "$report" <<'PY'
import sys
blocks, block = [], []
for line in open(sys.argv[1]).read().splitlines() + [""]:
    # A table and the lines around it are paragraphs of their own (Markdown would take a
    # line after the rows for a row).
    if block and line.strip() and block[-1].startswith("|") != line.startswith("|"):
        blocks.append(block)
        block = []
    if line.strip():
        block.append(line)
    elif block:
        blocks.append(block)
        block = []
kept = [b for b in blocks if not (b[0].startswith("|") and len(b) <= 2)]
open(sys.argv[1], "w").write("\n\n".join("\n".join(b) for b in kept) + "\n")
PY
  command="${ROWS:+ROWS=\"$ROWS\" }"
  for v in BENCH_BIN PROFILE N_CEILING ROUNDS RATE_SECONDS WORKERS_CLIENT_CORES ENGINE_THREADS ENGINE_ITERS DASHBOARD_ROUNDS; do
    [ -n "${!v:-}" ] && command+="$v=${!v} "
  done
  python3 scripts/readme_block.py --markdown "$marker" "${command}bash scripts/perf.sh --write-readme $marker" "$report"
  rm -f "$report"
  exit 0
fi

profile=${PROFILE:-release}
if [ -n "${BENCH_BIN:-}" ]; then
  # A binary built elsewhere (a machine without cargo or crates.io, such as a GPU host).
  bench=$(realpath "$BENCH_BIN")
else
  cargo build --profile "$profile" -p bench
  dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
  bench=$PWD/target/$dir/bench
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=${PORT:-18123}
pin_server="" pin_client=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server="taskset -c 1" pin_client="taskset -c 0"
fi
datasets="sharegpt sonnet prefix_repetition prefix_repetition-20k random-rerank random-mm custom custom_image custom_audio burstgpt spec_bench speed_bench hf timed_trace mooncake file"
rows=${ROWS:-plugin-load prepare-1024 prepare-128 prepare-100k data ceiling-64 ceiling-512 workers-1 workers-2 ceiling-backends timing-64 timing-256 timing-1024 rate-1000 rate-5000 memory-100k memory-10k-streams}
want() { [[ " $rows " == *" $1 "* ]] || { [[ $1 == data-* ]] && [[ " $rows " == *" data "* ]]; }; }

# peak_rss FILE CMD...: runs CMD, its peak RSS in KiB into FILE (GNU time; 0 without it).
if [ -x /usr/bin/time ]; then
  peak_rss() { /usr/bin/time -f %M -o "$1" "${@:2}"; }
else
  peak_rss() { echo 0 >"$1"; "${@:2}"; }
fi

# label conc(or "none") prompts ttft_ms itl_ms output_len [extra bench flags...]
run() {
  local label=$1 conc=$2 n=$3 ttft=$4 itl=$5 out=$6
  shift 6
  local conc_flag=()
  [ "$conc" != none ] && conc_flag=(--max-concurrency "$conc")
  ${PIN_SERVER-$pin_server} "$bench" mock-server --port "$port" --ttft-ms "$ttft" --itl-ms "$itl" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.05; done
  local cmd=(${PIN_CLIENT-$pin_client} "$bench" --backend "${BACKEND:-openai}" --model mock
    --tokenizer tests/data/tokenizers/gpt2 --base-url "http://127.0.0.1:$port"
    --random-input-len 128 --random-output-len "$out" --num-prompts "$n" "${conc_flag[@]}"
    --disable-tqdm --save-result --result-dir "$tmp" --result-filename "$label.json" "$@")
  # PTY=1: on a pseudo-terminal of 120 x 40 (util-linux `script`), as a user's terminal.
  if [ -n "${PTY:-}" ]; then
    cmd=(script -qec "stty cols 120 rows 40; exec $(printf '%q ' "${cmd[@]}")" /dev/null)
  fi
  peak_rss "$tmp/$label.rss" "${cmd[@]}" </dev/null \
    >"$tmp/$label.log" 2>&1 || { cat "$tmp/$label.log"; kill $server; exit 1; }
  curl -sf "http://127.0.0.1:$port/mock/timing" >"$tmp/$label.server.json"
  if [[ $label == timing-* ]]; then
    curl -sf "http://127.0.0.1:$port/mock/requests" >"$tmp/$label.requests.json"
  fi
  kill $server; wait $server 2>/dev/null || true
}

vllm_bench=${VLLM_BENCH:-$HOME/.cache/bench-peers/vllm-bench/target/release/vllm-bench}
# Wall seconds of a command ("n/a" when it cannot run): prepare_time <pin> <cmd...>
prepare_time() {
  local pin=$1
  shift
  [ -x "$1" ] || { echo n/a; return; }
  local t0 t1
  t0=$(date +%s.%N)
  $pin "$@" >"$tmp/prepare.log" 2>&1 || { cat "$tmp/prepare.log" >&2; echo failed; return; }
  t1=$(date +%s.%N)
  python3 -c "print(f'{$t1 - $t0:.2f}')"
}
prepare_row() { # label prompts input_len peer(yes/no)
  local label=$1 n=$2 len=$3 peer=$4
  bench_cmd=("$bench" dataset sample --dataset-name random --random-input-len "$len"
    --num-prompts "$n" --tokenizer tests/data/tokenizers/gpt2 --seed 0 -o /dev/null)
  peer_cmd=("$vllm_bench" --model gpt2 --tokenizer tests/data/tokenizers/gpt2
    --dataset-name random --random-input-len "$len" --num-prompts "$n" --seed 0 --dry-run)
  time_row "$label" "$n" "$peer"
}
# Times bench_cmd (and peer_cmd when peer=yes) on one core and on all: time_row label prompts peer
time_row() {
  local label=$1 n=$2 peer=$3 b1=n/a v1=n/a ball vall=n/a
  if [ "$peer" = yes ]; then
    b1=$(prepare_time "$pin_client" "${bench_cmd[@]}")
    v1=$(prepare_time "$pin_client" "${peer_cmd[@]}")
    vall=$(prepare_time "" "${peer_cmd[@]}")
  fi
  ball=$(prepare_time "" "${bench_cmd[@]}")
  python3 - "$label" "$n" "$b1" "$v1" "$ball" "$vall" <<'PY'
import sys
label, n, b1, v1, ball, vall = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
def cell(t):
    try:
        return f"{float(t):>7.2f} | {n / float(t):>9.0f}"
    except ValueError:
        return f"{t:>7} | {'-':>9}"
def ratio(a, b):
    try:
        return f"{float(b) / float(a):.1f}x"
    except ValueError:
        return "-"
print(f"| {label:<12} | {n:>7} | {cell(b1)} | {cell(v1)} | {ratio(b1, v1):>7} | {cell(ball)} | {cell(vall)} | {ratio(ball, vall):>7} |")
PY
}
# plugin_load_row label wasm: first and cached load of one component
plugin_load_row() {
  local label=$1 wasm=$2 cache="$tmp/plugin-cache-$1"
  if [ ! -f "$wasm" ]; then
    printf '| %-14s | %8s | %12s | %14s |\n' "$label" n/a n/a n/a
    return
  fi
  local first cached=()
  first=$(BENCH_CACHE_DIR=$cache prepare_time "" "$bench" plugin inspect "$wasm")
  for _ in 1 2 3 4 5; do
    cached+=("$(BENCH_CACHE_DIR=$cache prepare_time "" "$bench" plugin inspect "$wasm")")
  done
  python3 - "$label" "$wasm" "$first" "${cached[@]}" <<'PY'
import os, statistics, sys
label, wasm, first, *cached = sys.argv[1:]
ms = statistics.median(float(t) for t in cached) * 1000
print(f"| {label:<14} | {os.path.getsize(wasm) / 1e6:>8.1f} | {float(first):>12.2f} | {ms:>14.0f} |")
PY
}
if want decode; then
  cargo bench -q -p bench --bench decode 2>"$tmp/decode.log" || { cat "$tmp/decode.log" >&2; exit 1; }
  echo
fi
if want plugin-load; then
  echo "| plugin         | size MB | first load s | cached load ms |"
  echo "|----------------|--------:|-------------:|---------------:|"
  CARGO_TARGET_DIR=$PWD/target/example-plugin cargo build --release --target wasm32-wasip2 \
    --manifest-path examples/dataset-lines/Cargo.toml >/dev/null 2>&1
  plugin_load_row rust-lines target/example-plugin/wasm32-wasip2/release/dataset_lines.wasm
  python_wasm="$tmp/dataset_python.wasm"
  bash examples/dataset-python/build.sh "$python_wasm" >/dev/null 2>&1 || rm -f "$python_wasm"
  plugin_load_row python-csv "$python_wasm"
  echo
fi
if want prepare-1024 || want prepare-128 || want prepare-100k; then
  echo "| scenario     | prompts | bench 1 core s | prompts/s | vllm-bench 1 core s | prompts/s | speed-up | bench all cores s | prompts/s | vllm-bench all cores s | prompts/s | speed-up |"
  echo "|--------------|--------:|--------:|----------:|--------:|----------:|--------:|--------:|----------:|--------:|----------:|--------:|"
  want prepare-1024 && prepare_row prepare-1024 "${N_PREPARE_1024:-2000}" 1024 yes
  want prepare-128 && prepare_row prepare-128 "${N_PREPARE_128:-20000}" 128 yes
  want prepare-100k && prepare_row prepare-100k 100000 1024 no
  echo
fi

# dataset_row NAME: sets bench_cmd and peer_cmd for one dataset (peer_cmd empty: vllm-bench
# has no such dataset, or none that reads the same data) and times them.
dataset_row() {
  local name=$1 n=1000 tok=tests/data/tokenizers/gpt2 d=tests/data/datasets
  local args=() peer_args=() dataset=$1 peer=yes
  # Inputs large enough that the per-prompt work, not start-up, is measured: 20,000
  # first turns of the ShareGPT file as a custom JSONL, and a 10,000-line Mooncake trace.
  if [ ! -f "$tmp/prompts.jsonl" ]; then
    python3 - "$d/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json" >"$tmp/prompts.jsonl" <<'PY'
import json, sys
firsts = [c["conversations"][0]["value"] for c in json.load(open(sys.argv[1])) if c["conversations"]]
for i in range(20000):
    print(json.dumps({"prompt": firsts[i % len(firsts)], "output_tokens": 128}))
PY
    python3 scripts/synthetic_mooncake_trace.py 10000 >"$tmp/trace.jsonl"
    # 1,000 distinct lines over the six test clips (WAV, FLAC, MP3, Ogg), beside them.
    cp -r "$d/audio" "$tmp/audio"
    python3 - "$d/audio/clips.jsonl" >"$tmp/audio/clips1000.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for i in range(1000):
    row = dict(lines[i % len(lines)]); row["prompt"] = f"{row['prompt']} ({i})"
    print(json.dumps(row))
PY
  fi
  case $name in
    sharegpt) args=(--dataset-path "$d/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json") ;;
    sonnet) tok=tests/data/tokenizers/qwen3 args=(--dataset-path "$d/sonnet/sonnet.txt") ;;
    prefix_repetition) ;;
    prefix_repetition-20k) dataset=prefix_repetition n=20000 ;;
    random-rerank) n=10000 args=(--random-input-len 512 --random-batch-size 10) peer_args=(--backend vllm-rerank) ;;
    random-mm) n=100 peer_args=(--backend openai-chat) ;;
    custom) n=20000 args=(--dataset-path "$tmp/prompts.jsonl" --skip-chat-template) ;;
    custom_image) peer=no args=(--dataset-path "$d/custom_image/images.jsonl") ;;
    custom_audio) peer=no tok=tests/data/tokenizers/qwen3 args=(--dataset-path "$tmp/audio/clips1000.jsonl") ;;
    burstgpt) peer=no args=(--dataset-path "$d/burstgpt/burstgpt_synthetic.csv") ;;
    spec_bench) peer=no tok=tests/data/tokenizers/qwen3 args=(--dataset-path "$d/spec_bench/question.jsonl") ;;
    speed_bench) peer=no tok=tests/data/tokenizers/qwen3 args=(--dataset-path "$d/speed_bench") ;;
    hf) peer=no args=(--dataset-path "$d/hf/datasets--openai--gsm8k" --hf-name openai/gsm8k --skip-chat-template) ;;
    timed_trace) peer=no args=(--dataset-path "$tmp/trace.jsonl" --timed-trace-chunk-hash-size 512) ;;
    mooncake) peer=no args=(--dataset-path "$tmp/trace.jsonl") ;;
    file) peer=no n=20000 args=(--dataset-path "$tmp/prompts.jsonl") ;;
  esac
  bench_cmd=("$bench" dataset sample --dataset-name "$dataset" --tokenizer "$tok"
    --num-prompts "$n" --seed 0 -o /dev/null "${args[@]}")
  peer_cmd=("$vllm_bench" --model gpt2 --tokenizer "$tok" --dataset-name "$dataset"
    --num-prompts "$n" --seed 0 --dry-run "${args[@]}" "${peer_args[@]}")
  time_row "data-$name" "$n" "$peer"
}
if [[ " $rows " == *" data"* ]]; then
  echo "| scenario     | prompts | bench 1 core s | prompts/s | vllm-bench 1 core s | prompts/s | speed-up | bench all cores s | prompts/s | vllm-bench all cores s | prompts/s | speed-up |"
  echo "|--------------|--------:|--------:|----------:|--------:|----------:|--------:|--------:|----------:|--------:|----------:|--------:|"
  for name in $datasets; do
    want "data-$name" && dataset_row "$name"
  done
  echo
fi

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
# The same ceiling through N client processes (ROWS=workers-N; workers-1 and workers-2 by
# default): the server on the upper half of the cores, the clients on the lower half.
cores=$(nproc)
client_cores=${WORKERS_CLIENT_CORES:-$((cores / 2))}
if [ "$cores" -ge 4 ] && command -v taskset >/dev/null; then
  workers_server="taskset -c $client_cores-$((cores - 1))" workers_client="taskset -c 0-$((client_cores - 1))"
else
  workers_server=$pin_server workers_client=$pin_client
fi
for w in 1 2 4 8; do
  want "workers-$w" && {
    PIN_SERVER=$workers_server PIN_CLIENT=$workers_client \
      run "workers-$w" 512 "${N_CEILING:-20000}" 0 0 128 --workers "$w"
    speed_row "workers-$w" 512 0
  }
done
# Each streaming backend's ceiling (its decoder on the client's one core), against the mock
# speaking its protocol: ROWS=ceiling-backends.
if want ceiling-backends; then
  for b in openai openai-chat openai-responses tgi tensorrt-llm sglang llama.cpp; do
    BACKEND=$b run "ceiling-$b" 64 "${N_CEILING:-20000}" 0 0 128
    speed_row "ceiling-$b" 64 0
  done
  # Transcriptions: the test clips (tests/data/datasets/audio) uploaded as multipart forms,
  # answered as streamed transcription chunks.
  BACKEND=openai-audio run ceiling-openai-audio 64 "${N_CEILING:-20000}" 0 0 128 \
    --dataset-name custom_audio --dataset-path tests/data/datasets/audio/clips.jsonl \
    --custom-output-len 128
  speed_row ceiling-openai-audio 64 0
fi
for c in 64 256 1024; do
  want "timing-$c" && {
    run "timing-$c" "$c" $((c * ${ROUNDS:-10})) 50 10 64 --save-detailed --request-id-prefix perf-
    speed_row "timing-$c" "$c" 50
  }
done

# The live dashboard's cost (ROWS=dashboard): ceiling-64 on a pseudo-terminal, with
# `--ui dashboard` and with the console, alternated DASHBOARD_ROUNDS times (3), so that a
# drift of the machine falls on both; median, min and max of each.
if want dashboard; then
  echo
  echo "| scenario (pty, conc. 64) | runs | req/s median | req/s min-max | client CPU % median |"
  echo "|--------------------------|-----:|-------------:|--------------:|--------------------:|"
  for round in $(seq "${DASHBOARD_ROUNDS:-3}"); do
    for ui in console dashboard; do
      PTY=1 run "ui-$ui-$round" 64 "${N_CEILING:-20000}" 0 0 128 --ui "$ui"
      # A dashboard that fell back to the console would measure nothing.
      if grep -q "showing the console instead" "$tmp/ui-$ui-$round.log"; then
        echo "perf.sh: --ui dashboard was not shown on the pseudo-terminal" >&2
        exit 1
      fi
    done
  done
  python3 - "$tmp" "${DASHBOARD_ROUNDS:-3}" <<'PY'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
for ui in ("console", "dashboard"):
    runs = [json.load(open(f"{tmp}/ui-{ui}-{i}.json")) for i in range(1, rounds + 1)]
    rates = [r["request_throughput"] for r in runs]
    busy = [100 * r["client_cpu_seconds"] / r["duration"] for r in runs]
    print(f"| --ui {ui:<19} | {rounds:>4} | {statistics.median(rates):>12.0f} "
          f"| {min(rates):>6.0f}-{max(rates):<6.0f} | {statistics.median(busy):>19.0f} |")
PY
fi

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
