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
  source "$(dirname "$0")/lib/pypi.sh"
  pypi_venv "$venv" "kubernetes-validate==$KUBERNETES_VALIDATE"
fi
echo "kubernetes-validate: $validator"
