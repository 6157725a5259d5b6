#!/usr/bin/env python3
"""Makes a reference request set with vLLM's own dataset code, for bench's tests.

bench promises the same request set as `vllm bench serve` for the same seed, tokenizer
and options. This script runs vLLM's `vllm/benchmarks/datasets/datasets.py` (from an
unpacked vLLM wheel: only `vllm/benchmarks/` is needed) as a client-side library: the
vLLM-internal modules it imports for serving (LoRA, multimodal processing, the hub API)
are replaced by small stand-ins, so neither a GPU nor vLLM's heavy dependencies are
needed. It seeds Python's `random` and numpy as `vllm bench serve` does, builds the
dataset class by name, calls its `sample`, and writes JSONL: a first line
`{"meta": {...}}` with everything needed to repeat the call, then one request per line
(`prompt`, `prompt_len`, `expected_output_len`, `request_id`, and `timestamp`,
`multi_modal_data`, `chat_messages`, `request_overrides` when vLLM set them).

Setup (once; any venv with these packages works):

    pip download --no-deps vllm==0.32.0 -d WHEELS
    python3 -m zipfile -e WHEELS/vllm-0.32.0-*.whl VLLM_SRC   # or extract vllm/benchmarks/ only
    python3 -m venv VENV && VENV/bin/pip install transformers numpy pandas pillow pyarrow

Example (the prefix_repetition references of tests/data/datasets/vllm-requests):

    VENV/bin/python scripts/vllm_reference.py --vllm-src VLLM_SRC \\
        --dataset PrefixRepetitionRandomDataset --tokenizer tests/data/tokenizers/gpt2 \\
        --seed 0 --num-requests 20 --sample prefix_len=64 --sample suffix_len=32 \\
        --sample num_prefixes=4 --sample output_len=16 --out ref.jsonl

`--init KEY=VALUE` goes to the class's constructor (`dataset_path=...`,
`disable_shuffle=true`), `--sample KEY=VALUE` to `sample()`; values are read as JSON when
they parse (numbers, true/false, null, lists, objects), else as text. `--meta KEY=VALUE`
adds fields to the meta line (for the test that replays the call).
"""

import argparse
import base64
import importlib
import io
import json
import random
import sys
import types
from pathlib import Path


def _module(name: str, **attrs) -> types.ModuleType:
    """Registers a stand-in module (and its parents) under `name`."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        parent = ".".join(parts[:i])
        sys.modules.setdefault(parent, types.ModuleType(parent))
    module = sys.modules.get(name) or types.ModuleType(name)
    for key, value in attrs.items():
        setattr(module, key, value)
    sys.modules[name] = module
    return module


class _Placeholder:
    """vLLM's PlaceholderModule: fails on use, naming the missing package."""

    def __init__(self, name):
        self._name = name

    def placeholder_attr(self, attr):
        def missing(*_args, **_kwargs):
            raise ImportError(f"{self._name}.{attr} is not installed")

        return missing

    def __getattr__(self, attr):
        raise ImportError(f"{self._name} is not installed (needed for .{attr})")


def _encode_image_url(image, image_format="JPEG"):
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    data = base64.b64encode(buffer.getvalue()).decode()
    return f"data:image/{image_format.lower()};base64,{data}"


