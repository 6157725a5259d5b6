#!/usr/bin/env bash
# Builds the plugin: build.sh [OUT.wasm] (default: target/dataset_python.wasm here).
# componentize-py reads the contract from bench's wit/ and the helper module
# bench_plugin.py from sdk/python/, both as published (scripts/plugin-tools.sh installs
# componentize-py; COMPONENTIZE_PY names another).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$here/../.."
out="${1:-$here/target/dataset_python.wasm}"
componentize_py="${COMPONENTIZE_PY:-${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}/py/bin/componentize-py}"
mkdir -p "$(dirname "$out")"
"$componentize_py" -d "$repo/wit/current" -w dataset-plugin \
  componentize -p "$here" -p "$repo/sdk/python" dataset -o "$out"
