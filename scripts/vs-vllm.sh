#!/usr/bin/env bash
# bench and vLLM's own benchmark client (`vllm bench serve`), side by side.
#
#   bash scripts/vs-vllm.sh                              # throughput mode: release build, then both
#   BENCH_BIN=target/release/bench bash scripts/vs-vllm.sh   # skip the build
#   bash scripts/vs-vllm.sh parity                       # parity mode: every result key compared
#   bash scripts/vs-vllm.sh parity --servers mock        # the mock only (no llama.cpp build)
#   bash scripts/vs-vllm.sh parity --servers vllm        # a real vLLM 0.32 (scripts/vllm-server.sh)
#   bash scripts/vs-vllm.sh parity --base-url http://127.0.0.1:8000 --model M   # your server
#
# vLLM is installed from PyPI into a virtualenv (VLLM_VENV, default target/vllm-venv) the
# first time only; it is several GB (torch and CUDA wheels) but runs fine as a client on a
# CPU-only machine. Both clients use the same local tokenizer and nothing is downloaded at
# run time (HF_HUB_OFFLINE=1).
#
# Throughput mode: the same workload against the same built-in mock server, in one run,
# printing the ratios.
# M1, client ceiling: zero-delay server, random dataset, 128-token prompts, 128-token
#   streams, ignore_eos, request rate inf, concurrency 64.
# M2, timing error: a server with TTFT 50 ms and ITL 10 ms, 64-token streams, concurrency
#   256; the error is the client's mean minus the server's own recorded mean
#   (GET /mock/timing), with a fresh server per run so the two cover the same requests.
# With two or more cores the server is pinned to core 1 and the client to core 0, as in
# scripts/perf.sh. vLLM's client is slower, so it gets fewer M1 prompts by default; each
# run still lasts seconds. Prompt counts: N_M1_VLLM, N_M1_BENCH, N_M2.
#
# Parity mode: both clients with the same flags, seed, dataset and server, each with
# --save-result --save-detailed, and scripts/parity.py prints every key the two result files
# share with both values and a verdict (exact for counts and request sets, element by
# element for lists; a stated tolerance for latencies and rates), then the keys only one
# side has, then a key-by-case matrix. Cases: datasets `random` (64-token prompts) and
# `sharegpt` (tests/data/datasets/sharegpt), both with 32 output tokens and --ignore-eos,
# through --backend openai (/v1/completions) and openai-chat (/v1/chat/completions),
# --max-concurrency 4, seed 0, against
#   mock:  `bench mock-server --ttft-ms 50 --itl-ms 10`, a fresh one per run (100 prompts),
#          tokenizer tests/data/tokenizers/gpt2;
#          tolerance: latency statistics max(2 ms, 5%), rates 5%; the mock's own mean TTFT
#          and ITL for each run (GET /mock/timing) are shown beside the clients';
#   llama: llama.cpp's llama-server with SmolLM2-135M-Instruct (built and cached by
#          scripts/real-server.sh), a fresh one per run (-c 8192 -np 4), SmolLM2's own
#          tokenizer (written from the GGUF by scripts/real-server.sh), 40 prompts
#          (16 for sharegpt, whose long prompts take minutes to prefill on a CPU),
#          --temperature 0 for both clients; vLLM runs twice, and each timing key's
#          tolerance is widened to twice the difference between its two runs (the server's
#          own run-to-run variation);
#   vllm:  vLLM 0.32.0 itself on this CPU with SmolLM2 (scripts/vllm-server.sh; its client
#          comes from the same environment), started once with --enable-per-request-metrics,
#          latency histogram buckets 2% apart (--custom-histogram-buckets: the server's own
#          median, p99 and spread of each run) and VLLM_SERVER_DEV_MODE=1, warmed up, its
#          prefix cache reset before every run;
#          datasets random, sharegpt, sonnet, prefix_repetition, burstgpt, spec_bench and
#          custom (tests/data/datasets), 4 to 16 prompts each, at a cap and at a Poisson
#          rate (--modes "cap poisson"), --temperature 0; vLLM runs twice as on llama; then
#          (--extras "responses embeddings rerank") openai-responses on the same server,
#          then openai-embeddings (random) and vllm-rerank (random-rerank: a query and 3
#          documents per request, --no-reranker) on a `--runner pooling` server. Each
#          run's deltas of vLLM's /metrics give more rows: each client's overhead (its
#          mean TTFT, TPOT and E2EL minus the server's own, from
#          vllm:time_to_first_token_seconds, vllm:request_time_per_output_token_seconds and
#          vllm:e2e_request_latency_seconds), bench's no larger than vLLM's client's within
#          twice vLLM's run-to-run difference, and the prefix-cache hits; a timing key that
#          differs by no more than twice the server's own change between the runs in the
#          statistic it follows (its mean, median, p99 or spread, relative) is marked
#          `server varies`, a stated cause;
#   --base-url URL: your running server instead (not restarted between runs, so its state,
#          e.g. a prefix cache, carries over; vLLM runs first, then bench, then vLLM again).
# Options: --servers "mock llama", --datasets "random sharegpt", --backends "openai
# openai-chat", --modes "cap poisson", --extras "responses embeddings rerank", --num-prompts N,
# --model M, --tokenizer T, --write-readme (the matrix into the guide page (docs/) between the
# parity-<servers> markers, with date, commit and versions; in throughput mode, the tables
# between the vs-vllm markers). Results and the printed tables
# are kept in PARITY_OUT (default target/parity-results/<date>). Exit status: 1 when a case
# differs without a stated cause (PARITY_GATE=exact: only an exact key, a count, a token
# total or a per-request list, fails it; timings are printed).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=throughput
# The command as given (less --write-readme), for the README's table: the figures say how
# they were made.
invocation="${BENCH_BIN:+BENCH_BIN=$BENCH_BIN }bash scripts/vs-vllm.sh$(for a in "$@"; do [ "$a" = --write-readme ] || printf ' %q' "$a"; done)"
if [ "${1:-}" = parity ]; then mode=parity; shift; elif [ "${1:-}" = throughput ]; then shift; fi
p_servers="mock llama" p_datasets="" p_backends="openai openai-chat" p_modes=""
p_base_url="" p_model="" p_prompts="" p_tokenizer="" p_readme=0 p_extras="responses embeddings rerank"
while [ $# -gt 0 ]; do
  case $1 in
    --servers) p_servers=$2; shift 2 ;;
    --datasets) p_datasets=$2; shift 2 ;;
    --modes) p_modes=$2; shift 2 ;;
    --extras) p_extras=$2; shift 2 ;;
    --write-readme) p_readme=1; shift ;;
    --backends) p_backends=$2; shift 2 ;;
    --base-url) p_base_url=$2; p_servers=external; shift 2 ;;
    --model) p_model=$2; shift 2 ;;
    --num-prompts) p_prompts=$2; shift 2 ;;
    --tokenizer) p_tokenizer=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "vs-vllm.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# 0.33.0 needs certifi>=2026.10.19, which the index reachable here does not have yet.
