#!/bin/sh
# Builds {{name}}.wasm from {{kind}}.js with componentize-js 0.23 (`npm install
# @bytecodealliance/componentize-js@0.23.0`), taken from
# $BENCH_PLUGIN_TOOLS/js/node_modules/.bin (where bench's scripts/plugin-tools.sh installs
# it) or else from PATH.
set -eu
cd "$(dirname "$0")"
PATH="${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}/js/node_modules/.bin:$PATH"
# `-d http fetch-event`: leave out wasi:http, which bench refuses (plugins get no network).
componentize-js --wit wit -n {{kind}}-plugin -d http fetch-event -o {{name}}.wasm {{kind}}.js
