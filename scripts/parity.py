#!/usr/bin/env python3
"""Compare a `vllm bench serve` result file with a `bench` result file, key by key.

Used by `scripts/vs-vllm.sh parity`; it can also be run on any pair of result files made
with `--save-result --save-detailed` on the same workload (same seed, dataset, server):

    python3 scripts/parity.py compare --vllm V.json --bench B.json [--vllm-again V2.json]
        [--server-timing T.json] [--title TEXT] [--summary OUT.json]
    python3 scripts/parity.py matrix S1.json S2.json ...   # one column per --summary file

Every key the two files share is printed with both values and a verdict:
- exact: configuration, counts and request sets (completed, failed, total_input_tokens,
  total_output_tokens, max_concurrent_requests, input_lens, output_lens, which requests
  failed, generated_texts); list-valued keys are compared element by element and the first
  difference is shown;
- tolerance: latencies, rates and times. Without --vllm-again the tolerance is fixed:
  latency statistics (ms) within max(2 ms, 5%), per-request times (s) within
  max(2 ms, 5%) each, rates and durations within 5%. With --vllm-again (a second vLLM run
  on a fresh server, the server's own run-to-run variation) each key's tolerance is
  widened to twice the difference between the two vLLM runs (for per-request lists, twice
  the 90th percentile of the per-request differences) when that is larger;
- derived, exact: `(send order)`, the order in which the requests were sent (start_times
  ranked, over the requests both completed); vLLM sends in dataset order;
- not compared: `date` (when the run happened); `errors` texts are shown, but only which
  requests failed is compared (vLLM stores a Python traceback, bench a `kind: message`).
Verdicts besides agree/DIFFER say why a key differs, so that one cause is not
counted as many disagreements:
- `failures`: the two clients failed different requests (the `errors` row is then DIFFER,
  with the first error of each); a count or per-request list that is equal over the
  requests both completed, and differs only by the requests one side failed, gets this
  verdict, with both values over the common requests in the note;
- `server varies` (with --vllm-again only): `generated_texts` that differ from the first
  vLLM run in no more requests than twice the number in which the two vLLM runs differ
  from each other (the same client, the same requests: the server itself gave different
  texts; llama.cpp at temperature 0 is not deterministic across batch compositions);
  likewise a timing key outside its tolerance that the server's own /metrics account for
  (with --prom-vllm and --prom-bench; on a CPU vLLM's speed moves from run to run with the
  batches it forms). When the runs kept the server's histogram buckets, a latency statistic
  (mean, median, pNN, std of TTFT, ITL, TPOT, E2EL) qualifies when each client's value minus
  the server's own same statistic over the same run agree (both clients measured what their
  server did; the server did something different), within the tolerance or the buckets' 2%;
  per-request TTFTs and latencies when, sorted, each client's minus the server's own
  observations agree rank by rank; max_output_tokens_per_s and max_concurrent_requests
  (counted in 1-second buckets, so timing decides them) when each client's value is vLLM's
  formula over its own per-request times and those rows pass; start_times and
  queue_times at a concurrency cap when in both runs every send followed the completion
  whose slot it took and the latencies pass (by_cap_slots); any other timing key
  (and every key of runs without the buckets) when it is within twice the server's own
  relative change between the runs of the statistic it follows (its mean TTFT, TPOT or
  E2EL without the buckets). Where the server's histogram counted more requests than the
  client completed (rerank: vLLM embeds the query and each document as requests of their
  own), its statistics excuse nothing; the latencies qualify when every latency of each
  client is within GROUP_SLACK_S after one of the server's own end-to-end latencies of
  that run (by_document_groups), and a latency statistic whose per-request list qualifies
  when each client's value is vLLM's formula over its own list (by_statistic_of_list).
  The note gives those values;
- `dataset draws`: `start_times` at a request rate that differ for a dataset whose vLLM
  class draws from numpy's global generator (NUMPY_GLOBAL_DATASETS), which moves vLLM's
  arrival gaps; bench's gaps are vLLM's for every other dataset. In such a case,
  `generated_texts` that differ only for requests that another request met at another
  moment in the two runs (texts_by_arrivals): the server batched them otherwise.
Keys only one side has are listed after the table.
"""

import argparse
import contextlib
import io
import json
import math
import os
import re
import statistics
import sys

EXACT_META = ["endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
              "request_rate", "burstiness", "max_concurrency"]
EXACT_COUNTS = ["completed", "failed", "total_input_tokens", "total_output_tokens",
                "max_concurrent_requests", "rtfx", "request_goodput", "total_input_sequences"]
EXACT_LISTS = ["input_lens", "output_lens", "generated_texts"]
RATES = ["duration", "request_throughput", "output_throughput", "total_token_throughput",
         "max_output_tokens_per_s", "input_sequence_throughput"]
TIME_LISTS = ["ttfts", "latencies", "queue_times", "start_times"]
NOT_COMPARED = ["date"]
# Verdicts of a difference with a stated cause (see the module's doc).
EXPLAINED = ("failures", "server varies", "dataset draws")

BASE_ABS_MS = 2.0
BASE_REL = 0.05


def is_latency_stat(key):
    return key.endswith("_ms") and key.split("_")[0] in ("mean", "median", "std") or (
        key.endswith("_ms") and key.startswith("p"))


def fmt(v, width=14):
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        return f"{v:.6g}" if abs(v) < 1e6 else f"{v:.0f}"
    if isinstance(v, str):
        s = json.dumps(v)
        return s if len(s) <= 40 else s[:37] + '..."'
    if isinstance(v, list):
        return f"[{len(v)} values]"
    return json.dumps(v)


def short_list(v):
    if not v:
        return "[]"
    if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        head = ", ".join(fmt(x) for x in v[:4])
        tot = sum(v)
        return f"{len(v)} values, sum {fmt(float(tot)) if isinstance(tot, float) else tot}: [{head}{', ...' if len(v) > 4 else ''}]"
    if all(isinstance(x, str) for x in v):
        nonempty = sum(1 for x in v if x)
        return f"{len(v)} strings, {nonempty} non-empty"
    if all(isinstance(x, list) for x in v):
        return f"{len(v)} lists, {sum(len(x) for x in v)} values"
    return f"{len(v)} values"


def pct(values, q):
    s = sorted(values)
    if not s:
        return 0.0
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Row:
    def __init__(self, key, kind, v, b, verdict, note=""):
        self.key, self.kind, self.v, self.b, self.verdict, self.note = key, kind, v, b, verdict, note


def failed_set(r):
    errs = r.get("errors")
    return None if not isinstance(errs, list) else {i for i, e in enumerate(errs) if e}


# Datasets whose vLLM class draws from numpy's global generator after `vllm bench serve`
# seeded it, with the lines that do: vLLM's arrival gaps (`np.random.gamma`, serve.py:479)
# then continue the dataset's stream, while bench's are those of a fresh
# `np.random.seed(seed)` whatever the dataset (crates/core/src/schedule.rs).
NUMPY_GLOBAL_DATASETS = {
    "prefix_repetition": "vllm/benchmarks/datasets/datasets.py:4195 np.random.seed, :4221 np.random.randint",
}


