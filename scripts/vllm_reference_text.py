#!/usr/bin/env python3
"""Reference request sets for the text datasets `scripts/vllm_reference.py` cannot build.

Same output format and the same stand-ins as `vllm_reference.py` (whose helpers it
imports), for two cases that script does not cover:

- datasets that `vllm bench serve` builds WITHOUT passing `--seed` to the constructor
  (`SpecBench`, `SpeedBench`: their shuffle and oversampling always use seed 0, while the
  global `random`/`numpy` are still seeded with `--seed`): `--no-seed-arg`;
- classes no longer in vLLM 0.32's `datasets.py` (`SonnetDataset`): `--module-file` names
  a Python file holding the class (e.g. the newest `vllm/benchmarks/datasets/sonnet.py`
  of vLLM's repository, saved outside this repository); its import of
  `vllm.benchmarks.datasets.abstractions` is served with 0.32's `BenchmarkDataset` and
  `SampleRequest`.

Example (tests/data/datasets/vllm-requests/sonnet-qwen3-seed0.jsonl):

    /work/vllm-venv/bin/python scripts/vllm_reference_text.py --module-file sonnet.py \\
        --dataset SonnetDataset --tokenizer tests/data/tokenizers/qwen3 --seed 0 \\
        --num-requests 20 --init dataset_path=tests/data/datasets/sonnet/sonnet.txt \\
        --sample input_len=300 --sample prefix_len=100 --sample output_len=50 \\
        --sample return_prompt_formatted=true --out ref.jsonl
"""

import argparse
import importlib
import importlib.util
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_reference as ref  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--vllm-src", type=Path, default=Path("/work/vllm-src"))
    parser.add_argument("--module-file", type=Path, help="a file defining the class")
    parser.add_argument("--dataset", required=True, help="the class name")
    parser.add_argument("--tokenizer", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-seed-arg", action="store_true",
                        help="do not pass random_seed to the constructor (as get_samples "
                        "does for SpecBench and SpeedBench)")
    parser.add_argument("--num-requests", type=int, required=True)
    parser.add_argument("--request-id-prefix", default="benchmark-serving")
    parser.add_argument("--init", action="append")
    parser.add_argument("--sample", action="append")
    parser.add_argument("--meta", action="append")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    ref._stub_vllm(args.vllm_src.resolve())
    datasets = importlib.import_module("vllm.benchmarks.datasets.datasets")
    if args.module_file:
        ref._module(
            "vllm.benchmarks.datasets.abstractions",
            BenchmarkDataset=datasets.BenchmarkDataset,
            SampleRequest=datasets.SampleRequest,
        )
        spec = importlib.util.spec_from_file_location("reference_module", args.module_file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = datasets
    from transformers import AutoTokenizer
    import numpy as np

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
    random.seed(args.seed)
    np.random.seed(args.seed)

    init = ref._pairs(args.init)
    sample = ref._pairs(args.sample)
    if not args.no_seed_arg:
        init.setdefault("random_seed", args.seed)
    dataset = getattr(module, args.dataset)(**init)
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
        "vllm": "0.32.0" if not args.module_file else f"{args.module_file.name} (newest vLLM)",
    }
    meta.update(ref._pairs(args.meta))
    ref.write_requests(args.out, meta, requests)


if __name__ == "__main__":
    main()
