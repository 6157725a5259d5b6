#!/usr/bin/env bash
# The smoke check against a real vLLM 0.32.0 (issue 29, item 7): one command a developer
# runs before resolving a change that touches what bench reads from a server.
#
#   bash scripts/vllm-smoke.sh                     # set up (cached), build bench, check
#   BENCH_BIN=target/debug/bench bash scripts/vllm-smoke.sh   # skip bench's build
#   BENCH_VLLM_CACHE=/tmp/cold bash scripts/vllm-smoke.sh     # measure a cold setup
#   bash scripts/vllm-smoke.sh --write-readme      # also its times into README.md
#
# What it does, timed step by step:
#   setup   scripts/vllm-server.sh --setup-only (vLLM's environment and the model, cached in
#           BENCH_VLLM_CACHE, default ~/.cache/bench-vllm; nothing is done when present)
#   build   cargo build -p bench (the profile `cargo test` builds, so after the tests it is
#           nearly free)
#   checks  scripts/vllm-checks.sh a and b: the server's per-request timings through both
#           OpenAI backends (0 < server TTFT <= bench's TTFT for every request), and the
#           prefix-cache hits and queue time against the deltas of vLLM's /metrics
#   parity  scripts/vs-vllm.sh parity on one dataset (random, 16 prompts, a concurrency cap)
#           through openai and openai-chat, beside vLLM's own client; the exact keys (counts,
#           token totals, input_lens, output_lens, the request set) gate, timings are printed
#           (they gate in the full `bash scripts/vs-vllm.sh parity --servers vllm`)
# The times and the verdict go to the last lines and to $VLLM_SMOKE_OUT/report.txt (default
# target/vllm-smoke/<date>), copied beside it as latest-cold.txt or latest-cached.txt;
# --write-readme puts the latest of both in README.md. Exit status: 0 when every check
# passed, 2 when PyPI could not be reached for a setup that needed it (nothing was
# checked), 1 otherwise.
#
# Why this is not a stage of .ci/run: CI must stay under 60 minutes on a 2-core machine and
# already takes nearly all of them; this adds, cold, the setup (minutes and GB of downloads)
# and two vLLM starts. The measured figures are in README "Against a real server (vLLM)",
# written from this script's report and vllm-server.sh --setup-report.
set -euo pipefail
cd "$(dirname "$0")/.."

write_readme=0
[ "${1:-}" = --write-readme ] && write_readme=1
out=${VLLM_SMOKE_OUT:-target/vllm-smoke/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
times=$out/report.txt
: >"$times"
t_all=$SECONDS
step() { # name: the time since the last mark
  local now=$SECONDS
  echo "$1 $((now - t_step)) s" | tee -a "$times"
  t_step=$now
}

cache=${BENCH_VLLM_CACHE:-$HOME/.cache/bench-vllm}
state=cached
[ -f "$cache/setup-times.txt" ] && [ -x "$cache/venv/bin/python" ] || state=cold
echo "vllm-smoke.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) cores, cache $cache ($state)" | tee -a "$times"

t_step=$SECONDS
status=0
bash scripts/vllm-server.sh --setup-only || status=$?
if [ "$status" = 2 ]; then
  echo "vllm-smoke.sh: SKIPPED: PyPI could not be reached (above), so vLLM could not be set up; nothing was checked"
  exit 2
elif [ "$status" != 0 ]; then
  echo "vllm-smoke.sh: the vLLM setup failed (above)" >&2
  exit 1
fi
step setup
# What a cold cache costs on top of the steps below: the setup's own first run.
bash scripts/vllm-server.sh --setup-report | tee -a "$times"

# The command as it was given, for the README block (a given binary is part of it).
command="bash scripts/vllm-smoke.sh --write-readme"
[ -n "${BENCH_BIN:-}" ] && command="BENCH_BIN=$BENCH_BIN $command"
if [ -z "${BENCH_BIN:-}" ]; then
  cargo build -p bench
  BENCH_BIN=$PWD/target/debug/bench
fi
export BENCH_BIN
step build

failed=0
CHECKS=smoke VLLM_CHECKS_OUT=$out/checks bash scripts/vllm-checks.sh || failed=1
grep -E '^(PASS|FAIL)' "$out/checks/report.txt" >>"$times" || true
step checks
if ! PARITY_GATE=exact PARITY_OUT=$out/parity bash scripts/vs-vllm.sh parity --servers vllm \
  --datasets random --modes cap --extras "" --num-prompts 16 2>&1 | tee "$out/parity.log"; then
  failed=1
fi
grep -E '^parity: ' "$out/parity.log" >>"$times" || echo "parity: no verdict (see $out/parity.log)" >>"$times"
step parity

echo "total $((SECONDS - t_all)) s ($state cache)" | tee -a "$times"
if [ $failed = 0 ]; then
  echo "vllm-smoke.sh: every check passed (reports: $out/checks/report.txt, $out/parity/parity.md)" | tee -a "$times"
else
  echo "vllm-smoke.sh: FAILED (reports: $out/checks/report.txt, $out/parity/parity.md)" | tee -a "$times"
fi
# The newest report of each kind (cold, cached) is kept beside the runs, so that the README
# shows both: a cold run (BENCH_VLLM_CACHE=/tmp/cold ...) and then a cached one.
cp "$times" "$(dirname "$out")/latest-$state.txt"
if [ "$write_readme" = 1 ]; then
  reports=()
  for s in cold cached; do
    [ -f "$(dirname "$out")/latest-$s.txt" ] && reports+=("$(dirname "$out")/latest-$s.txt")
  done
  python3 scripts/readme_block.py vllm-smoke "$command" "${reports[@]}"
fi
exit $failed