def compare(v, b, v2, server, shifts=None, dataset=None):
    """The rows of every shared key. shifts (server_shifts, on a real vLLM): a timing key
    outside its tolerance, but within twice the server's own change between the runs, gets
    the verdict `server varies` with that change in its note. dataset: the case's dataset
    (vs-vllm.sh's case name), for NUMPY_GLOBAL_DATASETS."""
    shifts = shifts or {}
    rows = []
    shared = [k for k in v if k in b]
    fv, fb = failed_set(v), failed_set(b)
    n = max(len(v.get("errors") or []), len(b.get("errors") or []))
    # Requests both clients completed, when they failed different ones (else None).
    common = None
    if fv is not None and fb is not None and fv != fb:
        common = [i for i in range(n) if i not in fv and i not in fb]

    def over_common(key):
        """(vLLM, bench) of a count recomputed over the requests both completed."""
        if key == "completed":
            return len(common), len(common)
        if key == "failed":
            return 0, 0
        lens = {"total_input_tokens": "input_lens", "total_output_tokens": "output_lens"}.get(key)
        if lens and isinstance(v.get(lens), list) and isinstance(b.get(lens), list):
            return sum(v[lens][i] for i in common), sum(b[lens][i] for i in common)
        return None

    failures_note = lambda: (f"vLLM failed {sorted(fv) or 'none'}, bench failed {sorted(fb) or 'none'}; "
                             f"over the {len(common)} requests both completed: ")

    def by_server(row, key, within):
        """`server varies` for a timing row that differs, when within(rel) holds with rel the
        server's own relative change between the runs for the statistic the key follows."""
        shift = shifts.get(server_stat(key, shifts.get("have_hist", False)))
        if row.verdict == "DIFFER" and shift is not None and within(shift[0]):
            row.verdict = "server varies"
            row.note += f"; within twice the server's own change ({shift[1]})"

    def by_client_offset(row, key, a, c, tol):
        """`server varies` for a latency statistic that differs, when each client's value minus
        the server's own same statistic over the same run agrees: both clients measured what
        their server did, and the server did something different. Within the tolerance, or
        the buckets' resolution (2%, for each of the two servers' values) for a quantile or
        spread, or twice vLLM's own run-to-run change of that offset."""
        quantity, stat = server_stat(key, True)
        prom_v, prom_b = shifts["prom"]
        if not (per_request(prom_v, v, quantity) and per_request(prom_b, b, quantity)):
            return
        _, text, sv, sb, sv2 = shifts[(quantity, stat)]
        ov, ob = a - sv, c - sb
        bound = max(tol, 0.02 * (sv + sb) if stat != "mean" else 0.0)
        if v2 is not None and sv2 is not None and isinstance(v2.get(key), (int, float)):
            bound = max(bound, 2 * abs((v2[key] - sv2) - ov))
        if row.verdict == "DIFFER" and abs(ob - ov) <= bound:
            row.verdict = "server varies"
            row.note += (f"; each client minus the server's own value agree: vLLM {ov:+.4g} ms, bench "
                         f"{ob:+.4g} ms (within {bound:.3g}; {text})")

    def by_order_statistics(row, key, a, c, a2):
        """`server varies` for a per-request list (TTFTs, latencies) that differs, when each
        client's k-th smallest value minus the server's own k-th smallest observation of the
        same run agree for every k: both clients measured what their server did, and the server
        served the requests in another order or batches (which request waited is the server's
        choice; on a CPU a few microseconds between simultaneous arrivals change it). Within
        max(2 ms, the buckets' 2% of each server value) per rank, or twice vLLM's own
        run-to-run change of that offset."""
        xv, xb, xv2 = shifts["observations"][ORDER_QUANTITY[key]]
        if not (len(a) == len(xv) and len(c) == len(xb)):
            return
        sa, sc = sorted(a), sorted(c)
        sa2 = sorted(a2) if a2 and xv2 and len(a2) == len(xv2) else None
        worst = (0.0, 0, 0.0, 0.0)
        for k in range(len(sa)):
            ov, ob = sa[k] - xv[k], sc[k] - xb[k]
            bound = max(BASE_ABS_MS / 1000, 0.02 * (xv[k] + xb[k]))
            if sa2 is not None:
                bound = max(bound, 2 * abs((sa2[k] - xv2[k]) - ov))
            if abs(ob - ov) > bound:
                return
            worst = max(worst, (abs(ob - ov), k, ov, ob))
        row.verdict = "server varies"
        gap, k, ov, ob = worst
        row.note += (f"; sorted, each client minus the server's own observations agree at every rank "
                     f"(the largest gap {1000 * gap:.3g} ms, at rank {k}: vLLM {1000 * ov:+.4g} ms, "
                     f"bench {1000 * ob:+.4g} ms): the server served the requests in another order or other batches")

    def tol_scalar(key, a, ms):
        """Tolerance for a scalar timing value a (ms if ms else relative-only)."""
        base = max(BASE_ABS_MS, BASE_REL * abs(a)) if ms else BASE_REL * abs(a)
        spread = None
        if v2 is not None and isinstance(v2.get(key), (int, float)):
            spread = abs(v2[key] - a)
            return max(base, 2 * spread), spread
        return base, spread

    for key in shared:
        a, c = v[key], b[key]
        if key in NOT_COMPARED:
            rows.append(Row(key, "info", a, c, "n/a", "not compared (run time)"))
        elif key in EXACT_META or key in EXACT_COUNTS:
            same = a == c or (isinstance(a, (int, float)) and isinstance(c, (int, float))
                              and float(a) == float(c))
            row = Row(key, "exact", a, c, "agree" if same else "DIFFER")
            if not same and common is not None and key in EXACT_COUNTS:
                oc = over_common(key)
                if oc is not None:
                    row.note = failures_note() + f"vLLM {oc[0]}, bench {oc[1]}"
                    if oc[0] == oc[1]:
                        row.verdict = "failures"
            rows.append(row)
        elif key in EXACT_LISTS:
            row = list_exact(key, a, c)
            if row.verdict == "DIFFER" and common is not None and isinstance(a, list) and isinstance(c, list) \
                    and len(a) == len(c) == n:
                sub = list_exact(key, [a[i] for i in common], [c[i] for i in common])
                row.note = failures_note() + (sub.note if sub.verdict == "DIFFER" else "all equal")
                if sub.verdict == "agree":
                    row.verdict = "failures"
            if row.verdict == "DIFFER" and key == "generated_texts" and v2 is not None:
                row = texts_vs_server(row, a, c, v2.get(key), common)
            if (row.verdict == "DIFFER" and key == "generated_texts" and dataset in NUMPY_GLOBAL_DATASETS
                    and math.isfinite(float(v.get("request_rate", "inf")))):
                texts_by_arrivals(row, a, c, v, b, common)
            rows.append(row)
        elif key == "errors":
            fa = [bool(x) for x in a]
            fb = [bool(x) for x in c]
            if fa == fb:
                n = sum(fa)
                rows.append(Row(key, "exact", a, c, "agree",
                                f"same requests failed ({n})" + (f"; vLLM: {first_err(a)}; bench: {first_err(c)}" if n else "")))
            else:
                i = next((i for i, (x, y) in enumerate(zip(fa, fb)) if x != y), min(len(fa), len(fb)))
                rows.append(Row(key, "exact", a, c, "DIFFER",
                                f"failed: vLLM {sum(fa)}, bench {sum(fb)}; first difference at [{i}]: "
                                f"vLLM {json.dumps(a[i][:80]) if i < len(a) else '-'}, bench {json.dumps(c[i][:80]) if i < len(c) else '-'}"))
        elif key in RATES or is_latency_stat(key):
            ms = is_latency_stat(key)
            if not isinstance(a, (int, float)) or not isinstance(c, (int, float)):
                rows.append(Row(key, "tol", a, c, "agree" if a == c else "DIFFER"))
                continue
            tol, spread = tol_scalar(key, a, ms)
            d = c - a
            note = f"diff {d:+.4g}, tol {tol:.3g}" + (f" (vLLM run-to-run {spread:.3g})" if spread is not None else "")
            if server and key in server[1]:
                note += (f"; server's own: vLLM run {server[0][key]:.4g}, " if server[0] and key in server[0]
                         else "; server's own: ") + f"bench run {server[1][key]:.4g}"
            row = Row(key, "tol", a, c, "agree" if abs(d) <= tol else "DIFFER", note)
            if shifts.get("have_hist") and key.endswith("_ms") and server_stat(key, True) in shifts:
                by_client_offset(row, key, a, c, tol)
            elif not (shifts.get("have_hist") and key in DERIVED):
                # (With the server's histograms a derived key is judged by by_derivation.)
                by_server(row, key, lambda rel: abs(d) <= max(tol, 2 * rel * abs(a)))
            rows.append(row)
        elif key in TIME_LISTS:
            a2 = None if v2 is None else v2.get(key)
            row = time_list(key, a, c, a2)
            if row.verdict == "DIFFER" and common is not None and len(a) == len(c) == n:
                keep = lambda xs: [xs[i] for i in common] if xs and len(xs) == n else xs
                sub = time_list(key, keep(a), keep(c), keep(a2))
                row.note = failures_note() + sub.note
                if sub.verdict == "agree":
                    row.verdict = "failures"
            if key == "latencies" and shifts.get("have_hist") and row.verdict == "DIFFER" \
                    and grouped(shifts["prom"][0], v) and grouped(shifts["prom"][1], b):
                by_document_groups(row, a, c, *shifts["prom"])
            elif key in ORDER_QUANTITY and shifts.get("have_hist"):
                by_order_statistics(row, key, a, c, a2)
            elif not shifts.get("have_hist"):
                # (With the server's histograms, send and queue times are judged by by_cap_slots.)
                by_server(row, key, lambda rel: time_list(key, a, c, a2, rel).verdict == "agree")
            if (row.verdict == "DIFFER" and key == "start_times" and dataset in NUMPY_GLOBAL_DATASETS
                    and math.isfinite(float(v.get("request_rate", "inf")))):
                row.verdict = "dataset draws"
                row.note += (f"; vLLM's {dataset} draws from numpy's global generator after seeding it "
                             f"({NUMPY_GLOBAL_DATASETS[dataset]}), so its arrival gaps continue that "
                             "stream; bench's are a fresh np.random.seed(seed)'s")
            rows.append(row)
        elif key == "itls":
            row = itl_lists(a, c, None if v2 is None else v2.get(key))
            if shifts.get("have_hist") and ("itl", "mean") in shifts:
                # The mean gap is vLLM's mean_itl_ms: each client's minus the server's own.
                gaps = lambda lists: [1000 * g for x in lists for g in x]
                ma, mc = statistics.fmean(gaps(a) or [0]), statistics.fmean(gaps(c) or [0])
                if row.verdict == "DIFFER":
                    by_client_offset(row, "mean_itl_ms", ma, mc, max(BASE_ABS_MS, BASE_REL * ma))
            else:
                by_server(row, key, lambda rel: itl_lists(a, c, None if v2 is None else v2.get(key), rel).verdict == "agree")
            if row.verdict == "DIFFER" and common is not None and len(a) == len(c) == n:
                sub = itl_lists([a[i] for i in common], [c[i] for i in common],
                                None if v2 is None or not v2.get(key) else v2[key])
                if sub.verdict == "agree":
                    row.verdict, row.note = "failures", failures_note() + sub.note
            rows.append(row)
        else:
            rows.append(Row(key, "exact", a, c, "agree" if a == c else "DIFFER", "(unclassified key: exact)"))
    by_cap_slots(rows, v, b)
    by_derivation(rows, v, b)
    by_statistic_of_list(rows, v, b)
    order = send_order(v, b, common)
    if order is not None:
        rows.append(order)
    return rows


