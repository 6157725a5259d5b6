#!/usr/bin/env bash
# bench against a real vLLM 0.32.0 (scripts/vllm-server.sh: CPU, SmolLM2-135M-Instruct, on
# 127.0.0.1 only): what vLLM reports, and the server lifecycle. Not part of CI (a vLLM start
# takes about 90 s on 2 cores; see README "Against a real server (vLLM)").
#
#   bash scripts/vllm-checks.sh                        # every check
#   CHECKS="a b" bash scripts/vllm-checks.sh           # some checks only
#   BENCH_BIN=target/release/bench bash scripts/vllm-checks.sh   # skip bench's build
#   CHECKS=smoke bash scripts/vllm-checks.sh           # the short set (a and b)
#   bash scripts/vllm-checks.sh --write-readme         # also write the report into README.md
#   bash scripts/vllm-checks.sh --readme-from DIR/report.txt...   # earlier runs' reports there
#
# Each check prints PASS or FAIL with its figures; the script exits non-zero when any check
# failed. Results are kept in VLLM_CHECKS_OUT (default target/vllm-checks/<date>).
#   a  the server's own per-request timings (--enable-per-request-metrics), joined to bench's
#      records: openai and openai-chat, streamed; every completed request has a server TTFT
#      and queue time, and 0 < server TTFT <= bench's TTFT (bench's is measured from the
#      send, the server's from scheduling); mean_server_ttft_ms, mean_server_queue_ms and
#      mean_client_overhead_ms printed
#   b  what vLLM reports, read from vLLM (prefix_repetition, the prefix cache reset first):
#      bench's server_cached_prompt_tokens equals the delta of vllm:prefix_cache_hits_total,
#      its server_mean_queue_time_ms equals vllm:request_queue_time_seconds' sum/count
#      delta, and (--enable-prompt-tokens-details) the hits the responses reported equal it
#   c  preemption: a KV cache of 24 blocks of 16 tokens (--num-gpu-blocks-override 24,
#      --max-model-len 384), 8 requests of 64 + 256 tokens at once: bench's
#      server_preemptions equals the delta of vllm:num_preemptions_total, and is above 0
#   d  n-gram speculative decoding (--speculative-config ngram): bench's spec_decode_* keys
#      equal what vLLM 0.32's own fetch_spec_decode_metrics computes from the same counters
#   e  bench sweep serve --serve-cmd "vllm serve ..." over two --max-num-seqs with the
#      prefix cache reset between runs: in every run the measured prefix-cache hit rate
#      equals the theoretical one, and no server is left
#   f  bench startup, cold (fresh VLLM_CACHE_ROOT and compile caches) and warm (after one
#      unmeasured start that fills those caches), with and without --enforce-eager: the
#      times, and what warm saves
#   g  --profile with --profiler-config (vLLM 0.32 replaced VLLM_TORCH_PROFILER_DIR with it):
#      the run leaves a torch trace in the directory
#   h  the /tokenize re-alignment: the GPT-2 tokenizer against the SmolLM2 server; bench's
#      request set (prompt lengths, expected output lengths) equals vLLM's client's doing
#      the same
#   i  cancellation (--request-cancellation-rate 30 --request-cancellation-delay 2, 24
#      requests of 256 output tokens, 8 at a time): bench cancels some (above 0) and
#      completes the rest; vLLM finished (vllm:request_success_total, every reason) exactly
#      bench's completed, generated whole answers for those and less than whole ones for the
#      cancelled (vllm:generation_tokens_total), and has nothing left running or waiting: it
#      dropped the cancelled requests. vLLM 0.32 counts none of them in its
#      finished_reason="abort" series (the figure is printed)
#   j  Anthropic's Messages API (/v1/messages): anthropic-messages streamed, then whole
#      (stream=false), against openai-chat on the same 16 prompts (prefix_repetition, 4
#      shared prefixes), greedy, without --ignore-eos (the Messages API has none; chat is
#      sent "ignore_eos": false, which overrides the dataset's default): completed, prompt
#      and output lengths and texts equal chat's. Prompts that share a prefix are partly
#      prefix-cache reads, which Anthropic's usage reports apart from input_tokens: bench
#      adds them back (the prompt lengths must still be chat's), and the reads it counts
#      (cached_prompt_tokens) equal vllm:prefix_cache_hits_total's rise over the run
#   k  structured output under vLLM's guided decoding: the structured-output dataset's
#      json-unique workload (100 requests, each its own schema) through openai-chat with
#      response_format, and its choice workload (20) through openai (completions) with
#      structured_outputs, 8 at a time, without --ignore-eos: every answer is valid
#      (valid_output_rate 1.0), and bench's verdict on each equals Python's jsonschema
#      package's on the same text against the same schema (from `bench dataset sample`)
#   l  accuracy under load: the gsm8k dataset (120 questions of GSM8K's test split, vLLM's
#      5-shot prompt and stop strings) through openai (completions), greedy
#      (--temperature 0), one at a time twice with the same seed and then 16 at a time, the
#      prefix cache reset before each: every request completes and is graded; the two serial
#      runs give the same verdicts (reproducible; answers that part at a near-tie are
#      printed); bench's verdict on every answer of the three runs equals
#      a Python reimplementation of vLLM's get_answer_value's; the accuracies, their Wilson
#      intervals and how many verdicts load changed are printed
set -euo pipefail
cd "$(dirname "$0")/.."

