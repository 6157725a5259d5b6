#!/usr/bin/env python3
"""Tests of parity.py's rules, on made-up results: the comparison that judges bench against
vLLM's client must itself fail when a client mismeasures. Standard library only:

    python3 scripts/test_parity.py
"""

import math
import os
import random
import statistics
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parity  # noqa: E402

# vs-vllm.sh's buckets: 2% apart from 1 ms.
BOUNDS = [float(f"{0.001 * 1.02 ** i:.6g}") for i in range(673)] + [math.inf]


def prom(ttfts, e2es=None):
    """/metrics deltas of one run whose requests had these server-side TTFTs (and E2ELs), s."""
    out = {"hist": {}}
    for quantity, xs in (("ttft", ttfts), ("e2e", e2es)):
        if xs is None:
            continue
        out[f"{quantity}_sum"], out[f"{quantity}_count"] = sum(xs), len(xs)
        out["hist"][quantity] = [("+Inf" if math.isinf(b) else repr(b), sum(1 for x in xs if x <= b))
                                 for b in BOUNDS]
    return out


def result(ttfts, **extra):
    """A client's result with these per-request TTFTs (s): the list and its statistics, as
    vLLM computes them (numpy's percentile, population std)."""
    ms = [1000 * x for x in ttfts]
    return {"ttfts": ttfts, "completed": len(ttfts), "mean_ttft_ms": statistics.fmean(ms),
            "median_ttft_ms": statistics.median(ms),
            "std_ttft_ms": statistics.pstdev(ms), "p99_ttft_ms": parity.pct(ms, 0.99), **extra}


def verdicts(v, b, pv, pb, **kw):
    shifts = parity.server_shifts(pv, pb, None)
    return {r.key: r.verdict for r in parity.compare(v, b, None, None, shifts, **kw)}


class ServerStatistics(unittest.TestCase):
    def test_bucket_statistics_are_within_the_buckets_width(self):
        rng = random.Random(1)
        xs = sorted(rng.lognormvariate(-1, 0.8) for _ in range(1000))
        p = prom(xs)
        self.assertAlmostEqual(parity.server_value_ms(p, "ttft", "mean"), 1000 * statistics.fmean(xs), places=6)
        for stat, exact in (("q0.5", statistics.median(xs)), ("q0.99", parity.pct(xs, 0.99)),
                            ("std", statistics.pstdev(xs))):
            got = parity.server_value_ms(p, "ttft", stat)
            self.assertLess(abs(got - 1000 * exact), 0.02 * 1000 * exact, stat)

    def test_keys_follow_the_statistic_of_their_quantity(self):
        self.assertEqual(parity.server_stat("median_ttft_ms", True), ("ttft", "q0.5"))
        self.assertEqual(parity.server_stat("p99_itl_ms", True), ("itl", "q0.99"))
        self.assertEqual(parity.server_stat("p99.9_e2el_ms", True), ("e2e", "q0.999"))
        self.assertEqual(parity.server_stat("std_tpot_ms", True), ("tpot", "std"))
        self.assertEqual(parity.server_stat("p99_itl_ms", False), ("tpot", "mean"))
        self.assertEqual(parity.server_stat("duration", True), ("e2e", "mean"))


class ServerVaries(unittest.TestCase):
    # The server was 40% slower in bench's run; both clients add 10 ms to each TTFT.
    SV = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 10.0]
    SB = [1.4 * x for x in SV]

    def test_a_slower_server_is_the_servers_doing(self):
        got = verdicts(result([x + 0.01 for x in self.SV]), result([x + 0.01 for x in self.SB]),
                       prom(self.SV), prom(self.SB))
        for key in ("mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms", "ttfts"):
            self.assertEqual(got[key], "server varies", key)

    def test_a_client_that_adds_time_differs(self):
        # bench adds 400 ms more than vLLM's client to every request: no rule may excuse it.
        got = verdicts(result([x + 0.01 for x in self.SV]), result([x + 0.41 for x in self.SB]),
                       prom(self.SV), prom(self.SB))
        for key in ("mean_ttft_ms", "median_ttft_ms", "ttfts"):
            self.assertEqual(got[key], "DIFFER", key)

    def test_not_when_the_server_counts_other_requests(self):
        # The server's histogram holds 3 observations per client request (as vLLM's for
        # rerank, which scores each document as a request): its statistics are not per
        # client request, so they excuse nothing.
        got = verdicts(result([x + 0.01 for x in self.SV]), result([x + 0.01 for x in self.SB]),
                       prom(self.SV * 3), prom(self.SB * 3))
        for key in ("mean_ttft_ms", "median_ttft_ms", "ttfts"):
            self.assertEqual(got[key], "DIFFER", key)

    def test_another_order_of_service_is_the_servers_doing(self):
        # The same server times, served in another order: per request they differ, sorted
        # they agree with the server's own observations.
        order = [3, 0, 7, 1, 6, 2, 5, 4]
        bench = [self.SV[i] + 0.01 for i in order]
        got = verdicts(result([x + 0.01 for x in self.SV]), result(bench), prom(self.SV), prom(self.SV))
        self.assertEqual(got["ttfts"], "server varies")
        self.assertEqual(got["median_ttft_ms"], "agree")