vllm_version=${VLLM_VERSION:-0.32.0}
venv=${VLLM_VENV:-target/vllm-venv}
port=${PORT:-18131}
n_m1_vllm=${N_M1_VLLM:-4000}
n_m1_bench=${N_M1_BENCH:-20000}
n_m2=${N_M2:-2560}
tokenizer=${p_tokenizer:-tests/data/tokenizers/gpt2}
llama_tokenizer=${p_tokenizer:-}  # default: SmolLM2's, from scripts/real-server.sh --setup-only
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

die() { echo "vs-vllm.sh: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 not found; install Python 3.10+ with its venv module"
command -v curl >/dev/null || die "curl not found (used to reach the mock server)"

if [ "$mode" = parity ] && [[ " $p_servers " == *" vllm "* ]]; then
  # The real vLLM's own environment (scripts/vllm-server.sh) holds vLLM's client too: one
  # install, and the client is the server's own version.
  bash scripts/vllm-server.sh --setup-only || die "scripts/vllm-server.sh --setup-only failed (above)"
  eval "$(bash scripts/vllm-server.sh --print-env)"
  vllm=("$VLLM_PY" -m vllm.entrypoints.cli.main)
else
  # Install only when the venv lacks this exact version: the download is several GB.
  installed=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null || true)
  # A local build of the release counts as the release (vllm-server.sh's environment is
  # vLLM's CPU wheel, 0.32.0+cpu: VLLM_VENV=~/.cache/bench-vllm/venv reuses it).
  if [ "${installed%%+*}" != "$vllm_version" ]; then
    if [ ! -x "$venv/bin/python" ]; then
      python3 -c 'import venv, ensurepip' 2>/dev/null \
        || die "python3 has no venv/ensurepip module (Debian/Ubuntu: apt-get install python3-venv)"
      python3 -m venv "$venv" || die "could not create the virtualenv $venv"
    fi
    echo "installing vllm==$vllm_version into $venv (several GB)..." >&2
    "$venv/bin/pip" install --quiet "vllm==$vllm_version" || die "pip install vllm==$vllm_version failed"
  fi
  vllm=("$venv/bin/vllm")