port=${PORT:-18213}
url=http://127.0.0.1:$port
die() { echo "vllm-checks.sh: $*" >&2; exit 1; }

# The report between the README's markers, as a run measured it: never edited by hand.
readme_block() { python3 scripts/readme_block.py vllm-checks "$@"; } # command report.txt...
write_readme=0
[ "${1:-}" = --write-readme ] && write_readme=1
if [ "${1:-}" = --readme-from ]; then
  shift
  [ $# -gt 0 ] || die "--readme-from: name one or more report.txt files"
  for r in "$@"; do [ -f "$r" ] || die "--readme-from: no report at '$r'"; done
  readme_block "bash scripts/vllm-checks.sh, reports of $(for r in "$@"; do basename "$(dirname "$r")"; done | paste -sd, -)" "$@"
  exit 0
fi
checks=${CHECKS:-a b c d e f g h i j k l}
[ "$checks" = smoke ] && checks="a b"
out=${VLLM_CHECKS_OUT:-target/vllm-checks/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

want() { [[ " $checks " == *" $1 "* ]]; }

bash scripts/vllm-server.sh --setup-only || die "scripts/vllm-server.sh --setup-only failed (above)"
eval "$(bash scripts/vllm-server.sh --print-env)"
vllm=("$VLLM_PY" -m vllm.entrypoints.cli.main)

source scripts/lib/processes.sh
bench_binary

start_server() { # label [vllm serve flags...]
  local label=$1
  shift
  curl -s -o /dev/null "$url/health" 2>/dev/null && die "something already answers on port $port; set PORT to a free one"
  VLLM_SERVER_DEV_MODE=1 bash scripts/vllm-server.sh --port "$port" -- "$@" >"$out/$label.server.log" 2>&1 &
  server_pid=$!
  local t0=$SECONDS
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null)" = 200 ]; do
    kill -0 "$server_pid" 2>/dev/null || { tail -30 "$out/$label.server.log" >&2; server_pid=""; return 1; }
    [ $((SECONDS - t0)) -lt "${VLLM_START_TIMEOUT:-900}" ] || { tail -30 "$out/$label.server.log" >&2; return 1; }
    sleep 1
  done
  echo "   (vLLM $* ready in $((SECONDS - t0)) s)"
  # A fresh vLLM's first requests are slow: warm it up before anything is measured.
  run_bench "$label-warm-up" --dataset-name random --random-input-len 64 --random-output-len 16 \
    --num-prompts 8 --max-concurrency 4 --seed 99 || true
  curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || true
}
scrape() { curl -sf "$url/metrics" >"$out/$1.prom" || die "could not read $url/metrics"; }

# run_bench label [bench flags...]: the result lands in $out/label.json, the output in
# $out/label.log; returns bench's exit status. Requests ignore EOS unless eos_flag is set
# (empty: they stop at the model's end of text).
run_bench() {
  local label=$1
  shift
  local rc=0
  "$bench" serve --base-url "$url" --model smollm2 --tokenizer "${tok:-$VLLM_TOKENIZER}" \
    ${eos_flag---ignore-eos} --disable-tqdm --save-result --save-detailed --result-dir "$out" \
    --result-filename "$label.json" "$@" >"$out/$label.log" 2>&1 &
  client_pid=$!
  wait "$client_pid" || rc=$?
  client_pid=""
  [ $rc -eq 0 ] || tail -20 "$out/$label.log" >&2
  return $rc
}

failures=0
verdict() { # the analysis printed "PASS ..." or "FAIL ..." as its last line
  local text
  text=$(cat)
  echo "$text"
  [[ "$(tail -1 <<<"$text")" == PASS* ]] || failures=$((failures + 1))
}

# The sum of every sample of a metric family (all label sets) in a saved scrape.
prom_sum() { # file metric
  python3 - "$@" <<'PY'
import re, sys
total = 0.0
for line in open(sys.argv[1]):
    m = re.match(r'^([a-zA-Z0-9_:]+)(\{[^}]*\})? ([0-9.eE+-]+)$', line.strip())
    if m and m.group(1) == sys.argv[2]:
        total += float(m.group(3))
print(repr(total))
PY
}
delta() { # metric: after - before over the last two scrapes named $before $after
  python3 -c "print($(prom_sum "$out/$after.prom" "$1") - $(prom_sum "$out/$before.prom" "$1"))"
}

# Everything below is also kept in $out/report.txt, which --write-readme puts in the README.
exec > >(tee "$out/report.txt")
echo "bench $("$bench" --version) against vLLM 0.32.0 (CPU, SmolLM2-135M-Instruct), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo "unknown (not a git checkout)"), $(nproc) cores; results in $out"
bash scripts/vllm-server.sh --setup-report

# a, b, h, i, j and k: one server with the per-request metrics and the prompt token details.
if want a || want b || want h || want i || want j || want k || want l; then
  start_server ab --enable-per-request-metrics --enable-prompt-tokens-details || die "vLLM did not start (log: $out/ab.server.log)"
fi

if want a; then
  for backend in openai openai-chat; do
    rc=0
    run_bench "a-$backend" --backend "$backend" --dataset-name random --random-input-len 64 \
      --random-output-len 32 --num-prompts 16 --max-concurrency 4 --seed 0 || rc=$?
    echo "a. the server's per-request timings, $backend (bench exit $rc)"
    verdict < <(python3 - "$out/a-$backend.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL a: no result ({e})"); sys.exit()
ok = [i for i, e in enumerate(r["errors"]) if not e]
st, sq, t = r.get("server_ttfts") or [], r.get("server_queue_times") or [], r["ttfts"]
have = [i for i in ok if i < len(st) and st[i] is not None and i < len(sq) and sq[i] is not None]
bounded = [i for i in have if 0 < st[i] <= t[i]]
print(f"   {len(ok)} completed, {len(have)} with the server's TTFT and queue time, "
      f"{len(bounded)} with 0 < server TTFT <= bench TTFT; mean TTFT {r['mean_ttft_ms']:.1f} ms: "
      f"server TTFT mean {r.get('mean_server_ttft_ms', float('nan')):.1f} / median "
      f"{r.get('median_server_ttft_ms', float('nan')):.1f} / p99 {r.get('p99_server_ttft_ms', float('nan')):.1f} ms, "
      f"server queue {r.get('mean_server_queue_ms', float('nan')):.2f} ms, "
      f"client overhead {r.get('mean_client_overhead_ms', float('nan')):.2f} ms")
good = ok and len(have) == len(ok) == len(bounded) and "mean_client_overhead_ms" in r
print(("PASS" if good else "FAIL") + f" a: {len(bounded)}/{len(ok)} requests")
PY
)
  done
