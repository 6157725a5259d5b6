#!/bin/sh
# Builds {{name}}.wasm from {{kind}}.py with componentize-py 0.25 (`pip install
# componentize-py==0.25.1`), taken from $BENCH_PLUGIN_TOOLS/py/bin (where bench's
# scripts/plugin-tools.sh installs it) or else from PATH.
set -eu
cd "$(dirname "$0")"
PATH="${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}/py/bin:$PATH"
# componentize-py's rule: the module named after the exported interface ({{kind}}) holds
# the classes that implement it.
componentize-py -d wit -w {{kind}}-plugin componentize {{kind}} -o {{name}}.wasm
