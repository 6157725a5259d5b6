#!/usr/bin/env bash
# Installs bench the two ways a user would without this checkout's target/ folder, each into
# a fresh, empty place, and runs what was installed from outside the checkout:
#   1. `cargo install --locked --path host` into a new root;
#   2. the Python wheel (pyproject.toml: maturin's `bin` bindings), built with maturin from
#      PyPI and `pip install`ed into a new virtual environment.
# Each installed `bench` must report its version, list its embedded plugins, and benchmark a
# `bench mock-server` (that same binary) from an empty folder with an empty home, with a
# tokenizer copied there: 20 requests completed, read back from its result file.
#
#   bash scripts/check-install.sh            # release builds, as a user installs
#   bash scripts/check-install.sh --dev      # dev builds (what .ci/run does: they reuse the
#                                            # test build's objects, so the check costs about
#                                            # a minute, not a release build)
# maturin comes from PyPI into $BENCH_INSTALL_TOOLS/venv (default ~/.cache/bench-install-tools).
# Exits 2 when PyPI cannot be reached (after the cargo install check passed), 1 on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

MATURIN=1.16.0
# Both ways build into this checkout's target/ (cargo install would otherwise use a folder
# of its own), so the wheel reuses what cargo install built.
export CARGO_TARGET_DIR="$repo/target"
profile=release cargo_profile=() maturin_profile=(--release)
if [ "${1:-}" = --dev ]; then
  profile=dev cargo_profile=(--debug) maturin_profile=(--profile dev)
fi

say() { echo "check-install: $*" >&2; }
die() { say "$*"; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-install.XXXXXX")
server_pid=""
trap '[ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

# try LABEL BENCH: the installed binary, run from an empty folder outside the checkout.
try() {
  local label=$1 bench=$2 port=$((18400 + RANDOM % 1000))
  local dir="$work/run-$label"
  mkdir -p "$dir"
  cp -r "$repo/tests/data/tokenizers/gpt2" "$dir/tokenizer"
  cd "$dir"
  # A home of its own: nothing cached by an earlier bench (compiled plugins) is found.
  local HOME="$dir/home" XDG_CACHE_HOME="$dir/home/.cache"
  export HOME XDG_CACHE_HOME
  mkdir -p "$HOME"
  local version plugins completed
  version=$("$bench" --version 2>"$dir/version.log") || die "$label: '$bench --version' failed (log: $dir/version.log)"
  [[ $version == "bench "* ]] || die "$label: '$bench --version' printed '$version'"
  plugins=$("$bench" plugin list 2>"$dir/plugins.log") || die "$label: 'bench plugin list' failed (log: $dir/plugins.log)"
  [[ $plugins == *sharegpt* ]] || die "$label: 'bench plugin list' lists no sharegpt plugin"
  "$bench" mock-server --port "$port" --ttft-ms 1 --itl-ms 1 >"$dir/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.05
  done
  "$bench" --backend openai-chat --model mock --tokenizer ./tokenizer --base-url "http://127.0.0.1:$port" \
    --dataset-name random --random-input-len 16 --random-output-len 8 --num-prompts 20 \
    --save-result --result-dir out --result-filename result.json >"$dir/run.log" 2>&1 \
    || { tail -20 "$dir/run.log" >&2; die "$label: the benchmark failed"; }
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  completed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["completed"])' out/result.json)
  [ "$completed" = 20 ] || die "$label: $completed of 20 requests completed"
  server_pid=""
  cd "$repo"
  say "$label: $version from $bench: version, plugins, 20 of 20 requests against its mock server"
}

say "cargo install --locked --path host ($profile)"
cargo install --quiet --locked --path host "${cargo_profile[@]}" --target-dir "$CARGO_TARGET_DIR" --root "$work/cargo-root"
try cargo-install "$work/cargo-root/bin/bench"

tools="${BENCH_INSTALL_TOOLS:-$HOME/.cache/bench-install-tools}"
mkdir -p "$tools"
venv="$(cd "$tools" && pwd)/venv"
if [ "$("$venv/bin/maturin" --version 2>/dev/null)" != "maturin $MATURIN" ]; then
  # Exit 2 when PyPI cannot be reached: the wheel is then not checked (cargo install was).
  source scripts/lib/pypi.sh
  pypi_venv "$venv" "maturin==$MATURIN"
fi
say "maturin build ($profile) and pip install into a fresh virtual environment"
"$venv/bin/maturin" build --quiet "${maturin_profile[@]}" --out "$work/wheels" >"$work/maturin.log" 2>&1 \
  || { tail -30 "$work/maturin.log" >&2; die "maturin build failed"; }
wheel=$(ls "$work"/wheels/*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
try wheel "$work/venv/bin/bench"
say "both installs work ($(basename "$wheel"))"