fi

if want b; then
  curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || die "vLLM did not reset its prefix cache"
  before=b-before after=b-after
  scrape $before
  rc=0
  run_bench b --backend openai --dataset-name prefix_repetition --prefix-repetition-prefix-len 128 \
    --prefix-repetition-suffix-len 32 --prefix-repetition-num-prefixes 4 \
    --prefix-repetition-output-len 16 --num-prompts 32 --max-concurrency 4 --seed 0 || rc=$?
  scrape $after
  echo "b. what vLLM reports, prefix_repetition (bench exit $rc)"
  verdict < <(python3 - "$out/b.json" "$(delta vllm:prefix_cache_hits_total)" \
    "$(delta vllm:request_queue_time_seconds_sum)" "$(delta vllm:request_queue_time_seconds_count)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
hits, qsum, qcount = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
bench_hits = r.get("server_cached_prompt_tokens")
reported = r.get("cached_prompt_tokens")
queue = r.get("server_mean_queue_time_ms")
want_queue = 1000 * qsum / qcount if qcount else None
print(f"   server_cached_prompt_tokens {bench_hits}, vllm:prefix_cache_hits_total +{hits:.0f}; "
      f"hits the responses reported (usage.prompt_tokens_details) {reported}; "
      f"server_mean_queue_time_ms {queue}, vLLM's histogram {want_queue} over {qcount:.0f} requests "
      f"(bench: {r.get('server_queue_time_requests')}); prefix-cache hit rate measured "
      f"{r.get('prefix_cache_hit_rate')}, theoretical {r.get('theoretical_prefix_cache_hit_rate')}")
good = (bench_hits is not None and bench_hits == hits and hits > 0 and reported == hits
        and queue is not None and want_queue is not None and abs(queue - want_queue) < 1e-6 * max(1, want_queue))
print(("PASS" if good else "FAIL") + f" b: cached {bench_hits} = {hits:.0f}, queue {queue} = {want_queue}")
PY
)
fi