fi

source scripts/lib/processes.sh
bench_binary

pin_server="" pin_client="" pinning="unpinned"
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_server="taskset -c 1" pin_client="taskset -c 0" pinning="server on core 1, client on core 0"
fi

tmp=$(mktemp -d)

start_server() { # ttft_ms itl_ms
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 \
    && die "something already answers on port $port; set PORT to a free one"
  $pin_server "$bench" mock-server --port "$port" --ttft-ms "$1" --itl-ms "$2" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$tmp/server.log" >&2
  die "the mock server did not come up on port $port"
}

run() { # workload client prompts concurrency ttft_ms itl_ms output_len
  local workload=$1 client=$2 n=$3 conc=$4 ttft=$5 itl=$6 out=$7
  local label="$workload.$client" cmd
  case $client in
    vllm) cmd=("${vllm[@]}" bench serve) ;;
    bench) cmd=("$bench" serve) ;;
  esac
  start_server "$ttft" "$itl"
  # The same flags for both clients: bench takes vLLM's.
  $pin_client "${cmd[@]}" --backend openai --base-url "http://127.0.0.1:$port" \
    --endpoint /v1/completions --model mock --tokenizer "$tokenizer" \
    --dataset-name random --random-input-len 128 --random-output-len "$out" --ignore-eos \
    --num-prompts "$n" --max-concurrency "$conc" --request-rate inf --seed 0 --disable-tqdm \
    --save-result --result-dir "$tmp" --result-filename "$label.json" >"$tmp/$label.log" 2>&1 &
  client_pid=$!
  wait "$client_pid" || { tail -40 "$tmp/$label.log" >&2; die "$client failed on $workload"; }
  client_pid=""
  curl -sf "http://127.0.0.1:$port/mock/timing" >"$tmp/$label.server.json" \
    || die "could not read /mock/timing after $label"
  stop_server
  echo "$label $ttft" >>"$tmp/runs"
}

# ---------------------------------------------------------------------------------------
# Parity mode.
llama_bin="" llama_model=""
start_llama() {
  curl -s -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null \
    && die "something already answers on port $port; set PORT to a free one"
  "$llama_bin" -m "$llama_model" --alias smollm2-135m --host 127.0.0.1 --port "$port" \
    -c 8192 -np 4 -t "${LLAMA_THREADS:-2}" >"$tmp/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null)" = 200 ] && return
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$tmp/server.log" >&2
  die "llama-server did not come up on port $port"
}

