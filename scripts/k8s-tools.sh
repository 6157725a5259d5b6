#!/usr/bin/env bash
# Installs the Kubernetes schema validator the tests of `bench k8s render` check the
# rendered manifests with (tests/e2e/k8s.rs), at the version they are tested with:
#   $BENCH_K8S_TOOLS/venv/bin/kubernetes-validate     (PyPI: kubernetes-validate)
#   bash scripts/k8s-tools.sh
# BENCH_K8S_TOOLS defaults to ~/.cache/bench-k8s-tools. What is already there at the pinned
# version is kept, so a second run takes no network and well under a second.
#
# Needs python3 (with venv). Exits 2 when PyPI cannot be reached (the message names it), 1 on
# any other failure.
set -euo pipefail

# Its schemas go from Kubernetes 1.25 to 1.37; the tests validate against 1.30 and 1.33.
KUBERNETES_VALIDATE=1.37.0

tools="${BENCH_K8S_TOOLS:-$HOME/.cache/bench-k8s-tools}"
mkdir -p "$tools"
tools="$(cd "$tools" && pwd)"

say() { echo "k8s-tools: $*" >&2; }

venv="$tools/venv"
validator="$venv/bin/kubernetes-validate"
if [ "$("$validator" --version 2>/dev/null)" != "$KUBERNETES_VALIDATE" ]; then
  if ! command -v python3 >/dev/null; then
    say "python3 not found: install Python 3 (with its venv module) to validate manifests"
    exit 1
  fi
  say "installing kubernetes-validate $KUBERNETES_VALIDATE into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 \
    "kubernetes-validate==$KUBERNETES_VALIDATE"; then
    index="${PIP_INDEX_URL:-$("$venv/bin/pip" config get global.index-url 2>/dev/null || true)}"
    url="${index:-https://pypi.org/simple}/kubernetes-validate/"
    if ! curl -fsS --max-time 20 -o /dev/null "$url"; then
      say "cannot reach PyPI ($url): kubernetes-validate was not installed"
      exit 2
    fi
    say "installing from PyPI failed (see above)"
    exit 1
  fi
fi
echo "kubernetes-validate: $validator"