if want h; then
  rc=0
  tok=tests/data/tokenizers/gpt2 run_bench h-bench --backend openai --dataset-name random \
    --random-input-len 64 --random-output-len 8 --num-prompts 8 --max-concurrency 4 --seed 0 || rc=$?
  vrc=0
  "${vllm[@]}" bench serve --backend openai --base-url "$url" --model smollm2 \
    --tokenizer tests/data/tokenizers/gpt2 --dataset-name random --random-input-len 64 \
    --random-output-len 8 --num-prompts 8 --max-concurrency 4 --seed 0 --ignore-eos --disable-tqdm \
    --save-result --save-detailed --result-dir "$out" --result-filename h-vllm.json >"$out/h-vllm.log" 2>&1 || vrc=$?
  echo "h. /tokenize re-alignment, GPT-2 tokenizer against the SmolLM2 server (bench exit $rc, vLLM exit $vrc)"
  verdict < <(python3 - "$out/h-bench.json" "$out/h-vllm.json" "$out/h-bench.log" "$out/h-vllm.log" <<'PY'
import json, sys
try:
    b, v = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    print(f"FAIL h: a client wrote no result ({e})"); sys.exit()
same = b["input_lens"] == v["input_lens"] and b["total_input_tokens"] == v["total_input_tokens"]
print(f"   input_lens bench {b['input_lens']}, vLLM {v['input_lens']}; total input {b['total_input_tokens']} / {v['total_input_tokens']}")
print(("PASS" if same else "FAIL") + " h: the same request set as vLLM's client")
PY
)
fi
if want i; then
  before=i-before after=i-after
  scrape $before
  rc=0
  run_bench i --backend openai-chat --dataset-name random --random-input-len 64 \
    --random-output-len 256 --num-prompts 24 --max-concurrency 8 --seed 0 \
    --request-cancellation-rate 30 --request-cancellation-delay 2 || rc=$?
  # vLLM drops an abandoned request at its next engine step: give it a moment.
  sleep 2
  scrape $after
  echo "i. cancellation: 30% of 24 requests closed 2 s after they were sent (bench exit $rc)"
  verdict < <(python3 - "$out/i.json" "$out/$before.prom" "$out/$after.prom" <<'PY'
import json, re, sys
def series(path, name, where=""):
    total = 0.0
    for line in open(path):
        m = re.match(r'^([a-zA-Z0-9_:]+)(\{[^}]*\})? ([0-9.eE+-]+)$', line.strip())
        if m and m.group(1) == name and where in (m.group(2) or ""):
            total += float(m.group(3))
    return total
def rose(name, where=""):
    return series(sys.argv[3], name, where) - series(sys.argv[2], name, where)
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL i: no result ({e})"); sys.exit()
cancelled, completed, failed = r.get("cancelled"), r["completed"], r["failed"]
finished = rose("vllm:request_success_total")
aborted = rose("vllm:request_success_total", 'finished_reason="abort"')
generated = rose("vllm:generation_tokens_total")
left = series(sys.argv[3], "vllm:num_requests_running") + series(sys.argv[3], "vllm:num_requests_waiting")
print(f"   bench: completed {completed}, failed {failed}, cancelled {cancelled} "
      f"(requests {r.get('cancelled_requests')}); vLLM: finished +{finished:.0f} "
      f"(finished_reason=\"abort\" +{aborted:.0f}), generated +{generated:.0f} tokens "
      f"({completed} whole answers are {completed * 256}), running + waiting after {left:.0f}")
partial = generated - completed * 256
good = (cancelled is not None and cancelled > 0 and failed == 0 and completed + cancelled == 24
        and finished == completed and left == 0 and 0 <= partial < cancelled * 256)
print(("PASS" if good else "FAIL") + f" i: vLLM finished {finished:.0f} = bench completed {completed}, "
      f"dropped the {cancelled} cancelled after {partial:.0f} tokens")
PY
)
fi
if want j; then
  rc=0
  workload=(--dataset-name prefix_repetition --prefix-repetition-prefix-len 128
    --prefix-repetition-suffix-len 32 --prefix-repetition-num-prefixes 4
    --prefix-repetition-output-len 48 --num-prompts 16 --max-concurrency 4 --seed 0)
  for run in chat messages messages-whole; do
    case $run in
      chat) flags=(--backend openai-chat --extra-body '{"ignore_eos": false}') ;;
      messages) flags=(--backend anthropic-messages) ;;
      messages-whole) flags=(--backend anthropic-messages --backend-option stream=false) ;;
    esac
    curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || die "vLLM did not reset its prefix cache"
    scrape "j-$run-before"
    eos_flag= run_bench "j-$run" "${flags[@]}" "${workload[@]}" || rc=$?
    scrape "j-$run-after"
  done
  echo "j. Anthropic's Messages API against chat completions, the same 16 prompts (bench exit $rc)"
  verdict < <(python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
def hits(run):
    total = {}
    for when in ("before", "after"):
        total[when] = 0.0
        for line in open(f"{out}/j-{run}-{when}.prom"):
            m = re.match(r'^([a-zA-Z0-9_:]+)(\{[^}]*\})? ([0-9.eE+-]+)$', line.strip())
            if m and m.group(1) == "vllm:prefix_cache_hits_total":
                total[when] += float(m.group(3))
    return total["after"] - total["before"]
try:
    chat, streamed, whole = (json.load(open(f"{out}/j-{run}.json")) for run in ("chat", "messages", "messages-whole"))
except (OSError, ValueError) as e:
    print(f"FAIL j: no result ({e})"); sys.exit()
keys = ["completed", "failed", "input_lens", "output_lens", "generated_texts"]
good = chat["completed"] == 16 and chat["failed"] == 0
for run, r in [("messages", streamed), ("messages-whole", whole)]:
    differ = [k for k in keys if r.get(k) != chat.get(k)]
    read, server = r.get("cached_prompt_tokens"), hits(run)
    good = good and not differ and read is not None and read == server > 0
    print(f"   {run}: completed {r['completed']}, failed {r['failed']}, prompt tokens "
          f"{r['total_input_tokens']} (chat {chat['total_input_tokens']}), cache reads "
          f"{read} (vllm:prefix_cache_hits_total +{server:.0f}), output tokens "
          f"{r['total_output_tokens']} (chat {chat['total_output_tokens']}), texts equal "
          f"{sum(a == b for a, b in zip(r['generated_texts'], chat['generated_texts']))}/16, "
          f"differing keys {differ or 'none'}; mean TTFT {r['mean_ttft_ms']:.1f} ms (chat "
          f"{chat['mean_ttft_ms']:.1f}), mean ITL {r.get('mean_itl_ms', float('nan')):.2f} ms "
          f"(chat {chat['mean_itl_ms']:.2f})")
gaps = sum(len(g) for g in streamed["itls"]), sum(len(g) for g in chat["itls"])
print(f"   timed gaps: Messages {gaps[0]}, chat {gaps[1]} (vLLM's chat stream opens with a "
      f"chunk carrying the role and sends empty deltas the Messages stream leaves out)")
print(("PASS" if good else "FAIL") + " j: Messages counts equal chat's, streamed and whole; "
      "the cache reads it reported equal vLLM's counter")
PY
)
fi
if want k; then
  rc=0
  json=(--dataset-name structured-output --structured-output-kind json-unique --num-prompts 100
    --output-len 512 --seed 0)
  eos_flag= run_bench k-json --backend openai-chat --max-concurrency 8 "${json[@]}" || rc=$?
  "$bench" dataset sample --tokenizer "$VLLM_TOKENIZER" "${json[@]}" \
    --output "$out/k-json.requests.jsonl" >"$out/k-json.requests.log" 2>&1 || rc=$?
  eos_flag= run_bench k-choice --backend openai --backend-option structured-output=structured-outputs \
    --dataset-name structured-output --structured-output-kind choice --num-prompts 20 \
    --max-concurrency 8 --seed 0 || rc=$?
  echo "k. structured output under vLLM's guided decoding (bench exit $rc)"
  verdict < <("$VLLM_PY" - "$out" <<'PY'
import json, sys
import jsonschema
out = sys.argv[1]
try:
    runs = {k: json.load(open(f"{out}/k-{k}.json")) for k in ("json", "choice")}
    sent = [json.loads(line) for line in open(f"{out}/k-json.requests.jsonl")]
except (OSError, ValueError) as e:
    print(f"FAIL k: no result ({e})"); sys.exit()
good = True
for name, r, n in [("json-unique, chat, response_format", runs["json"], 100),
                   ("choice, completions, structured_outputs", runs["choice"], 20)]:
    rate = r.get("valid_output_rate")
    good = good and r["completed"] == n and r.get("structured_output_requests") == n and rate == 1.0
    print(f"   {name}: completed {r['completed']}/{n}, constrained {r.get('structured_output_requests')}, "
          f"valid {r.get('valid_outputs')}, invalid {r.get('invalid_outputs')}, valid_output_rate "
          f"{rate}, 95% interval {r.get('valid_output_rate_ci95')}, mean output tokens "
          f"{r['total_output_tokens'] / max(r['completed'], 1):.1f}, mean TTFT {r['mean_ttft_ms']:.0f} ms, duration {r['duration']:.1f} s")
r = runs["json"]
agree = 0
for i, (request, text, verdict) in enumerate(zip(sent, r["generated_texts"], r["valid_output"])):
    try:
        jsonschema.validate(json.loads(text), request["output_constraint"]["json_schema"])
        theirs = True
    except (ValueError, jsonschema.ValidationError):
        theirs = False
    agree += theirs == verdict
good = good and len(sent) == 100 and agree == 100
from importlib.metadata import version
print(f"   Python's jsonschema {version('jsonschema')} agrees with bench on {agree}/{len(sent)} answers")
print(("PASS" if good else "FAIL") + " k: every guided answer valid, bench's verdicts equal Python's jsonschema's")
PY
)
fi
if want l; then
  rc=0
  gsm=(--dataset-name gsm8k --dataset-path tests/data/datasets/gsm8k/test.jsonl --num-prompts 120
    --temperature 0 --seed 0 --backend openai)
  for run in serial:1 serial-again:1 load:16; do
    # Each run finds the prefix cache as the first did (empty): the 5-shot prefix is shared.
    curl -sf -X POST "$url/reset_prefix_cache" >/dev/null || true
    eos_flag= run_bench "l-${run%%:*}" "${gsm[@]}" --max-concurrency "${run##*:}" || rc=$?
  done
  echo "l. accuracy under load: GSM8K on SmolLM2-135M, greedy (bench exit $rc)"
  verdict < <(python3 - "$out" tests/data/datasets/gsm8k/test.jsonl <<'PY'
import ast, json, re, sys
out, path = sys.argv[1:3]
def answer(text):  # vLLM's tests/evals/gsm8k get_answer_value, written out again
    numbers = re.findall(r"\d+", text.replace(",", ""))
    if not numbers:
        return None
    try:
        return ast.literal_eval(numbers[-1])
    except SyntaxError:
        return None
problems = [json.loads(l) for l in open(path) if not l.startswith("#")]
labels = [answer(p["answer"]) for p in problems[5:]]  # five shots, then the questions
try:
    runs = {k: json.load(open(f"{out}/l-{k}.json")) for k in ("serial", "serial-again", "load")}
except (OSError, ValueError) as e:
    print(f"FAIL l: no result ({e})"); sys.exit()
good = True
for name, r in runs.items():
    ours = [answer(t) == labels[i % len(labels)] for i, t in enumerate(r["generated_texts"])]
    agree = sum(a == b for a, b in zip(ours, r["correct"]))
    lo, hi = r["accuracy_ci95"]
    good = good and r["completed"] == 120 and r["graded_requests"] == 120 and agree == 120
    print(f"   {name}: completed {r['completed']}/120, graded {r['graded_requests']}, correct "
          f"{r['correct_requests']}, accuracy {r['accuracy']:.4f} (95% interval {lo:.4f} to "
          f"{hi:.4f}), invalid answers {r['invalid_answers']}, correct answers/s "
          f"{r['correct_request_throughput']:.3f}, mean output tokens "
          f"{r['total_output_tokens'] / max(r['completed'], 1):.1f}, duration {r['duration']:.1f} s; "
          f"Python's get_answer_value agrees on {agree}/120")
a, b, c = runs["serial"], runs["serial-again"], runs["load"]
# Reproducible means the same verdicts: vLLM on CPU is not bitwise repeatable, so an answer
# may part from the first run's at a near-tie (printed, with where it parted).
same_texts = sum(x == y for x, y in zip(a["generated_texts"], b["generated_texts"]))
good = good and a["correct"] == b["correct"]
changed = sum(x != y for x, y in zip(a["correct"], c["correct"]))
print(f"   same seed again, one at a time: {same_texts}/120 answers identical, verdicts "
      f"{'identical' if a['correct'] == b['correct'] else 'different'}; 16 at a time: "
      f"{changed} verdicts differ from the serial run's")
for i, (x, y) in enumerate(zip(a["generated_texts"], b["generated_texts"])):
    if x != y:
        at = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
        print(f"   answer {i} parted at character {at}: {x[max(0, at - 20):at + 20]!r} / "
              f"{y[max(0, at - 20):at + 20]!r}; verdicts {a['correct'][i]} / {b['correct'][i]}")
print(("PASS" if good else "FAIL") + " l: every answer graded as Python grades it, the same seed gives the same verdicts")
PY
)
fi
if want a || want b || want h || want i || want j || want k || want l; then stop_server; fi