# The real vLLM (scripts/vllm-server.sh): started once per set of serve flags, since a start
# takes minutes on a CPU, and warmed up (a fresh vLLM's first requests are 40% slower); its
# prefix cache is reset (VLLM_SERVER_DEV_MODE=1) before every client run, so that no run
# finds the previous run's prompts cached. vllm_flags holds the flags of the server that runs.
vllm_flags="-"
# Histogram buckets 2% apart from 1 ms to 10 min for the server's latency histograms (vLLM's
# defaults are up to 2.5x apart), so that its own quantiles of a run are read to within 2%.
fine_buckets=$(python3 -c 'import json; b = [float(f"{0.001 * 1.02 ** i:.6g}") for i in range(673)]
print(json.dumps({f: b for f in ("time_to_first_token", "inter_token_latency", "request_latency")}))')
start_vllm() { # vllm serve flags...
  [ "$vllm_flags" = "$*" ] && [ -n "$server_pid" ] && return
  stop_server
  curl -s -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null \
    && die "something already answers on port $port; set PORT to a free one"
  echo "starting vLLM (${*//"$fine_buckets"/FINE_BUCKETS}) on port $port..." >&2
  VLLM_SERVER_DEV_MODE=1 bash scripts/vllm-server.sh --port "$port" -- "$@" >"$out/vllm-server.$(date +%s).log" 2>&1 &
  server_pid=$!
  local t0=$SECONDS
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" 2>/dev/null)" = 200 ]; do
    kill -0 "$server_pid" 2>/dev/null || { tail -30 "$out"/vllm-server.*.log >&2; die "vLLM exited before it was ready"; }
    [ $((SECONDS - t0)) -lt "${VLLM_START_TIMEOUT:-900}" ] || die "vLLM was not ready in ${VLLM_START_TIMEOUT:-900} s"
    sleep 1
  done
  vllm_flags="$*"
  echo "vLLM ready in $((SECONDS - t0)) s; warming it up..." >&2
  # A pooling server answers embeddings only: warm it up with them.
  local warm=(--backend openai --ignore-eos)
  [[ " $* " == *" --runner pooling "* ]] && warm=(--backend openai-embeddings --endpoint /v1/embeddings)
  "$bench" serve "${warm[@]}" --base-url "http://127.0.0.1:$port" --model smollm2 \
    --tokenizer "$VLLM_TOKENIZER" --dataset-name random --random-input-len 64 --random-output-len 32 \
    --num-prompts 16 --max-concurrency 4 --seed 99 --disable-tqdm >"$out/warm-up.log" 2>&1 \
    || { tail -20 "$out/warm-up.log" >&2; die "the warm-up run against vLLM failed"; }
}

# Counters of vLLM's /metrics whose deltas over one client run the comparison uses: the
# server's own TTFT (request arrival to first token), end-to-end latency and time per output
# token (each request's mean), and the prefix cache's hits; and the bucket counts of its
# TTFT, inter-token latency, time per output token and end-to-end latency histograms
# (`hist`: [[upper bound, cumulative count], ...]), from which parity.py reads the
# server's own median, p99 and spread of the same requests.
prom_snapshot() { curl -sf "http://127.0.0.1:$port/metrics" >"$1" || : >"$1"; }
prom_delta() { # before after out.json
  python3 - "$@" <<'PY'
import json, re, sys
def read(path):
    """Each series summed over its labels, but a histogram bucket's `le`."""
    out = {}
    for line in open(path):
        m = re.match(r'^(vllm:[a-zA-Z0-9_:]+)(\{[^}]*\})? ([0-9.e+-]+)$', line.strip())
        if m:
            le = re.search(r'le="([^"]+)"', m.group(2) or "")
            key = m.group(1) + (f"|{le.group(1)}" if le else "")
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out
a, b = read(sys.argv[1]), read(sys.argv[2])
d = {k: b[k] - a.get(k, 0.0) for k in b}
hists = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
         "tpot": "vllm:request_time_per_output_token_seconds", "e2e": "vllm:e2e_request_latency_seconds"}
def buckets(name):
    rows = [(k.split("|", 1)[1], v) for k, v in d.items() if k.startswith(f"{name}_bucket|")]
    return sorted(rows, key=lambda r: float(r[0]))
keys = {"ttft_sum": "vllm:time_to_first_token_seconds_sum", "ttft_count": "vllm:time_to_first_token_seconds_count",
        "e2e_sum": "vllm:e2e_request_latency_seconds_sum", "e2e_count": "vllm:e2e_request_latency_seconds_count",
        "tpot_sum": "vllm:request_time_per_output_token_seconds_sum",
        "tpot_count": "vllm:request_time_per_output_token_seconds_count",
        "itl_sum": "vllm:inter_token_latency_seconds_sum", "itl_count": "vllm:inter_token_latency_seconds_count",
        "queue_sum": "vllm:request_queue_time_seconds_sum",
        "prefix_cache_hits": "vllm:prefix_cache_hits_total", "prefix_cache_queries": "vllm:prefix_cache_queries_total",
        "preemptions": "vllm:num_preemptions_total"}