class DocumentGroups(unittest.TestCase):
    """Rerank: each client request is a query and 3 documents, 4 engine requests to vLLM; a
    request ends with its last one. The server batched them differently in bench's run."""
    SV = [[1.0, 1.2, 1.3, 1.5], [2.0, 2.1, 2.6, 3.0], [4.0, 4.1, 4.2, 4.4]]
    SB = [[1.0, 1.1, 1.2, 1.3], [5.0, 5.1, 5.2, 5.3], [6.0, 6.2, 6.3, 6.5]]

    def client(self, groups, extra_s):
        lats = [max(g) + extra_s for g in groups]
        r = {"latencies": lats, "completed": len(lats), "errors": [""] * len(lats)}
        r.update({k: v for k, v in result(lats).items() if k.endswith("_ms")})
        return {k.replace("ttft", "e2el"): v for k, v in r.items()}, prom([x for g in groups for x in g],
                                                                      [x for g in groups for x in g])

    def test_latencies_the_server_accounts_for_are_the_servers_doing(self):
        (v, pv), (b, pb) = self.client(self.SV, 0.01), self.client(self.SB, 0.003)
        got = verdicts(v, b, pv, pb)
        for key in ("latencies", "mean_e2el_ms", "median_e2el_ms", "std_e2el_ms"):
            self.assertEqual(got[key], "server varies", key)

    def test_a_client_that_adds_time_differs(self):
        # bench adds 300 ms to each request: beyond the buckets and the time outside the engine.
        (v, pv), (b, pb) = self.client(self.SV, 0.01), self.client(self.SB, 0.3)
        got = verdicts(v, b, pv, pb)
        for key in ("latencies", "mean_e2el_ms", "median_e2el_ms"):
            self.assertEqual(got[key], "DIFFER", key)

    def test_a_statistic_not_computed_as_vllm_does_differs(self):
        (v, pv), (b, pb) = self.client(self.SV, 0.01), self.client(self.SB, 0.003)
        b["std_e2el_ms"] = statistics.stdev(1000 * x for x in b["latencies"])  # sample, not population
        self.assertEqual(verdicts(v, b, pv, pb)["std_e2el_ms"], "DIFFER")


class Derived(unittest.TestCase):
    def test_the_peak_tokens_per_second_follows_each_clients_own_times(self):
        # Two requests of 3 tokens: together in vLLM's run (6 tokens in second 0), one after
        # the other in bench's (3 and 3).
        v = {"start_times": [0.0, 0.0], "ttfts": [0.1, 0.1], "itls": [[0.1, 0.1], [0.1, 0.1]],
             "latencies": [0.3, 0.3], "errors": ["", ""]}
        b = {"start_times": [0.0, 0.0], "ttfts": [0.1, 1.1], "itls": [[0.1, 0.1], [0.1, 0.1]],
             "latencies": [0.3, 1.3], "errors": ["", ""]}
        self.assertEqual(parity.per_second_peaks(v), {"max_output_tokens_per_s": 6.0, "max_concurrent_requests": 2})
        self.assertEqual(parity.per_second_peaks(b), {"max_output_tokens_per_s": 3.0, "max_concurrent_requests": 2})
        row = lambda key, verdict: parity.Row(key, "tol", None, None, verdict)
        for reported, expected in ((3.0, "server varies"), (4.0, "DIFFER")):
            rows = [row("ttfts", "server varies"), row("itls", "agree"), row("latencies", "server varies"),
                    row("start_times", "agree"), parity.Row("max_output_tokens_per_s", "tol", 6.0, reported, "DIFFER")]
            parity.by_derivation(rows, {**v, "max_output_tokens_per_s": 6.0}, {**b, "max_output_tokens_per_s": reported})
            self.assertEqual(rows[-1].verdict, expected, reported)
        # Not when the per-request times themselves differ without a cause.
        rows = [row("ttfts", "DIFFER"), row("itls", "agree"), row("latencies", "agree"),
                parity.Row("max_output_tokens_per_s", "tol", 6.0, 3.0, "DIFFER")]
        parity.by_derivation(rows, v, b)
        self.assertEqual(rows[-1].verdict, "DIFFER")


