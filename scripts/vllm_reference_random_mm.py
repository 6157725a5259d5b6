#!/usr/bin/env python3
"""Reference request sets of vLLM's `random-mm` (RandomMultiModalDataset), for bench's tests.

`scripts/vllm_reference.py` passes `sample()` options as JSON, which cannot hold the tuple
keys of `bucket_config`; this wrapper reads `--bucket-config` as vLLM's CLI does
(`ast.literal_eval` of a Python dict literal) and otherwise works the same way (same
stand-ins for vLLM's serving imports, same seeding, same JSONL output). Example:

    VENV/bin/python scripts/vllm_reference_random_mm.py --tokenizer tests/data/tokenizers/gpt2 \\
        --seed 0 --num-requests 10 --bucket-config '{(16, 24, 1): 0.5, (8, 8, 1): 0.5}' \\
        --sample input_len=24 --sample base_items_per_request=2 \\
        --sample 'limit_mm_per_prompt={"image": 2}' --sample enable_multimodal_chat=true \\
        --out ref.jsonl
"""

import argparse
import ast
import importlib
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
    parser.add_argument("--tokenizer", required=True, type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-requests", type=int, required=True)
    parser.add_argument("--request-id-prefix", default="benchmark-serving")
    parser.add_argument("--bucket-config", help="a Python dict literal, as vLLM's flag")
    parser.add_argument("--sample", action="append", help="KEY=VALUE (JSON) for sample()")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    ref._stub_vllm(args.vllm_src.resolve())
    datasets = importlib.import_module("vllm.benchmarks.datasets.datasets")
    from transformers import AutoTokenizer
    import numpy as np

    tokenizer = AutoTokenizer.from_pretrained(str(args.tokenizer))
    random.seed(args.seed)
    np.random.seed(args.seed)
    sample = ref._pairs(args.sample)
    extra = {}
    if args.bucket_config:
        extra["bucket_config"] = {
            tuple(int(x) for x in k): float(v)
            for k, v in ast.literal_eval(args.bucket_config).items()
        }
    dataset = datasets.RandomMultiModalDataset(random_seed=args.seed)
    requests = dataset.sample(
        tokenizer=tokenizer,
        num_requests=args.num_requests,
        request_id_prefix=args.request_id_prefix,
        **sample,
        **extra,
    )
    meta = {
        "dataset": "random-mm",
        "class": "RandomMultiModalDataset",
        "tokenizer": args.tokenizer.name,
        "seed": args.seed,
        "num_requests": args.num_requests,
        "sample": sample,
        "bucket_config": args.bucket_config,
        "vllm": "0.32.0",
    }
    ref.write_requests(args.out, meta, requests, ("multi_modal_data",))


if __name__ == "__main__":
    main()