out = {k: d.get(v) for k, v in keys.items()}
out["hist"] = {stat: buckets(name) for stat, name in hists.items() if buckets(name)}
json.dump(out, open(sys.argv[3], "w"))
PY
}

# The flags of one dataset, the same for both clients (bench takes vLLM's), with its prompt
# count on a CPU server (long prompts take seconds each to prefill).
dataset_flags() { # dataset -> sets extra=() and dn, its default prompt count
  case $1 in
    random) extra=(--dataset-name random --random-input-len 64 --random-output-len 32); dn=16 ;;
    sharegpt) extra=(--dataset-name sharegpt --dataset-path "$sharegpt" --sharegpt-output-len 32); dn=8 ;;
    sonnet) extra=(--dataset-name sonnet --dataset-path tests/data/datasets/sonnet/sonnet.txt
                   --sonnet-input-len 256 --sonnet-prefix-len 64 --sonnet-output-len 32); dn=8 ;;
    prefix_repetition) extra=(--dataset-name prefix_repetition --prefix-repetition-prefix-len 128
                   --prefix-repetition-suffix-len 32 --prefix-repetition-num-prefixes 4
                   --prefix-repetition-output-len 32); dn=16 ;;
    burstgpt) extra=(--dataset-name burstgpt --dataset-path tests/data/datasets/burstgpt/burstgpt_synthetic.csv); dn=4 ;;
    spec_bench) extra=(--dataset-name spec_bench --dataset-path tests/data/datasets/spec_bench/question.jsonl
                   --spec-bench-output-len 32); dn=8 ;;
    custom) extra=(--dataset-name custom --dataset-path tests/data/datasets/custom/prompts.jsonl
                   --custom-output-len 32); dn=12 ;;
    # 4 texts per request: SmolLM2 on a pooling server is a bi-encoder (vLLM scores by the
    # cosine of embeddings), not a native reranker, hence --no-reranker: one query shared by
    # every request, then 3 documents.
    random-rerank) extra=(--dataset-name random-rerank --random-input-len 64 --random-batch-size 4
                   --no-reranker); dn=8 ;;
    *) die "unknown dataset $1" ;;
  esac
}