if want c; then
  if start_server c --num-gpu-blocks-override 24 --max-model-len 384; then
    before=c-before after=c-after
    scrape $before
    rc=0
    run_bench c --backend openai --dataset-name random --random-input-len 64 --random-output-len 256 \
      --num-prompts 8 --max-concurrency 8 --seed 0 || rc=$?
    scrape $after
    echo "c. preemption with a KV cache of 24 blocks (bench exit $rc)"
    verdict < <(python3 - "$out/c.json" "$(delta vllm:num_preemptions_total)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
want = float(sys.argv[2])
got = r.get("server_preemptions")
print(f"   server_preemptions {got}, vllm:num_preemptions_total +{want:.0f}; completed {r['completed']}/{r['num_prompts']}")
print(("PASS" if got is not None and got == want and want > 0 else "FAIL") + f" c: {got} = {want:.0f} > 0")
PY
)
    stop_server
  else
    echo "c. FAIL: vLLM did not start with --num-gpu-blocks-override 24 (log: $out/c.server.log)"
    failures=$((failures + 1))
  fi
fi

if want d; then
  spec='{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'
  if start_server d --speculative-config "$spec"; then
    rc=0
    run_bench d --backend openai --dataset-name prefix_repetition --prefix-repetition-prefix-len 128 \
      --prefix-repetition-suffix-len 16 --prefix-repetition-num-prefixes 2 \
      --prefix-repetition-output-len 32 --num-prompts 8 --max-concurrency 4 --seed 0 --temperature 0 || rc=$?
    # vLLM's client on the same server: its fetch_spec_decode_metrics over its own run.
    vrc=0
    "${vllm[@]}" bench serve --backend openai --base-url "$url" --model smollm2 --tokenizer "$VLLM_TOKENIZER" \
      --dataset-name prefix_repetition --prefix-repetition-prefix-len 128 --prefix-repetition-suffix-len 16 \
      --prefix-repetition-num-prefixes 2 --prefix-repetition-output-len 32 --num-prompts 8 \
      --max-concurrency 4 --seed 0 --temperature 0 --ignore-eos --disable-tqdm --save-result \
      --result-dir "$out" --result-filename d-vllm.json >"$out/d-vllm.log" 2>&1 || vrc=$?
    echo "d. n-gram speculative decoding (bench exit $rc, vLLM exit $vrc)"
    verdict < <(python3 - "$out/d.json" "$out/d-vllm.json" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
try:
    v = json.load(open(sys.argv[2]))
except (OSError, ValueError):
    v = {}
keys = ["spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
        "spec_decode_acceptance_rate", "spec_decode_acceptance_length"]
print("   bench: " + ", ".join(f"{k[12:]} {b.get(k)}" for k in keys))
print("   vLLM's client (its own run): " + ", ".join(f"{k[12:]} {v.get(k)}" for k in keys))
# The same requests, greedy, on the same server: the counters' deltas are the same.
good = all(k in b for k in keys) and all(b.get(k) == v.get(k) for k in keys[:3]) and b["spec_decode_num_drafts"] > 0
print(("PASS" if good else "FAIL") + " d: bench's spec_decode keys against vLLM's fetch_spec_decode_metrics")
PY
)
    stop_server
  else
    echo "d. n-gram speculative decoding: vLLM 0.32 did not start with it on this CPU (log: $out/d.server.log):"
    grep -iE "error|not supported" "$out/d.server.log" | tail -3 | sed 's/^/   /'
    echo "FAIL d: not runnable here"
    failures=$((failures + 1))
  fi