def send_order(v, b, common):
    """A derived exact check: the order in which the requests were sent (start_times ranked),
    over the requests both completed. vLLM sends in dataset order: with --max-concurrency,
    asyncio's semaphore admits its tasks in the order they were created."""
    sa, sb = v.get("start_times"), b.get("start_times")
    if not isinstance(sa, list) or not isinstance(sb, list) or len(sa) != len(sb) or not sa:
        return None
    idx = list(common) if common is not None else list(range(len(sa)))
    oa = sorted(idx, key=lambda i: (sa[i], i))
    ob = sorted(idx, key=lambda i: (sb[i], i))
    if oa == ob:
        return Row("(send order)", "exact", oa, ob, "agree", f"the same order of {len(oa)} sends (derived from start_times)")
    k = next(k for k, (x, y) in enumerate(zip(oa, ob)) if x != y)
    return Row("(send order)", "exact", oa, ob, "DIFFER",
               f"derived from start_times; first difference at send {k}: vLLM sent request {oa[k]}, bench "
               f"request {ob[k]}; sends {max(0, k - 2)}-{min(len(ob), k + 6) - 1}: vLLM {oa[max(0, k - 2):k + 6]}, "
               f"bench {ob[max(0, k - 2):k + 6]}")


def text_diff(x, y):
    """Where two texts part: the common prefix length and what follows on each side."""
    k = next((k for k, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
    return f"from character {k}: vLLM {json.dumps(x[k:k + 30])}, bench {json.dumps(y[k:k + 30])}"


def texts_vs_server(row, a, c, a2, common):
    """generated_texts that differ: is that within the server's own variation, as measured by
    two vLLM runs (the same client, the same requests)? As for the timing keys, bench may
    differ from the first vLLM run in up to twice as many texts as the two vLLM runs differ."""
    if not isinstance(a2, list) or len(a2) != len(a) or len(a) != len(c):
        return row
    idx = list(common) if common is not None else list(range(len(a)))
    vary = [i for i in idx if a[i] != a2[i] and a2[i]]
    diff = [i for i in idx if a[i] != c[i]]
    i = diff[0]
    row.note = (f"{len(diff)} of {len(idx)} differ from vLLM's first run, first at [{i}] {text_diff(a[i], c[i])}; "
                f"vLLM's two runs differ from each other in {len(vary)} (tolerance: twice that)")
    if len(diff) <= 2 * len(vary):
        row.verdict = "server varies"
    return row


def texts_by_arrivals(row, a, c, v, b, common):
    """generated_texts that differ in a case whose arrival times differ by vLLM's dataset draws
    (see `dataset draws`): the server batches a request with the others it meets, and greedy
    decoding on a CPU depends on the batch (vLLM's chunked prefill puts a newcomer's prompt in
    the same forward pass). So a text may differ when, between the two runs, another request
    met its generation at another moment: some request in flight beside it in either run
    started or ended, relative to its own start, more than one of its inter-token gaps (vLLM's
    run; 10 ms without one) apart in the other. Every differing text must have that cause, or
    the row stays DIFFER."""
    def spans(r):
        s, lat = r.get("start_times"), r.get("latencies")
        if not isinstance(s, list) or not isinstance(lat, list) or not len(s) == len(lat) == len(a):
            return None
        return [(x - s[0], x - s[0] + y) for x, y in zip(s, lat)]
    sv, sb = spans(v), spans(b)
    if sv is None or sb is None or len(a) != len(c):
        return
    itls = v.get("itls") if isinstance(v.get("itls"), list) and len(v["itls"]) == len(a) else None

    def met_otherwise(i):
        gaps = itls[i] if itls and itls[i] else None
        gap = statistics.fmean(gaps) if gaps else 0.010
        for j in range(len(a)):
            if j == i:
                continue
            beside = any(s[j][0] < s[i][1] and s[i][0] < s[j][1] for s in (sv, sb))
            moved = max(abs((sv[j][k] - sv[i][0]) - (sb[j][k] - sb[i][0])) for k in (0, 1))
            if beside and moved > gap:
                return j, moved, gap
        return None

    idx = list(common) if common is not None else list(range(len(a)))
    diff = [i for i in idx if a[i] != c[i]]
    causes = [met_otherwise(i) for i in diff]
    if not diff or any(x is None for x in causes):
        return
    i, (j, moved, gap) = diff[0], causes[0]
    row.verdict = "dataset draws"
    row.note += (f"; each differing request met another at another moment (at [{i}]: request {j} "
                 f"{1000 * moved:.3g} ms apart, relative to its start, more than its "
                 f"{1000 * gap:.3g} ms inter-token gap): the arrivals differ by vLLM's dataset draws, "
                 "so the server batched it otherwise, and greedy decoding depends on the batch")


def first_err(errs):
    e = next((x for x in errs if x), "")
    e = e.strip().splitlines()[-1] if e.strip() else e
    return json.dumps(e[:100])


def list_exact(key, a, c):
    if not isinstance(a, list) or not isinstance(c, list):
        return Row(key, "exact", a, c, "agree" if a == c else "DIFFER")
    ndiff = sum(1 for x, y in zip(a, c) if x != y) + abs(len(a) - len(c))
    if ndiff == 0:
        return Row(key, "exact", a, c, "agree", f"all {len(a)} equal")
    i = next((i for i, (x, y) in enumerate(zip(a, c)) if x != y), min(len(a), len(c)))
    x = a[i] if i < len(a) else "-"
    y = c[i] if i < len(c) else "-"
    return Row(key, "exact", a, c, "DIFFER",
               f"{ndiff} of {max(len(a), len(c))} differ; first at [{i}]: vLLM {fmt(x)}, bench {fmt(y)}")


def time_list(key, a, c, a2, rel=0.0):
    """Per-request times in seconds; start_times are compared as offsets from the first. rel: each
    time's tolerance is at least 2 * rel of it (the server's own relative change)."""
    if not a or not c:
        return Row(key, "tol", a, c, "agree" if a == c else "DIFFER")
    if key == "start_times":
        a = [x - min(a) for x in a]
        c = [x - min(c) for x in c]
        if a2:
            a2 = [x - min(a2) for x in a2]
    spread = None
    if a2 and len(a2) == len(a):
        spread = pct([abs(x - y) for x, y in zip(a, a2)], 0.9)
    bad, first = 0, None
    for i, (x, y) in enumerate(zip(a, c)):
        tol = max(BASE_ABS_MS / 1000, BASE_REL * abs(x), 2 * rel * abs(x))
        if spread is not None:
            tol = max(tol, 2 * spread)
        if abs(y - x) > tol:
            bad += 1
            if first is None:
                first = (i, x, y, tol)
    if len(a) != len(c):
        bad += abs(len(a) - len(c))
    note = f"{len(a) - bad} of {len(a)} within max(2 ms, 5%)" + (
        f" or 2 x vLLM's run-to-run p90 ({spread * 1000:.3g} ms)" if spread is not None else "")
    if key == "start_times":
        note += "; offsets from the first start"
    if first:
        i, x, y, tol = first
        note += f"; first outside at [{i}]: vLLM {x * 1000:.4g} ms, bench {y * 1000:.4g} ms"
    return Row(key, "tol", a, c, "agree" if bad == 0 else "DIFFER", note)


def itl_lists(a, c, a2, rel=0.0):
    lens_a = [len(x) for x in a]
    lens_c = [len(x) for x in c]
    notes = []
    ok = True
    if lens_a != lens_c:
        ok = False
        i = next((i for i, (x, y) in enumerate(zip(lens_a, lens_c)) if x != y), min(len(a), len(c)))
        notes.append(f"gap counts differ in {sum(1 for x, y in zip(lens_a, lens_c) if x != y)} requests; "
                     f"first at [{i}]: vLLM {lens_a[i] if i < len(a) else '-'}, bench {lens_c[i] if i < len(c) else '-'}")
    else:
        notes.append(f"same gap counts per request ({sum(lens_a)} gaps)")
    # The values: the pooled distribution (not each gap: gaps are not paired in time).
    fa = [x for r in a for x in r]
    fc = [x for r in c for x in r]
    if fa and fc:
        ma, mc = sum(fa) / len(fa) * 1000, sum(fc) / len(fc) * 1000
        tol = max(BASE_ABS_MS, BASE_REL * ma, 2 * rel * ma)
        if a2:
            f2 = [x for r in a2 for x in r]
            if f2:
                tol = max(tol, 2 * abs(sum(f2) / len(f2) * 1000 - ma))
        notes.append(f"mean gap vLLM {ma:.4g} ms, bench {mc:.4g} ms (tol {tol:.3g})")
        ok &= abs(mc - ma) <= tol
    return Row("itls", "tol", a, c, "agree" if ok else "DIFFER", "; ".join(notes))


# The server histogram whose observations a per-request list follows (by_order_statistics).
ORDER_QUANTITY = {"ttfts": "ttft", "latencies": "e2e"}


def per_second_peaks(r):
    """vLLM's max_output_tokens_per_s and max_concurrent_requests (serve.py calculate_metrics)
    from a result's own per-request times: in 1-second buckets from the first start, the most
    tokens (each at start + ttft + the running sum of its ITLs) and the most requests active
    in a bucket (each counted in every bucket from its start's to its end's); None without the
    per-request lists."""
    lists = [r.get(k) for k in ("start_times", "ttfts", "itls", "latencies")]
    if not all(isinstance(x, list) for x in lists) or not lists[0]:
        return None
    errors = r.get("errors") or [""] * len(lists[0])
    done = [i for i in range(len(lists[0])) if not errors[i]]
    if not done:
        return None
    starts, ttfts, itls, lats = lists
    first = min(starts[i] for i in done)
    n = int(math.ceil(max(starts[i] + lats[i] for i in done) - first)) + 1
    tokens, active = [0] * n, [0] * n
    for i in done:
        t = starts[i] + ttfts[i]
        for gap in [0.0] + list(itls[i]):
            t += gap
            k = int(t - first)
            if 0 <= k < n:
                tokens[k] += 1
        for k in range(int(starts[i] - first), int(starts[i] + lats[i] - first) + 1):
            active[k] += 1
    return {"max_output_tokens_per_s": float(max(tokens)), "max_concurrent_requests": max(active)}


# Keys derived from the per-request times alone, with the per-request rows they come from.
DERIVED = {"max_output_tokens_per_s": ("ttfts", "itls", "latencies", "start_times"),
           "max_concurrent_requests": ("latencies", "start_times")}


def by_derivation(rows, v, b):
    """`server varies` for a key computed from the per-request times alone (the most tokens,
    or requests active, in any 1-second window: which second a send or a token falls in is
    the server's timing) that differs, when each client's value is what vLLM's formula
    gives from that client's own per-request times, and those times agree or are the
    server's doing (their own rows): a different schedule of the same server gives another
    peak, not a mismeasurement."""
    verdicts = {r.key: r.verdict for r in rows}
    for row in rows:
        sources = DERIVED.get(row.key)
        if row.verdict != "DIFFER" or sources is None:
            continue
        if any(verdicts.get(k) not in (None, "agree", "server varies", "dataset draws") for k in sources):
            continue
        pv, pb = per_second_peaks(v), per_second_peaks(b)
        mv, mb = (pv or {}).get(row.key), (pb or {}).get(row.key)
        if mv is not None and mv == row.v and mb == row.b:
            row.verdict = "server varies"
            row.note += (f"; each client's value is vLLM's formula over its own per-request times "
                         f"(vLLM {mv:g}, bench {mb:g}), whose rows agree or are the server's doing")


# How long after a completion a client may take to send the request that takes its slot,
# on a 2-core machine that the server keeps busy.
SLOT_SLACK_S = 0.05


def cap_slot_gaps(r, each=False):
    """For a run at a concurrency cap with every request due at once (rate inf), with no
    failures: how far each send is from the moment its slot freed (the start of the run for
    the first `cap` sends, else the (k - cap + 1)-th completion for the k-th send), the
    largest in seconds (each: all of them, in send order); None for another kind of run. A
    send before its slot freed is a negative gap."""
    cap, rate = r.get("max_concurrency"), str(r.get("request_rate"))
    # Every request is due at the start, so its wait for a slot (`queue_times`) is its send
    # time from the start where a result has no start_times (pooling runs).
    starts, lats = r.get("start_times") or r.get("queue_times"), r.get("latencies")
    if not isinstance(cap, int) or rate not in ("inf", "Infinity") or not starts or not lats:
        return None
    if any(r.get("errors") or []) or len(starts) != len(lats):
        return None
    sends = sorted(starts)
    ends = sorted(s + l for s, l in zip(starts, lats))
    gaps = [t - (sends[0] if k < cap else ends[k - cap]) for k, t in enumerate(sends)]
    return gaps if each else max(gaps, key=abs)


def by_cap_slots(rows, v, b):
    """`server varies` for `start_times` or `queue_times` (the wait for a slot) that differ
    at a concurrency cap, when in both runs every send followed the completion whose slot it
    took (within SLOT_SLACK_S, never before it) and the latencies agree or are the server's
    doing: when a slot frees is the server's finishing order, not the client's."""
    verdicts = {r.key: r.verdict for r in rows}
    if verdicts.get("latencies") not in ("agree", "server varies"):
        return
    gv, gb = cap_slot_gaps(v), cap_slot_gaps(b)
    if gv is None or gb is None or not all(-1e-3 <= g <= SLOT_SLACK_S for g in (gv, gb)):
        return
    for row in rows:
        if row.key in ("start_times", "queue_times") and row.verdict == "DIFFER":
            row.verdict = "server varies"
            row.note += (f"; at the cap every send followed the completion whose slot it took (the "
                         f"largest gap: vLLM {1000 * gv:.3g} ms, bench {1000 * gb:.3g} ms), and the "
                         "latencies row passes: the server's finishing order")


def server_stat(key, have_hist=False):
    """Which of the server's own statistics (from its /metrics) a timing key follows, as
    (quantity, statistic): the quantity its TTFT, inter-token latency, time per output token
    or end-to-end latency (durations, rates and per-request start and end times follow how
    long the requests took); the statistic `mean`, `std` or a quantile (`q0.5` for a median,
    `q0.99` for a p99). Without the server's histograms (runs before they were kept, or
    have_hist False) every key follows the mean, and ITLs follow the time per output token."""
    if "ttft" in key:
        quantity = "ttft"
    elif "itl" in key:
        quantity = "itl" if have_hist else "tpot"
    elif "tpot" in key or key == "max_output_tokens_per_s":
        # The most tokens in any one second: how fast the server emitted them.
        quantity = "tpot"
    else:
        quantity = "e2e"
    stat = "mean"
    if have_hist:
        head = key.split("_", 1)[0]
        if head == "median":
            stat = "q0.5"
        elif head == "std":
            stat = "std"
        elif head.startswith("p") and head[1:].replace(".", "", 1).isdigit():
            stat = f"q{float(head[1:]) / 100:g}"
    return quantity, stat


def server_value_ms(prom, quantity, stat):
    """The server's own statistic of one quantity over one client run, in ms: the mean from
    its histogram's sum and count; a percentile (as numpy computes it, between order
    statistics, as both clients do) or the standard deviation from its buckets, each
    observation placed evenly within its bucket, so known to the bucket's width (2% with
    vs-vllm.sh's buckets)."""
    if stat == "mean":
        return server_mean_ms(prom, quantity)
    xs = bucket_observations(prom, quantity)
    if not xs:
        return None
    if stat.startswith("q"):
        return 1000 * pct(xs, float(stat[1:]))
    mean = server_mean_ms(prom, quantity)
    if mean is None:
        return None
    return math.sqrt(sum((1000 * x - mean) ** 2 for x in xs) / len(xs))


def bucket_observations(prom, quantity):
    """The observations of a histogram's cumulative buckets [[upper bound, count], ...] in
    order, each bucket's spread evenly across it (the +Inf bucket's at its lower bound)."""
    xs, lower, below = [], 0.0, 0
    for le, cum in (prom.get("hist") or {}).get(quantity, []):
        upper, n = float(le), round(cum - below)
        for k in range(n):
            xs.append(lower if math.isinf(upper) else lower + (upper - lower) * (k + 0.5) / n)
        if not math.isinf(upper):
            lower = upper
        below = cum
    return xs


def server_shifts(pv, pb, pv2):
    """How far the server's own statistics moved between vLLM's run and bench's run (and
    between vLLM's two runs), relative to vLLM's run: {(quantity, statistic): (shift, text)}
    for every pair server_stat gives. On a CPU the server's speed changes from run to run with
    the batches it forms; a client timing that differs by no more than twice the server's own
    change in the same statistic is the server's doing."""
    have_hist = bool(pv.get("hist") and pb.get("hist"))
    out = {}
    names = {"mean": "mean", "std": "std", "q0.5": "median"}
    for quantity in ("ttft", "itl", "tpot", "e2e"):
        for stat in ("mean", "std", "q0.5", "q0.9", "q0.95", "q0.99", "q0.999") if have_hist else ("mean",):
            sv, sb = server_value_ms(pv, quantity, stat), server_value_ms(pb, quantity, stat)
            if not sv or sb is None:
                continue
            shift = abs(sb - sv) / sv
            name = names.get(stat) or f"p{100 * float(stat[1:]):g}"
            text = f"the server's own {name} {quantity} {sv:.4g} ms in vLLM's run, {sb:.4g} ms in bench's"
            sv2 = server_value_ms(pv2, quantity, stat) if pv2 else None
            if sv2 is not None:
                text += f", {sv2:.4g} ms in vLLM's second"
                shift = max(shift, abs(sv2 - sv) / sv)
            out[(quantity, stat)] = (shift, f"{text}: {100 * shift:.3g}% apart", sv, sb, sv2)
    out["have_hist"] = have_hist
    out["prom"] = (pv, pb)
    out["observations"] = {quantity: (bucket_observations(pv, quantity), bucket_observations(pb, quantity),
                                      bucket_observations(pv2, quantity) if pv2 else None)
                           for quantity in set(ORDER_QUANTITY.values())}
    return out


# The most a client's latency may exceed the server's own end-to-end latency of its last
# document: the client's and the server front end's time outside the engine (tokenising the
# texts, pooling their embeddings into scores, HTTP), on a 2-core machine the server keeps busy.
GROUP_SLACK_S = 0.05


def grouped(prom, r):
    """Whether the server counted more end-to-end latencies than the client completed
    requests: each request was several engine requests (vLLM scores each document of a
    rerank request, and embeds its query, as requests of their own)."""
    count = (prom or {}).get("e2e_count")
    return bool(prom and prom.get("hist")) and count is not None and round(count) > (r.get("completed") or 0)


def group_misfits(prom, lats):
    """The latencies (s) of a client's requests made of several engine requests that no
    engine request's end-to-end latency can account for: a request ends with its last
    engine request, so its latency L is that one's plus the time outside the engine, and
    some non-empty bucket [lower, upper] of the server's histogram must meet
    [L - GROUP_SLACK_S, L]. Exact at the buckets' resolution: no observation is placed."""
    spans, lower, below = [], 0.0, 0
    for le, cum in (prom.get("hist") or {}).get("e2e", []):
        upper = float(le)
        if round(cum - below) > 0:
            spans.append((lower, upper))
        if not math.isinf(upper):
            lower = upper
        below = cum
    return [x for x in lats if not any(lo <= x and hi >= x - GROUP_SLACK_S for lo, hi in spans)]


def by_document_groups(row, a, c, prom_v, prom_b):
    """`server varies` for the latencies of requests that the server ran as several engine
    requests each (rerank: a query and its documents), which no per-request statistic of the
    server describes, when every latency of each client is accounted for by an engine
    request's end-to-end latency in that client's run (group_misfits): both clients measured
    what their server did; which documents the server batched together, and so when each
    request finished, is the server's choice."""
    mv, mb = group_misfits(prom_v, a), group_misfits(prom_b, c)
    if row.verdict == "DIFFER" and not mv and not mb:
        row.verdict = "server varies"
        row.note += (f"; every latency of each client is one of the server's own end-to-end latencies "
                     f"(its histogram counted {prom_v['e2e_count']:.0f} and {prom_b['e2e_count']:.0f} "
                     f"engine requests for the clients' {len(a)} and {len(c)}) plus at most "
                     f"{1000 * GROUP_SLACK_S:.0f} ms: the server batched the documents differently")


# The per-request list each latency statistic of a result is computed from.
STATISTIC_SOURCE = {"ttft": "ttfts", "e2el": "latencies"}


def vllm_statistic(values_s, head):
    """vLLM's statistic (serve.py calculate_metrics) of a per-request list in seconds, in ms:
    numpy's mean, median, population std or percentile; None for another head."""
    ms = [1000 * x for x in values_s]
    if not ms:
        return None
    if head == "mean":
        return statistics.fmean(ms)
    if head == "median":
        return statistics.median(ms)
    if head == "std":
        return statistics.pstdev(ms)
    if head.startswith("p") and head[1:].replace(".", "", 1).isdigit():
        return pct(ms, float(head[1:]) / 100)
    return None


def by_statistic_of_list(rows, v, b):
    """`server varies` for a latency statistic (mean, median, std, pNN of TTFT or E2EL) that
    differs, when each client's value is vLLM's formula over its own per-request list and
    that list's row agrees or is the server's doing: a statistic of the same requests,
    computed as vLLM does, from times the server accounts for."""
    verdicts = {r.key: r.verdict for r in rows}
    for row in rows:
        parts = row.key.split("_")
        if row.verdict != "DIFFER" or len(parts) != 3 or parts[2] != "ms" or parts[1] not in STATISTIC_SOURCE:
            continue
        source = STATISTIC_SOURCE[parts[1]]
        if verdicts.get(source) not in ("agree", "server varies"):
            continue
        done = lambda r: [x for x, e in zip(r[source], r.get("errors") or [""] * len(r[source])) if not e]
        fv, fb = vllm_statistic(done(v), parts[0]), vllm_statistic(done(b), parts[0])
        close = lambda x, y: x is not None and isinstance(y, (int, float)) and abs(x - y) <= 1e-6 * max(1.0, abs(y))
        if close(fv, row.v) and close(fb, row.b):
            row.verdict = "server varies"
            row.note += (f"; each client's value is vLLM's formula over its own {source} ({fv:.6g}, "
                         f"{fb:.6g} ms), whose row is the server's doing")


def per_request(prom, r, quantity):
    """Whether the server's histogram of a per-request quantity (TTFT, TPOT, E2EL) counted
    as many requests as the client completed: not so for rerank, whose documents vLLM
    scores as requests of their own. Per-token quantities (ITL) always compare."""
    if quantity == "itl":
        return True
    count = prom.get(f"{quantity}_count")
    return count is not None and round(count) == r.get("completed")


def server_mean_ms(prom, key):
    """The server's own mean over one client run, in ms, from its /metrics deltas."""
    total, count = prom.get(f"{key}_sum"), prom.get(f"{key}_count")
    return None if not total or not count else 1000 * total / count


def overhead_rows(v, b, v2, pv, pb, pv2):
    """Each client's overhead on a real vLLM: its mean TTFT (TPOT, E2EL) minus the server's own
    mean TTFT (time per output token, end-to-end latency) over the same requests, read from the
    deltas of vLLM's /metrics histograms (`vllm:time_to_first_token_seconds`,
    `vllm:request_time_per_output_token_seconds`, `vllm:e2e_request_latency_seconds`: from the
    request's arrival in vLLM to its first token, or its end). What is left is the network,
    HTTP, the server's front end and the client itself: bench's must not be larger than vLLM's
    client's, within twice the difference between vLLM's two runs (min 2 ms). The server's
    own means in the note say how much of a timing key's difference between the clients'
    runs was the server's (on a CPU its speed varies from run to run with the batches it
    forms)."""
    rows, grouped_run = [], False
    for stat, key in (("ttft", "mean_ttft_ms"), ("tpot", "mean_tpot_ms"), ("e2e", "mean_e2el_ms")):
        sv, sb = server_mean_ms(pv, stat), server_mean_ms(pb, stat)
        if sv is None or sb is None or key not in v or key not in b:
            continue
        if not per_request(pv, v, stat) or not per_request(pb, b, stat):
            rows.append(Row(f"(client overhead, {stat} ms)", "bound", None, None, "n/a",
                            f"not compared: the server counted {pv.get(f'{stat}_count', 0):.0f} requests "
                            f"for the client's {v.get('completed')} (vLLM scores each document of a rerank "
                            "request as a request of its own), so its mean is not per client request"))
            grouped_run = True
            continue
        ov, ob = v[key] - sv, b[key] - sb
        tol, note = BASE_ABS_MS, ""
        if v2 is not None and pv2 and server_mean_ms(pv2, stat) is not None and key in v2:
            spread = abs((v2[key] - server_mean_ms(pv2, stat)) - ov)
            tol = max(tol, 2 * spread)
            note = f"; vLLM run-to-run {spread:.3g} ms"
        verdict = "agree" if ob <= ov + tol else "DIFFER"
        rows.append(Row(f"(client overhead, {stat} ms)", "bound", ov, ob, verdict,
                        f"client mean {key} minus the server's own mean ({sv:.4g} ms in vLLM's run, "
                        f"{sb:.4g} ms in bench's); bench must not exceed vLLM by more than {tol:.3g} ms{note}"))
    if grouped_run:
        rows.extend(slot_overhead_rows(v, b, v2))
    hv, hb = pv.get("prefix_cache_hits"), pb.get("prefix_cache_hits")
    if hv is not None and hb is not None:
        # Which prompts find their prefix cached depends on which were scheduled together,
        # so the hits may vary as much as vLLM's own two runs do.
        hv2 = pv2.get("prefix_cache_hits") if pv2 else None
        tol = 0 if hv2 is None else 2 * abs(hv2 - hv)
        rows.append(Row("(server prefix-cache hits)", "server", hv, hb, "agree" if abs(hb - hv) <= tol else "DIFFER",
                        "delta of vllm:prefix_cache_hits_total over each run (the cache reset before each)"
                        + (f"; vLLM's two runs: {hv:.0f}, {hv2:.0f}" if hv2 is not None else "")))
    return rows


def slot_overhead_rows(v, b, v2):
    """Each client's own overhead where the server's statistics are not per client request
    (rerank), at a concurrency cap: the median time from a completion to the send that takes
    its slot, which involves no server at all. bench's must not exceed vLLM's client's by more
    than 1 ms or twice vLLM's run-to-run change."""
    median_ms = lambda r: (lambda g: None if not g or len(g) <= r["max_concurrency"] else
                           1000 * statistics.median(g[r["max_concurrency"]:]))(cap_slot_gaps(r, each=True))
    gv, gb = median_ms(v), median_ms(b)
    if gv is None or gb is None:
        return []
    gv2 = median_ms(v2) if v2 else None
    tol = max(1.0, 2 * abs(gv2 - gv)) if gv2 is not None else 1.0
    return [Row("(client overhead, slot ms)", "bound", gv, gb, "agree" if gb <= gv + tol else "DIFFER",
                f"median time from a completion to the send that takes its slot, over the "
                f"{len(cap_slot_gaps(b, each=True)) - b['max_concurrency']} sends after the first "
                f"{b['max_concurrency']}; bench must not exceed vLLM by more than {tol:.3g} ms"
                + (f"; vLLM's second run {gv2:.3g} ms" if gv2 is not None else ""))]


# Exact keys that a real server decides, not the client: greedy texts depend on which
# requests the server batched together.
SERVER_DEPENDENT = ["generated_texts"]


def verdict(paths, exact_only):
    """Exit 1 when a case has a key that differs without a stated cause; with exact_only, only
    the exact keys the client decides (counts, token totals, per-request lengths, the request
    set and send order) gate, and timing differences and texts are printed but pass (a smoke
    run on a shared machine)."""
    bad = []
    for p in paths:
        r = json.load(open(p))
        bad += [f"{r['title']}: {row['key']}" for row in r["rows"] if row["verdict"] == "DIFFER"
                and (not exact_only or (row.get("kind") == "exact" and row["key"] not in SERVER_DEPENDENT))]
    if bad:
        print("parity: FAIL, differences without a stated cause:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    print(f"parity: PASS, {len(paths)} cases", file=sys.stderr)
    return 0


def readme(args):
    """Replaces the lines between `<!-- MARKER:start -->` and `<!-- MARKER:end -->` in a document
    (the guide's page that holds them) with what one or more runs measured (vs-vllm.sh's PARITY_OUT directories): each run's
    header (versions, commit, date, machine: the first paragraph of its parity.md), its
    command (command.txt) and notes (notes.txt: cases with no comparison, and why), then the
    verdict and the matrix over every case (cases.txt and the summaries; a case that several
    runs made is taken from the last of them). The table is never edited by hand."""
    summaries, heads = {}, []
    for run_dir in args.runs:
        header = open(os.path.join(run_dir, "parity.md")).read().split("\n\n")[0].strip()
        read = lambda name: (open(os.path.join(run_dir, name)).read().strip()
                             if os.path.exists(os.path.join(run_dir, name)) else "")
        head = f"{header}\nCommand: `{read('command.txt') or '(not recorded)'}`."
        if read("notes.txt"):
            head += "\n" + read("notes.txt")
        heads.append(head)
        for case, _ in run_cases(run_dir):
            summaries.pop(case, None)
            summaries[case] = os.path.join(run_dir, f"{case}.summary.json")
    paths = list(summaries.values())
    failed = verdict(paths, exact_only=False) != 0 or args.verdict not in (None, "0")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        matrix(paths)
    command = args.command or "python3 scripts/parity.py " + " ".join(sys.argv[1:])
    body = (f"<!-- {args.marker}:start -->\n<!-- written by `{command}`; do not edit -->\n\n"
            + "\n\n".join(heads)
            + f"\n\nVerdict: {'FAIL' if failed else 'PASS'} ({len(paths)} cases). {figures(paths)}"
            + f"\n\n{out.getvalue().strip()}\n\n<!-- {args.marker}:end -->")
    start, end = f"<!-- {args.marker}:start -->", f"<!-- {args.marker}:end -->"
    if args.readme is None:
        # The one document of README.md and docs/*.md that holds the block.
        docs = ["README.md"] + sorted(os.path.join("docs", n) for n in os.listdir("docs") if n.endswith(".md"))
        found = [d for d in docs if start in open(d).read()]
        if len(found) != 1:
            sys.exit(f"parity.py: {len(found)} of README.md and docs/*.md hold a {start} block; "
                     "exactly one must (or pass --readme)")
        args.readme = found[0]
    text = open(args.readme).read()
    if start not in text or end not in text:
        sys.exit(f"parity.py: {args.readme} has no {start} ... {end} block to write into")
    text = text[:text.index(start)] + body + text[text.index(end) + len(end):]
    open(args.readme, "w").write(text)
    print(f"parity.py: wrote {args.marker} into {args.readme}", file=sys.stderr)


def figures(paths):
    """The block's summary figures, from the summaries themselves: rows by verdict, each
    client's TTFT overhead over the cases that have it, the median gap between the clients'
    offsets from the server's own statistics, and the largest move of the server's own."""
    rows = [row for p in paths for row in json.load(open(p))["rows"]]
    counts = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    out = "Rows: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1])) + "."
    ttft = [(float(r["vllm"]), float(r["bench"])) for r in rows
            if r["key"] == "(client overhead, ttft ms)" and r["verdict"] != "n/a"]
    if ttft:
        out += (f" TTFT client overhead in {len(ttft)} cases: bench {min(b for _, b in ttft):.3g} to "
                f"{max(b for _, b in ttft):.3g} ms, vLLM's client {min(v for v, _ in ttft):.3g} to "
                f"{max(v for v, _ in ttft):.3g} ms; bench lower in {sum(b < v for v, b in ttft)}.")
    offset = re.compile(r"each client minus the server's own value agree: vLLM ([+-][0-9.e+-]+) ms, "
                        r"bench ([+-][0-9.e+-]+) ms")
    gaps = [abs(float(m.group(2)) - float(m.group(1))) for r in rows if (m := offset.search(r["note"]))]
    moves = [float(m.group(1)) for r in rows if "the server's own" in r["note"]
             and (m := re.search(r"([0-9.]+)% apart", r["note"]))]
    if gaps:
        out += (f" Latency statistics excused by the server: {len(gaps)}, the clients' offsets from the "
                f"server's own value {pct(gaps, 0.5):.3g} ms apart at the median, {max(gaps):.3g} ms at most;"
                f" the server's own statistics moved by up to {max(moves):.3g}% between runs.")
    return out


def show(v):
    return short_list(v) if isinstance(v, list) else fmt(v)



def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--vllm", required=True)
    c.add_argument("--bench", required=True)
    c.add_argument("--vllm-again")
    c.add_argument("--server-timing", help="the mock server's GET /mock/timing after the bench run")
    c.add_argument("--server-timing-vllm", help="the same after the vLLM run")
    c.add_argument("--prom-vllm", help="deltas of vLLM's /metrics over the vLLM run (vs-vllm.sh prom_delta)")
    c.add_argument("--prom-bench", help="the same over the bench run")
    c.add_argument("--prom-vllm-again", help="the same over the second vLLM run")
    c.add_argument("--title", default="")
    c.add_argument("--dataset", help="the workload's dataset (NUMPY_GLOBAL_DATASETS)")
    c.add_argument("--summary", help="write the verdicts as JSON here (for `matrix`)")
    m = sub.add_parser("matrix")
    m.add_argument("summaries", nargs="+")
    vd = sub.add_parser("verdict", help="exit 1 when any case has a key that differs without a stated cause")
    vd.add_argument("--exact-only", action="store_true")
    vd.add_argument("summaries", nargs="*")
    rd = sub.add_parser("readme", help="write the matrix of one or more runs into a document between markers")
    rd.add_argument("--readme", help="the document (default: the one of README.md and docs/*.md that holds the block)")
    rd.add_argument("--marker", required=True)
    rd.add_argument("--command", help="what made the runs, for the block's comment (default: this command)")
    rd.add_argument("--verdict", help="the run's own verdict (vs-vllm.sh's: a case with no comparison fails it)")
    rd.add_argument("runs", nargs="+", help="run directories (PARITY_OUT)")
    cs = sub.add_parser("case", help="compare one case of a run directory from its files")
    cs.add_argument("--dir", required=True)
    cs.add_argument("--case", required=True)
    cs.add_argument("--title", required=True)
    rc = sub.add_parser("recompare", help="compare every case of stored runs again with these rules")
    rc.add_argument("dirs", nargs="+")
    args = ap.parse_args()

    if args.cmd == "matrix":
        return matrix(args.summaries)
    if args.cmd == "verdict":
        return verdict(args.summaries, args.exact_only)
    if args.cmd == "readme":
        return readme(args)
    if args.cmd == "case":
        return case_cmd(args)
    if args.cmd == "recompare":
        return recompare(args)

    prom = [args.prom_vllm, args.prom_bench, args.prom_vllm_again]
    server = (args.server_timing_vllm, args.server_timing) if args.server_timing else None
    compare_files(args.vllm, args.bench, args.vllm_again, server, prom, args.title, args.summary, args.dataset)


def case_files(run_dir, case):
    """The files vs-vllm.sh leaves for one case (CASE.vllm.json, CASE.bench.json,
    CASE.vllm-again.json, CASE.{vllm,bench,vllm-again}.prom.json, CASE.{bench,vllm}.server.json),
    as compare_files' arguments; None when a client wrote no result."""
    f = lambda suffix: (lambda p: p if os.path.exists(p) else None)(os.path.join(run_dir, f"{case}.{suffix}"))
    if not f("vllm.json") or not f("bench.json"):
        return None
    server = (f("vllm.server.json"), f("bench.server.json")) if f("bench.server.json") else None
    # vs-vllm.sh names a case SERVER.DATASET.BACKEND.MODE.
    parts = case.split(".")
    return dict(vllm=f("vllm.json"), bench=f("bench.json"), vllm_again=f("vllm-again.json"), server=server,
                prom=[f("vllm.prom.json"), f("bench.prom.json"), f("vllm-again.prom.json")],
                dataset=parts[1] if len(parts) == 4 else None)


def compare_files(vllm, bench, vllm_again, server, prom, title, summary, dataset=None):
    """Prints the comparison of one case and writes its summary (for `matrix`, `verdict` and
    `readme`). server: (mock timing after vLLM's run or None, after bench's run) or None;
    prom: deltas of vLLM's /metrics over vLLM's run, bench's and vLLM's second (each or None)."""
    v = json.load(open(vllm))
    b = json.load(open(bench))
    v2 = json.load(open(vllm_again)) if vllm_again else None
    if server:
        server = (json.load(open(server[0])) if server[0] else None, json.load(open(server[1])))
    prom = [json.load(open(p)) if p else None for p in prom]
    shifts = server_shifts(*prom) if prom[0] and prom[1] else None
    rows = compare(v, b, v2, server, shifts, dataset)
    if prom[0] and prom[1]:
        rows.extend(overhead_rows(v, b, v2, *prom))
    if title:
        print(f"### {title}\n")
    if v2 is None:
        print("Tolerance: latency statistics max(2 ms, 5%), per-request times max(2 ms, 5%) each, "
              "rates and durations 5%.\n")
    else:
        print("Tolerance: as on the mock (latency max(2 ms, 5%), rates 5%), widened per key to twice "
              "the difference between two vLLM runs on fresh servers (the server's run-to-run "
              "variation) where that is larger.\n")
    print("| key | check | vLLM | bench | verdict | note |")
    print("|-----|-------|------|-------|---------|------|")
    for r in rows:
        print(f"| {r.key} | {r.kind} | {show(r.v)} | {show(r.b)} | {r.verdict} | {r.note} |".replace("\n", " "))
    only_v = [k for k in v if k not in b]
    only_b = [k for k in b if k not in v]
    agree = sum(1 for r in rows if r.verdict == "agree")
    differ = [r.key for r in rows if r.verdict == "DIFFER"]
    explained = [f"{r.key}: {r.verdict}" for r in rows if r.verdict in EXPLAINED]
    nc = sum(1 for r in rows if r.verdict == "n/a")
    print(f"\nShared keys: {len(rows)}; agree {agree}, differ {len(differ)}"
          + (f" ({', '.join(differ)})" if differ else "")
          + (f", differ for a stated cause {len(explained)} ({', '.join(explained)})" if explained else "")
          + f", not compared {nc}.")
    print(f"Only in vLLM's result: {', '.join(only_v) or 'none'}")
    print("Only in bench's result: " + (", ".join(f"{k}={show(b[k])}" for k in only_b) or "none"))
    print()
    if summary:
        json.dump({"title": title, "rows": [
            {"key": r.key, "kind": r.kind, "verdict": r.verdict, "vllm": show(r.v), "bench": show(r.b), "note": r.note}
            for r in rows], "only_vllm": only_v, "only_bench": only_b}, open(summary, "w"))


def case_cmd(args):
    """One case of a vs-vllm.sh run directory, from its files; the case is added to the
    directory's cases.txt (the order of its report)."""
    files = case_files(args.dir, args.case)
    if files is None:
        sys.exit(f"parity.py: {args.dir} has no result of both clients for {args.case}")
    compare_files(**files, title=args.title, summary=os.path.join(args.dir, f"{args.case}.summary.json"))
    with open(os.path.join(args.dir, "cases.txt"), "a") as out:
        out.write(f"{args.case}\t{args.title}\n")


def run_cases(run_dir):
    """[(case, title)] of a run directory, in the order they ran."""
    path = os.path.join(run_dir, "cases.txt")
    if not os.path.exists(path):
        return []
    return [tuple(line.rstrip("\n").split("\t", 1)) for line in open(path) if line.strip()]


def recompare(args):
    """Compares every case of stored runs again with this script's rules (the results are
    kept; only the verdicts change), into each DIR/parity-recompared.md and its summaries."""
    for run_dir in args.dirs:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for case, title in run_cases(run_dir):
                files = case_files(run_dir, case)
                if files is None:
                    sys.exit(f"parity.py: {run_dir}/cases.txt lists {case}, but a client's result is missing")
                compare_files(**files, title=title, summary=os.path.join(run_dir, f"{case}.summary.json"))
        open(os.path.join(run_dir, "parity-recompared.md"), "w").write(out.getvalue())
        print(f"parity.py: {len(run_cases(run_dir))} cases of {run_dir} compared again", file=sys.stderr)


def matrix(paths):
    runs = [json.load(open(p)) for p in paths]
    keys = []
    for r in runs:
        for row in r["rows"]:
            if row["key"] not in keys:
                keys.append(row["key"])
    print("| key | " + " | ".join(r["title"] for r in runs) + " |")
    print("|-----|" + "|".join(":-:" for _ in runs) + "|")
    mark = {"agree": "=", "DIFFER": "**x**", "n/a": "-", "failures": "f", "server varies": "v",
            "dataset draws": "d"}
    for k in keys:
        cells = []
        for r in runs:
            row = next((x for x in r["rows"] if x["key"] == k), None)
            cells.append("" if row is None else mark.get(row["verdict"], row["verdict"]))
        print(f"| {k} | " + " | ".join(cells) + " |")
    print("\n`=` agree, **x** differ, `f` differs only by the requests one client failed, `v` "
          "the server itself varied (generated texts, as between vLLM's two runs; a timing, by no "
          "more than twice the server's own change between the runs), `d` vLLM's dataset drew from "
          "numpy's global generator before the arrival gaps (start_times only), `-` not compared. "
          "Differences:\n")
    for r in runs:
        for row in r["rows"]:
            if row["verdict"] in ("DIFFER",) + EXPLAINED:
                print(f"- {r['title']}: `{row['key']}` ({row['verdict']}): vLLM {row['vllm']}, bench {row['bench']}"
                      + (f"; {row['note']}" if row["note"] else ""))


if __name__ == "__main__":
    sys.exit(main())