# prun label client server dataset backend prompts [mode]: one client run; the result lands
# in $out/label.json, the client's output in $out/label.log, the mock's timing in
# $out/label.server.json, vLLM's /metrics deltas in $out/label.prom.json. A client that
# fails leaves no result; the comparison says so. mode: cap (--max-concurrency 4, all at
# once, the default) or poisson (--request-rate 2, Poisson arrivals, no cap).
prun() {
  local label=$1 client=$2 server=$3 dataset=$4 backend=$5 n=$6 lmode=${7:-cap}
  local cmd url model endpoint pin="" tok=$tokenizer
  case $client in
    vllm) cmd=("${vllm[@]}" bench serve) ;;
    bench) cmd=("$bench" serve) ;;
  esac
  case $backend in
    openai) endpoint=/v1/completions ;;
    openai-chat) endpoint=/v1/chat/completions ;;
    openai-responses) endpoint=/v1/responses ;;
    openai-embeddings) endpoint=/v1/embeddings ;;
    vllm-rerank) endpoint=/v1/rerank ;;
  esac
  local extra=() dn
  dataset_flags "$dataset"
  case $server in
    mock) start_server 50 10; url=http://127.0.0.1:$port model=mock pin=$pin_client ;;
    llama) start_llama; url=http://127.0.0.1:$port model=smollm2-135m tok=$llama_tokenizer; extra+=(--temperature 0) ;;
    vllm) url=http://127.0.0.1:$port model=smollm2 tok=$VLLM_TOKENIZER; extra+=(--temperature 0)
          curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || die "vLLM did not reset its prefix cache (VLLM_SERVER_DEV_MODE=1?)"
          prom_snapshot "$out/$label.prom-before" ;;
    external) url=$p_base_url model=$p_model ;;
  esac
  local load=(--max-concurrency 4 --request-rate inf)
  [ "$lmode" = poisson ] && load=(--request-rate 2 --burstiness 1)
  case $backend in openai-embeddings|vllm-rerank) ;; *) extra+=(--ignore-eos) ;; esac
  local rc=0
  $pin "${cmd[@]}" --backend "$backend" --base-url "$url" --endpoint "$endpoint" --model "$model" \
    --tokenizer "$tok" "${extra[@]}" --num-prompts "$n" "${load[@]}" \
    --seed 0 --disable-tqdm --save-result --save-detailed \
    --result-dir "$out" --result-filename "$label.json" >"$out/$label.log" 2>&1 &
  client_pid=$!
  wait "$client_pid" || rc=$?
  client_pid=""
  if [ "$rc" != 0 ]; then
    echo "vs-vllm.sh: $client exited $rc on $label; its output: $out/$label.log" >&2
    tail -5 "$out/$label.log" >&2
  fi
  if [ "$server" = mock ]; then
    curl -sf "http://127.0.0.1:$port/mock/timing" >"$out/$label.server.json" || rm -f "$out/$label.server.json"
  fi
  if [ "$server" = vllm ]; then
    prom_snapshot "$out/$label.prom-after"
    prom_delta "$out/$label.prom-before" "$out/$label.prom-after" "$out/$label.prom.json"
    rm -f "$out/$label.prom-before" "$out/$label.prom-after"
  fi
  [ "$server" = external ] || [ "$server" = vllm ] || stop_server
}

# One case: vLLM's client, bench, and (on a real server) vLLM's client again, whose
# difference from its first run is the server's run-to-run noise; then the comparison.
pcase() { # server dataset backend mode
  local server=$1 dataset=$2 backend=$3 lmode=$4 extra=() dn n
  dataset_flags "$dataset"
  n=$dn
  [ "$server" = mock ] && n=100
  [ "$server.$dataset" = llama.sharegpt ] && n=16
  [ "$server.$dataset" = llama.random ] && n=40
  n=${p_prompts:-$n}
  # random-rerank's --num-prompts counts texts (vLLM's RandomDatasetForReranking), 4 to a
  # request: N * 4 sends about as many requests as the other cases.
  [ "$dataset" = random-rerank ] && n=$((n * 4))
  local cname=$server.$dataset.$backend.$lmode
  echo "running $cname ($n prompts)..." >&2
  prun "$cname.vllm" vllm "$server" "$dataset" "$backend" "$n" "$lmode"
  prun "$cname.bench" bench "$server" "$dataset" "$backend" "$n" "$lmode"
  if [ "$server" != mock ]; then
    prun "$cname.vllm-again" vllm "$server" "$dataset" "$backend" "$n" "$lmode"
  fi
  if [ -f "$out/$cname.vllm.json" ] && [ -f "$out/$cname.bench.json" ]; then
    # The case's files by name (vLLM's second run, the mock's timing, vLLM's /metrics deltas);
    # `parity.py recompare DIR` compares them again the same way.
    python3 scripts/parity.py case --dir "$out" --case "$cname" --title "$cname ($n prompts)" | tee -a "$out/parity.md"
    summaries+=("$out/$cname.summary.json")
  elif [ -f "$out/$cname.bench.json" ] && grep -q "argument --dataset-name: invalid choice: '$dataset'" "$out/$cname.vllm.log"; then
    # A dataset vLLM's client no longer has (vLLM 0.32 dropped sonnet): nothing to compare
    # with, which is a stated cause, not a failure; bench's own run is kept.
    echo "### $cname: no comparison: vLLM $vllm_version's \`bench serve\` has no dataset '$dataset' ($(grep -o "choose from .*)" "$out/$cname.vllm.log" | head -1)); bench's run: $out/$cname.bench.json" | tee -a "$out/parity.md"
    echo "No comparison for $cname: vLLM $vllm_version's client has no dataset $dataset; bench's run completed $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["completed"])' "$out/$cname.bench.json") requests." >>"$out/notes.txt"
  else
    echo "### $cname: no comparison, a client wrote no result (see $out/$cname.*.log)" | tee -a "$out/parity.md"
    echo "No comparison for $cname: a client wrote no result." >>"$out/notes.txt"
    missing+=("$cname")
  fi
}

