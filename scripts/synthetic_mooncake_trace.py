#!/usr/bin/env python3
"""Writes a small synthetic trace in the Mooncake trace schema, for bench's tests.

Each line is `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}`
as in Mooncake's published traces (FAST'25, `kvcache-ai/Mooncake`), with 512-token blocks:
a request's prompt is `ceil(input_length / 512)` blocks, and requests that share a hash
id share that block. The shapes are made up: a few multi-turn sessions whose prompts grow
by a block or two per turn (so each turn repeats its session's earlier blocks), a shared
system-prompt block that most sessions start with, and one-off requests. Deterministic:
`random.Random(SEED)`.

    python3 scripts/synthetic_mooncake_trace.py > tests/data/datasets/mooncake/trace.jsonl
    python3 scripts/synthetic_mooncake_trace.py 10000 > big.jsonl   # more lines (benchmarks)

A session that reaches 32 blocks starts over (from the shared block), so long traces keep
Mooncake-like prompt lengths (up to 16k tokens).
"""

import json
import random
import sys

SEED = 20251125
BLOCK = 512


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rng = random.Random(SEED)
    next_id = 1
    system_block = 0  # shared by most sessions
    sessions = []
    for _ in range(6):
        blocks = [system_block] if rng.random() < 0.7 else []
        sessions.append(blocks)
    lines = []
    t = 0
    for _ in range(n):
        t += rng.randint(5, 60)
        if rng.random() < 0.8:
            s = rng.randrange(len(sessions))
            if len(sessions[s]) >= 32:
                sessions[s] = [system_block]
            for _ in range(rng.randint(1, 2)):
                sessions[s].append(next_id)
                next_id += 1
            hash_ids = list(sessions[s])
        else:
            hash_ids = [next_id + i for i in range(rng.randint(1, 3))]
            next_id += len(hash_ids)
        full = len(hash_ids) * BLOCK
        input_length = rng.randint(full - BLOCK + 1, full)
        lines.append(
            {
                "timestamp": t,
                "input_length": input_length,
                "output_length": rng.randint(1, 64),
                "hash_ids": hash_ids,
            }
        )
    for line in lines:
        sys.stdout.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()