class CapSlots(unittest.TestCase):
    def test_sends_at_a_cap_follow_the_servers_finishing_order(self):
        # Cap 2, four requests due at once: each later send takes the slot of a completion.
        run = lambda starts, lats: {"max_concurrency": 2, "request_rate": "inf", "start_times": starts,
                                    "latencies": lats, "errors": [""] * 4}
        v = run([0.0, 0.0, 5.0, 6.0], [5.0, 6.0, 1.0, 1.0])
        row = lambda key, verdict: parity.Row(key, "tol", None, None, verdict)
        for starts, expected in (([0.0, 0.0, 4.0, 6.0], "server varies"),  # another finishing order
                                 ([0.0, 0.0, 4.0, 7.0], "DIFFER"),          # a slot left idle for 1 s
                                 ([0.0, 0.0, 3.5, 6.0], "DIFFER")):         # a send over the cap
            rows = [row("latencies", "server varies"), row("start_times", "DIFFER")]
            parity.by_cap_slots(rows, v, run(starts, [7.0, 4.0, 2.0, 1.0]))
            self.assertEqual(rows[-1].verdict, expected, starts)


    def test_a_client_slow_to_refill_a_slot_differs(self):
        # Cap 1: vLLM's client sends 0.5 ms after each completion; bench 0.2 ms, or 3 ms.
        run = lambda gap: {"max_concurrency": 1, "request_rate": "inf", "errors": [""] * 4,
                           "queue_times": [0.0, 1.0 + gap, 2.0 + 2 * gap, 3.0 + 3 * gap], "latencies": [1.0] * 4}
        for gap, expected in ((0.0002, "agree"), (0.003, "DIFFER")):
            (row,) = parity.slot_overhead_rows(run(0.0005), run(gap), None)
            self.assertAlmostEqual(row.b, 1000 * gap, places=6)
            self.assertEqual(row.verdict, expected, gap)


class DatasetDraws(unittest.TestCase):
    def test_only_a_dataset_that_draws_from_numpys_global_generator_moves_the_arrivals(self):
        v = {"request_rate": 2.0, "start_times": [0.0, 0.2, 1.6]}
        b = {"request_rate": 2.0, "start_times": [0.0, 0.6, 0.7]}
        rows = lambda d: {r.key: r.verdict for r in parity.compare(v, b, None, None, None, d)}
        self.assertEqual(rows("prefix_repetition")["start_times"], "dataset draws")
        self.assertEqual(rows("random")["start_times"], "DIFFER")
        # At a cap every request is due at once (results say request_rate "inf"): no draws.
        v["request_rate"] = b["request_rate"] = "inf"
        self.assertEqual(rows("prefix_repetition")["start_times"], "DIFFER")

    def test_texts_differ_by_arrivals_only_where_another_request_met_them_otherwise(self):
        # Request 1 arrives 0.4 s into request 0's generation in vLLM's run, 0.1 s in bench's.
        v = {"request_rate": 2.0, "start_times": [0.0, 0.4, 5.0], "latencies": [1.0, 1.0, 1.0],
             "itls": [[0.05] * 4] * 3, "generated_texts": ["ab", "cd", "ef"]}
        b = {**v, "start_times": [0.0, 0.1, 5.3], "generated_texts": ["ax", "cd", "ef"]}
        rows = lambda d: {r.key: r.verdict for r in parity.compare(v, b, v, None, None, d)}
        self.assertEqual(rows("prefix_repetition")["generated_texts"], "dataset draws")
        self.assertEqual(rows("random")["generated_texts"], "DIFFER")
        # Request 2 ran alone in both runs: its text has no such cause.
        b["generated_texts"] = ["ab", "cd", "ex"]
        self.assertEqual(rows("prefix_repetition")["generated_texts"], "DIFFER")
        # Nor a text whose company came at the same moments.
        b["generated_texts"] = ["ax", "cd", "ef"]
        b["start_times"] = [0.0, 0.41, 5.3]
        self.assertEqual(rows("prefix_repetition")["generated_texts"], "DIFFER")


if __name__ == "__main__":
    unittest.main()
