# Sourced by the scripts that install a pinned tool from PyPI into a virtualenv of their own
# (scripts/docs.sh, scripts/check-install.sh, scripts/k8s-tools.sh):
#
#   source scripts/lib/pypi.sh
#   pypi_venv VENV PACKAGE==VERSION   # VENV made anew with that package in it
#
# Exits 2 when PyPI cannot be reached (the message names the address tried), so that
# .ci/run can tell a registry it cannot reach from a broken install; 1 on any other
# failure. It uses the caller's `say`.

pypi_venv() {
  local venv=$1 spec=$2 name=${2%%==*} index url
  command -v python3 >/dev/null || { say "python3 not found: install Python 3 (with its venv module)"; exit 1; }
  say "installing $spec into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv" || { say "could not create the virtualenv $venv (python3's venv module)"; exit 1; }
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --retries 1 --timeout 30 "$spec"; then
    index="${PIP_INDEX_URL:-$("$venv/bin/pip" config get global.index-url 2>/dev/null || true)}"
    url="${index:-https://pypi.org/simple}/$name/"
    if ! curl -fsS --max-time 20 -o /dev/null "$url"; then
      say "cannot reach PyPI ($url): $name was not installed"
      exit 2
    fi
    say "installing $spec from PyPI failed (see above)"
    exit 1
  fi
}
