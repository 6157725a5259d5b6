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
  source scripts/lib/pypi.sh
  pypi_venv "$venv" "mkdocs==$MKDOCS"
fi
"$venv/bin/mkdocs" build --strict --quiet
say "the guide: target/book/index.html"