fi

serve_cmd="env VLLM_SERVER_DEV_MODE=1 VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 $VLLM_PY -m vllm.entrypoints.cli.main serve $VLLM_MODEL --served-model-name smollm2 --host 127.0.0.1 --port $port --max-model-len 2048 --dtype bfloat16 --enforce-eager"

if want e; then
  echo '[{"max_num_seqs": 2}, {"max_num_seqs": 4}]' >"$out/e-serve.json"
  rc=0
  VLLM_CACHE_ROOT=$VLLM_CACHE_ROOT "$bench" sweep serve --serve-cmd "$serve_cmd --enable-prompt-tokens-details" \
    --serve-params "$out/e-serve.json" --num-runs 1 \
    --bench-cmd "--backend openai --base-url $url --model smollm2 --tokenizer $VLLM_TOKENIZER --seed 0 \
      --dataset-name prefix_repetition --prefix-repetition-prefix-len 128 --prefix-repetition-suffix-len 32 \
      --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 16 --num-prompts 16 \
      --max-concurrency 4 --ignore-eos --disable-tqdm" \
    -o "$out/e" >"$out/e.log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || tail -20 "$out/e.log" >&2
  left=$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null || true)
  echo "e. bench sweep serve over vLLM --max-num-seqs 2 and 4 (bench exit $rc; after it, /health answers: ${left:-nothing})"
  verdict < <(python3 - "$out/e" "$rc" "$left" <<'PY'
import glob, json, os, sys
folder, rc, left = sys.argv[1:4]
runs = []
for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
    try:
        r = json.load(open(path))
    except ValueError:
        continue
    if isinstance(r, dict) and "theoretical_prefix_cache_hit_rate" in r:
        runs.append((os.path.relpath(path, folder), r.get("prefix_cache_hit_rate"), r["theoretical_prefix_cache_hit_rate"]))
for name, measured, theory in runs:
    print(f"   {name}: measured hit rate {measured}, theoretical {theory}")
good = rc == "0" and len(runs) == 2 and all(m is not None and abs(m - t) < 1e-9 for _, m, t in runs) and left in ("", "000")
print(("PASS" if good else "FAIL") + f" e: {len(runs)} runs, hit rates equal: {all(m == t for _, m, t in runs)}, server gone: {left in ('', '000')}")
PY
)
fi

