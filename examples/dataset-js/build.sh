#!/usr/bin/env bash
# Builds the plugin: build.sh [OUT.wasm] (default: target/dataset_js.wasm here).
# componentize-js reads the contract from bench's wit/ and bundles the helper module
# sdk/js/bench-plugin.js, both as published (scripts/plugin-tools.sh installs
# componentize-js; COMPONENTIZE_JS names another). `-d http fetch-event` leaves out
# wasi:http, which bench refuses: plugins get no network.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$(realpath -m "${1:-$here/target/dataset_js.wasm}")"
componentize_js="${COMPONENTIZE_JS:-${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}/js/node_modules/.bin/componentize-js}"
mkdir -p "$(dirname "$out")"
# Run from the repository's root: componentize-js lets the module import files below the
# working directory only, and this one imports ../../sdk/js/bench-plugin.js.
cd "$repo"
"$componentize_js" --wit "$repo/wit/current" -n dataset-plugin -d http fetch-event \
  -o "$out" examples/dataset-js/dataset.js