parity() {
  sharegpt=tests/data/datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json
  out=${PARITY_OUT:-target/parity-results/$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out"
  rm -f "$out/cases.txt" "$out/notes.txt"
  echo "$invocation" >"$out/command.txt"
  if [[ " $p_servers " == *" llama "* ]]; then
    local paths
    paths=$(bash scripts/real-server.sh --setup-only) || die "scripts/real-server.sh --setup-only failed"
    llama_bin=$(sed -n 's/^llama-server: //p' <<<"$paths")
    llama_model=$(sed -n 's/^model: //p' <<<"$paths")
    [ -n "$llama_tokenizer" ] || llama_tokenizer=$(sed -n 's/^tokenizer: //p' <<<"$paths")
    [ -f "$llama_tokenizer/tokenizer.json" ] || die "no SmolLM2 tokenizer at '$llama_tokenizer' (scripts/real-server.sh --setup-only writes it)"
  fi
  if [ "$p_servers" = external ] && [ -z "$p_model" ]; then
    p_model=$(curl -sf "$p_base_url/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])') \
      || die "could not read the model name from $p_base_url/v1/models; pass --model"
  fi
  summaries=() missing=()
  local when commit
  when=$(date -u '+%Y-%m-%d %H:%M UTC')
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  {
    echo "vLLM $vllm_version (\`vllm bench serve\`) vs bench ($bench, $("$bench" --version)), commit $commit, $when"
    echo "servers: $p_servers; backends: $p_backends; machine: $(nproc) cores, $(uname -m); mock pinning: $pinning"
    echo
  } | tee "$out/parity.md"
  for server in $p_servers; do
    local datasets=$p_datasets modes=$p_modes
    if [ "$server" = vllm ]; then
      [ -n "$datasets" ] || datasets="random sharegpt sonnet prefix_repetition burstgpt spec_bench custom"
      [ -n "$modes" ] || modes="cap poisson"
      # (Not for a run of the pooling extras alone: --backends "" --extras "embeddings".)
      if [ -n "$p_backends" ] || [[ " $p_extras " == *" responses "* ]]; then
        start_vllm --enable-per-request-metrics --custom-histogram-buckets "$fine_buckets"
      fi
    fi
    [ -n "$datasets" ] || datasets="random sharegpt"
    [ -n "$modes" ] || modes=cap
    for dataset in $datasets; do
      for backend in $p_backends; do
        for lmode in $modes; do
          pcase "$server" "$dataset" "$backend" "$lmode"
        done
      done
    done
    if [ "$server" = vllm ]; then
      # The other APIs vLLM serves: the Responses API on the same server, then embeddings
      # on a pooling server of the same model.
      local extras=$p_extras
      if [[ " $extras " == *" responses "* ]]; then pcase vllm random openai-responses cap; fi
      if [[ " $extras " == *" embeddings "* ]] || [[ " $extras " == *" rerank "* ]]; then
        start_vllm --runner pooling --custom-histogram-buckets "$fine_buckets"
        if [[ " $extras " == *" embeddings "* ]]; then pcase vllm random openai-embeddings cap; fi
        # vLLM 0.32 serves its scoring API (/v1/rerank) for an embedding model too
        # (vllm/entrypoints/pooling/utils.py enable_scoring_api: pooling task "embed").
        if [[ " $extras " == *" rerank "* ]]; then pcase vllm random-rerank vllm-rerank cap; fi
      fi
      stop_server
    fi
  done
  if [ ${#summaries[@]} -gt 0 ]; then
    { echo "### All cases"; echo; python3 scripts/parity.py matrix "${summaries[@]}"; } | tee -a "$out/parity.md"
  fi
  echo "results and this report: $out" >&2
  local verdict=0
  local gate=()
  [ "${PARITY_GATE:-all}" = exact ] && gate=(--exact-only)
  python3 scripts/parity.py verdict "${gate[@]}" "${summaries[@]}" || verdict=1
  [ ${#missing[@]} -eq 0 ] || { echo "vs-vllm.sh: no comparison for ${missing[*]}" >&2; verdict=1; }
  if [ "$p_readme" = 1 ]; then
    python3 scripts/parity.py readme --marker "parity-$(echo "$p_servers" | tr ' ' '-')" \
      --command "$invocation --write-readme" --verdict "$verdict" "$out"
  fi
  return $verdict
}

if [ "$mode" = parity ]; then
  parity
  exit $?
fi

echo "running M1 and M2 with vLLM $vllm_version and $bench ($pinning)..." >&2
run M1 vllm "$n_m1_vllm" 64 0 0 128
run M1 bench "$n_m1_bench" 64 0 0 128
run M2 vllm "$n_m2" 256 50 10 64
run M2 bench "$n_m2" 256 50 10 64

python3 - "$tmp" "$vllm_version" "$pinning" <<'PY' | tee "$tmp/report.md"
import json, sys
tmp, version, pinning = sys.argv[1:4]
rows = {}
for line in open(f"{tmp}/runs"):
    label, ttft = line.split()
    r = json.load(open(f"{tmp}/{label}.json"))
    s = json.load(open(f"{tmp}/{label}.server.json"))
    if r["failed"] or r["completed"] != s["first_tokens"]:
        sys.exit(f"{label}: {r['failed']} failed, {r['completed']} completed, "
                 f"server streamed {s['first_tokens']}")
    # The truth is what the server did (its own send times); with a zero-delay server
    # there is no delay to get wrong, so no error is shown (as in scripts/perf.sh).
    delayed = float(ttft) > 0
    rows[label] = dict(r=r, s=s, ttft_err=r["mean_ttft_ms"] - s["mean_ttft_ms"] if delayed else None,
                       itl_err=r["mean_itl_ms"] - s["mean_itl_ms"] if delayed else None)

err = lambda v: "-" if v is None else f"{v:+.2f}"
print(f"vLLM {version} (`vllm bench serve`) vs bench, mock server and client pinned: {pinning}\n")
print("| workload | client | prompts | req/s | output tok/s | mean TTFT ms | server TTFT ms | TTFT err ms | mean ITL ms | ITL err ms |")
print("|----------|--------|--------:|------:|-------------:|-------------:|---------------:|------------:|------------:|-----------:|")
for label, x in rows.items():
    workload, client = label.split(".")
    r, s = x["r"], x["s"]
    print(f"| {workload} | {'vLLM' if client == 'vllm' else 'bench'} | {r['completed']} "
          f"| {r['request_throughput']:.0f} | {r['output_throughput']:.0f} | {r['mean_ttft_ms']:.2f} "
          f"| {s['mean_ttft_ms']:.2f} | {err(x['ttft_err'])} | {r['mean_itl_ms']:.3f} | {err(x['itl_err'])} |")

v1, b1, v2, b2 = (rows[k] for k in ("M1.vllm", "M1.bench", "M2.vllm", "M2.bench"))
print("\n| workload | metric | vLLM | bench | bench / vLLM |")
print("|----------|--------|-----:|------:|-------------:|")
for name, key in (("req/s", "request_throughput"), ("output tok/s", "output_throughput"), ("mean TTFT ms", "mean_ttft_ms")):
    v, b = v1["r"][key], b1["r"][key]
    print(f"| M1 | {name} | {v:.2f} | {b:.2f} | {b / v:.2f}x |")
for name, key in (("abs. TTFT err ms", "ttft_err"), ("abs. ITL err ms", "itl_err")):
    v, b = abs(v2[key]), abs(b2[key])
    print(f"| M2 | {name} | {v:.3f} | {b:.3f} | {b / v:.3f}x |" if v else f"| M2 | {name} | {v:.3f} | {b:.3f} | - |")
PY
if [ "$p_readme" = 1 ]; then
  python3 scripts/readme_block.py --markdown vs-vllm "$invocation --write-readme" "$tmp/report.md"
fi
