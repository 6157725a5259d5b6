#!/usr/bin/env bash
# Installs the component tools that build Python and JavaScript plugins, at the versions
# the examples and `bench plugin new` are tested with:
#   $BENCH_PLUGIN_TOOLS/py/bin/componentize-py               (PyPI: componentize-py)
#   $BENCH_PLUGIN_TOOLS/js/node_modules/.bin/componentize-js  (npm: @bytecodealliance/componentize-js)
#   $BENCH_PLUGIN_TOOLS/js/node_modules/.bin/jco              (npm: @bytecodealliance/jco)
#   bash scripts/plugin-tools.sh [python] [js]     (no argument: both)
# BENCH_PLUGIN_TOOLS defaults to ~/.cache/bench-plugin-tools. What is already there at the
# pinned version is kept, so a second run takes no network and well under a second.
#
# Needs python3 (with venv) and node with npm. Exits 2 when PyPI or npm's registry cannot be
# reached (the message names it), 1 on any other failure.
set -euo pipefail

COMPONENTIZE_PY=0.25.1
COMPONENTIZE_JS=0.23.0
JCO=1.35.0

tools="${BENCH_PLUGIN_TOOLS:-$HOME/.cache/bench-plugin-tools}"
mkdir -p "$tools"
tools="$(cd "$tools" && pwd)"

say() { echo "plugin-tools: $*" >&2; }

# After a failed install: 2 naming the registry when it does not answer (CI then skips the
# tests that need the tools), else 1 (a real failure).
install_failed() { # REGISTRY URL
  if ! curl -fsS --max-time 20 -o /dev/null "$2"; then
    say "cannot reach $1 ($2): its tools were not installed"
    return 2
  fi
  say "installing from $1 failed (see above)"
  return 1
}

need() { # COMMAND WHAT
  if ! command -v "$1" >/dev/null; then
    say "$1 not found: $2"
    return 1
  fi
}

# --- Python: componentize-py in its own virtual environment --------------------------
py="$tools/py"
install_py() {
  [ "$("$py/bin/componentize-py" --version 2>/dev/null)" != "componentize-py $COMPONENTIZE_PY" ] || return 0
  need python3 "install Python 3 (with its venv module) to build Python plugins" || return
  say "installing componentize-py $COMPONENTIZE_PY into $py"
  rm -rf "$py"
  python3 -m venv "$py"
  if ! "$py/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 \
    "componentize-py==$COMPONENTIZE_PY"; then
    index="${PIP_INDEX_URL:-$("$py/bin/pip" config get global.index-url 2>/dev/null || true)}"
    install_failed PyPI "${index:-https://pypi.org/simple}/componentize-py/"
  fi
}

# --- JavaScript: componentize-js and jco from npm ------------------------------------
js="$tools/js"
installed() { # PACKAGE
  node -p "require('$js/node_modules/$1/package.json').version" 2>/dev/null || true
}
install_js() {
  [ "$(installed @bytecodealliance/componentize-js)" != "$COMPONENTIZE_JS" ] ||
    [ "$(installed @bytecodealliance/jco)" != "$JCO" ] || return 0
  need node "install Node.js 18 or newer (with npm) to build JavaScript plugins" || return
  need npm "install npm (Node.js's package manager) to build JavaScript plugins" || return
  say "installing componentize-js $COMPONENTIZE_JS and jco $JCO into $js"
  mkdir -p "$js"
  # A package.json of its own, so that npm installs here and not in a parent folder.
  [ -f "$js/package.json" ] || echo '{"private": true}' >"$js/package.json"
  if ! (cd "$js" && npm install --no-audit --no-fund --loglevel=error --save-exact \
    --fetch-retries 1 --fetch-timeout 60000 "@bytecodealliance/componentize-js@$COMPONENTIZE_JS" \
    "@bytecodealliance/jco@$JCO" >&2); then
    registry="$(npm config get registry)"
    install_failed "npm's registry" "${registry%/}/@bytecodealliance%2fcomponentize-js"
  fi
}

# Which languages: the arguments (python, js), both by default.
want_py=1 want_js=1
if [ $# -gt 0 ]; then
  want_py=0 want_js=0
  for lang in "$@"; do
    case "$lang" in
      python | py) want_py=1 ;;
      js | javascript) want_js=1 ;;
      *) say "unknown language '$lang': give python, js, or nothing for both"; exit 1 ;;
    esac
  done
fi

# Both are tried, whatever the first one gives; the worse status wins (1 over 2 over 0).
status=0
[ "$want_py" = 0 ] || install_py || status=$?
js_status=0
[ "$want_js" = 0 ] || install_js || js_status=$?
if [ "$js_status" = 1 ] || [ "$status" = 0 ]; then status=$js_status; fi
[ "$status" = 0 ] || exit "$status"

[ "$want_py" = 0 ] || echo "componentize-py: $py/bin/componentize-py"
[ "$want_js" = 0 ] || echo "componentize-js: $js/node_modules/.bin/componentize-js"
[ "$want_js" = 0 ] || echo "jco: $js/node_modules/.bin/jco"
