#!/usr/bin/env bash
# Builds the guide (docs/, pages listed in mkdocs.yml) as a book into target/book/, strictly:
# a link to a missing page or heading fails the build, and so does a relative link of the
# book, README.md or ARCHITECTURE.md to a file that does not exist (scripts/check_docs.py).
#   bash scripts/docs.sh            # -> target/book/index.html (opens from disk)
# MkDocs comes from PyPI, at the version pinned below, into $BENCH_DOCS_TOOLS/venv (default
# ~/.cache/bench-docs-tools); what is already there at that version is kept, so a second run
# takes no network.
#
# Needs python3 (with venv). Exits 2 when PyPI cannot be reached (the message names it), 1 on
# a broken link, a failed build or any other failure.
set -euo pipefail
cd "$(dirname "$0")/.."

MKDOCS=1.6.1

say() { echo "docs: $*" >&2; }

python3 scripts/check_docs.py

tools="${BENCH_DOCS_TOOLS:-$HOME/.cache/bench-docs-tools}"
mkdir -p "$tools"
venv="$(cd "$tools" && pwd)/venv"
if [ "$("$venv/bin/python" -c 'import mkdocs; print(mkdocs.__version__)' 2>/dev/null)" != "$MKDOCS" ]; then
  command -v python3 >/dev/null || { say "python3 not found: install Python 3 (with its venv module)"; exit 1; }
  say "installing mkdocs $MKDOCS into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 "mkdocs==$MKDOCS"; then
    index="${PIP_INDEX_URL:-$("$venv/bin/pip" config get global.index-url 2>/dev/null || true)}"
    url="${index:-https://pypi.org/simple}/mkdocs/"
    if ! curl -fsS --max-time 20 -o /dev/null "$url"; then
      say "cannot reach PyPI ($url): mkdocs was not installed"
      exit 2
    fi
    say "installing from PyPI failed (see above)"
    exit 1
  fi
fi
"$venv/bin/mkdocs" build --strict --quiet
say "the guide: target/book/index.html"