if want f; then
  echo "f. bench startup on vLLM, cold (fresh caches) and warm (after a warm-up start):"
  for eager in "--enforce-eager" ""; do
    cmd=${serve_cmd% --enforce-eager}
    rc=0
    # One warm-up start fills the caches the warm start reads (without it, the warm start
    # would find them as empty as the cold one did).
    "$bench" startup --serve-cmd "$cmd $eager" --num-iters-cold 1 --num-iters-warmup 1 \
      --num-iters-warm 1 --output-json "$out/f${eager:+-eager}.json" >"$out/f${eager:+-eager}.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || tail -20 "$out/f${eager:+-eager}.log" >&2
    verdict < <(python3 - "$out/f${eager:+-eager}.json" "${eager:-without --enforce-eager}" "$rc" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL f ({sys.argv[2]}): no result ({e})"); sys.exit()
c, w = d["avg_cold_startup_time"], d["avg_warm_startup_time"]
print(f"   {sys.argv[2]}: cold {c:.1f} s, warm {w:.1f} s: warm saves {c - w:.1f} s ({100 * (c - w) / c:.0f}%)")
print(("PASS" if sys.argv[3] == "0" and c > 0 and w > 0 else "FAIL") + f" f ({sys.argv[2]})")
PY
)
  done