def _stub_vllm(vllm_src: Path) -> None:
    """Makes `vllm.benchmarks.datasets` importable from `vllm_src` without vLLM's runtime."""
    sys.path.insert(0, str(vllm_src))
    # The real package __init__ pulls in the engine; only the benchmarks package is real.
    vllm = _module("vllm")
    vllm.__path__ = [str(vllm_src / "vllm")]
    _module("pybase64", b64encode=base64.b64encode, b64decode=base64.b64decode)
    _module("vllm.inputs", MultiModalDataDict=dict)

    class LoRARequest:  # noqa: D401 - stand-in
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    _module("vllm.lora.request", LoRARequest=LoRARequest)
    _module("vllm.lora.utils", get_adapter_absolute_path=lambda p: p)
    _module(
        "vllm.multimodal.audio",
        get_audio_duration=lambda y=None, sr=None: len(y) / float(sr),
    )
    _module("vllm.multimodal.image", convert_image_mode=lambda im, mode: im.convert(mode))

    def fetch_image(url):
        raise RuntimeError(f"fetch_image({url!r}): no network for reference sets")

    _module("vllm.multimodal.utils", encode_image_url=_encode_image_url, fetch_image=fetch_image)
    _module("vllm.tokenizers", TokenizerLike=object)

    class _LocalHub:
        """The hub API over local folders: a repo id that is a directory holds its files."""

        def hf_hub_download(self, repo_id, filename, repo_type=None):
            path = Path(repo_id) / filename
            if not Path(repo_id).is_dir():
                raise RuntimeError(f"hf_hub_download({repo_id!r}): no hub access (use a local folder)")
            if not path.is_file():
                from huggingface_hub.errors import EntryNotFoundError
                raise EntryNotFoundError(f"{filename} not in {repo_id}")
            return str(path)

    def hf_api():
        return _LocalHub()

    _module("vllm.transformers_utils.repo_utils", hf_api=hf_api)
    _module("vllm.utils.argparse_utils", FlexibleArgumentParser=argparse.ArgumentParser)
    _module("vllm.utils.import_utils", PlaceholderModule=_Placeholder)
    _module("vllm.utils.mistral", is_mistral_tokenizer=lambda tok: False)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _pairs(items):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {item!r}")
        out[key] = _value(value)
    return out


def _jsonable(value):
    """Request fields as JSON: PIL images and bytes become base64, tuples lists."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if hasattr(value, "tolist"):
        return value.tolist()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


def write_requests(path: Path, meta: dict, requests, optional=()) -> None:
    """The reference file: a `meta` line, then one line per request with its prompt, lengths and
    id, plus each of the `optional` attributes a request has (not None)."""
    with path.open("w", encoding="utf-8") as out:
        out.write(json.dumps({"meta": meta}, ensure_ascii=False) + "\n")
        for r in requests:
            line = {
                "prompt": _jsonable(r.prompt),
                "prompt_len": r.prompt_len,
                "expected_output_len": r.expected_output_len,
                "request_id": r.request_id,
            }
            for key in optional:
                value = getattr(r, key, None)
                if value is not None:
                    line[key] = _jsonable(value)
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"{path}: {len(requests)} requests", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vllm-src", type=Path, default=Path("/work/vllm-src"),
                        help="a folder holding vllm/benchmarks/ of the vLLM wheel")
    parser.add_argument("--dataset", required=True,
                        help="the class in vllm.benchmarks.datasets.datasets, e.g. RandomDataset")
    parser.add_argument("--tokenizer", required=True, type=Path, help="a tokenizer directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-requests", type=int, required=True)
    parser.add_argument("--request-id-prefix", default="benchmark-serving")
    parser.add_argument("--init", action="append", help="KEY=VALUE for the constructor")
    parser.add_argument("--sample", action="append", help="KEY=VALUE for sample()")
    parser.add_argument("--meta", action="append", help="KEY=VALUE added to the meta line")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    _stub_vllm(args.vllm_src.resolve())
    datasets = importlib.import_module("vllm.benchmarks.datasets.datasets")
    from transformers import AutoTokenizer
    import numpy as np

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
    # As `vllm bench serve` does before building the dataset.
    random.seed(args.seed)
    np.random.seed(args.seed)

    init = _pairs(args.init)
    sample = _pairs(args.sample)
    cls = getattr(datasets, args.dataset)
    dataset = cls(random_seed=args.seed, **init)
    requests = dataset.sample(
        tokenizer=tokenizer,
        num_requests=args.num_requests,
        request_id_prefix=args.request_id_prefix,
        **sample,
    )

    meta = {
        "class": args.dataset,
        "tokenizer": args.tokenizer.name,
        "seed": args.seed,
        "num_requests": args.num_requests,
        "init": init,
        "sample": sample,
        "vllm": "0.32.0",
    }
    meta.update(_pairs(args.meta))
    write_requests(args.out, meta, requests,
                   ("timestamp", "multi_modal_data", "chat_messages", "request_overrides"))


if __name__ == "__main__":
    main()
