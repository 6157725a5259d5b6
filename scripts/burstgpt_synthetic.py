#!/usr/bin/env python3
"""Writes a synthetic BurstGPT trace (the real BurstGPT CSV is not redistributed here).

Same columns as BurstGPT v1.1 (`Timestamp,Model,Request tokens,Response tokens,Total tokens,
Log Type`), rows drawn from a fixed seed: about two thirds GPT-4, the rest ChatGPT, and one
row in twelve a failed request (0 response tokens), so vLLM's filter has work to do.

    python3 scripts/burstgpt_synthetic.py > tests/data/datasets/burstgpt/burstgpt_synthetic.csv
"""

import random

rng = random.Random(20261125)
print("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")
t = 0
for _ in range(300):
    t += rng.randint(0, 7)
    model = "GPT-4" if rng.random() < 0.66 else "ChatGPT"
    request = int(rng.lognormvariate(4.5, 0.8)) + 1
    response = 0 if rng.random() < 1 / 12 else int(rng.lognormvariate(4.0, 0.9)) + 1
    log = "Conversation log" if rng.random() < 0.7 else "API log"
    print(f"{t},{model},{request},{response},{request + response},{log}")