fi

if want g; then
  prof=$out/g-profile
  rm -rf "$prof"
  mkdir -p "$prof"
  if start_server g --profiler-config "{\"profiler\": \"torch\", \"torch_profiler_dir\": \"$prof\"}"; then
    rc=0
    run_bench g --backend openai --dataset-name random --random-input-len 32 --random-output-len 8 \
      --num-prompts 4 --max-concurrency 2 --seed 0 --profile || rc=$?
    sleep 5 # the trace is written after /stop_profile returns
    stop_server
    files=$(find "$prof" -type f | wc -l)
    echo "g. --profile with --profiler-config (bench exit $rc): $files files in $prof: $(find "$prof" -type f -printf '%f (%s bytes) ' | head -c 300)"
    if [ "$rc" = 0 ] && [ "$files" -gt 0 ]; then echo "PASS g"; else echo "FAIL g"; failures=$((failures + 1)); fi
  else
    echo "FAIL g: vLLM did not start with --profiler-config (log: $out/g.server.log)"
    failures=$((failures + 1))
  fi
fi

echo
if [ $failures -eq 0 ]; then echo "vllm-checks.sh: every check passed"; else echo "vllm-checks.sh: $failures check(s) failed"; fi
if [ "$write_readme" = 1 ]; then
  readme_block "CHECKS=\"$checks\" bash scripts/vllm-checks.sh --write-readme" "$out/report.txt"
fi
[ $failures -eq 0 ]
