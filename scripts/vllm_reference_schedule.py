#!/usr/bin/env python3
"""Writes vLLM 0.32's own arrival times for a few settings, for bench's schedule tests.

bench promises the same arrival times as `vllm bench serve` for the same `--seed`,
`--request-rate`, `--burstiness` and ramp-up: vLLM seeds numpy's legacy global generator
(`np.random.seed(args.seed)`, serve.py:2013) and draws each gap with
`np.random.gamma` in `get_request` (serve.py:479). This script runs that very
`get_request` from an installed vLLM with its clock stopped and its sleep recorded, so
every request's offset is the one vLLM computed, and writes them as JSON: one case per
setting, with the offsets (seconds from the start) and the rate in force for each
request.

    ~/.cache/bench-vllm/venv/bin/python scripts/vllm_reference_schedule.py \\
        --out tests/data/schedule/vllm-arrivals.json

(`scripts/vllm-server.sh` makes that venv; any venv with `vllm==0.32.0` works.)
"""

import argparse
import asyncio
import json
import random
import sys

import numpy as np
from vllm import __version__ as vllm_version
from vllm.benchmarks import serve

CASES = [
    # The settings of the Poisson parity runs (scripts/vs-vllm.sh parity --poisson).
    {"seed": 0, "num_requests": 8, "request_rate": 2.0, "burstiness": 1.0},
    # numpy's three gamma branches: shape below 1, 1, above 1.
    {"seed": 1, "num_requests": 12, "request_rate": 5.0, "burstiness": 0.5},
    {"seed": 3, "num_requests": 12, "request_rate": 5.0, "burstiness": 3.0},
    {"seed": 42, "num_requests": 200, "request_rate": 50.0, "burstiness": 1.0},
    # Ramp-ups: a gap per request at the rate in force, nothing rescaled.
    {"seed": 7, "num_requests": 9, "burstiness": 1.0,
     "ramp_up": {"strategy": "linear", "start_rps": 1, "end_rps": 5}},
    {"seed": 5, "num_requests": 9, "burstiness": 2.0,
     "ramp_up": {"strategy": "exponential", "start_rps": 2, "end_rps": 32}},
]


async def offsets_of(case):
    # A clock that stands still at 0: `get_request` then sleeps exactly its precomputed
    # offset (`start_ts + delay_ts[i] - now`) before yielding request i, or not at all
    # when that offset is 0, so the sleep's argument is vLLM's `delay_ts[i]` bit for bit.
    slept = [0.0]

    async def sleep(seconds):
        slept[0] = seconds

    serve.time.time = lambda: 0.0
    serve.asyncio.sleep = sleep
    # As `vllm bench serve` does before it builds the dataset and the schedule.
    random.seed(case["seed"])
    np.random.seed(case["seed"])
    ramp = case.get("ramp_up") or {}
    gen = serve.get_request(
        list(range(case["num_requests"])),
        case.get("request_rate", float("inf")),
        case["burstiness"],
        ramp.get("strategy"),
        ramp.get("start_rps"),
        ramp.get("end_rps"),
    )
    offsets, rates = [], []
    async for _request, rate in gen:
        offsets.append(slept[0])
        slept[0] = 0.0
        rates.append(rate)
    return offsets, rates


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cases = []
    for case in CASES:
        offsets, rates = asyncio.run(offsets_of(case))
        cases.append({**case, "offsets": offsets, "rates": rates})
    meta = {"vllm": vllm_version, "numpy": np.__version__, "python": sys.version.split()[0],
            "source": "vllm/benchmarks/serve.py get_request, run by scripts/vllm_reference_schedule.py"}
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
