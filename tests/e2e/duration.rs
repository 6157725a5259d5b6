//! `--duration SECONDS`: runs bounded by time rather than by their number of requests, with
//! every schedule: a Poisson rate, a ramp-up, an infinite rate paced by the concurrency cap,
//! a replayed trace, and shards (`--workers`). The workload is sent again from its first
//! request when it runs out, each send under its own request id: checked against the mock's
//! own record of the requests it received.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// The request id bench gives the run's position `k` of a workload of `n` requests with
/// `--request-id-prefix prefix`.
fn id(prefix: &str, k: usize, n: usize) -> String {
    match k / n {
        0 => format!("{prefix}{}", k % n),
        round => format!("{prefix}{}-{round}", k % n),
    }
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// What every timed run's result says of itself: the limit, a count that is what was sent,
/// each send's prompt the workload's at its position mod `n`, and the ids at the server.
fn check_timed(run: &Run, m: &Mock, prefix: &str, n: usize, seconds: f64) -> usize {
    let r = run.json();
    assert_eq!(r["duration_limit_s"], seconds, "{run}");
    let sent = r["num_prompts"].as_u64().unwrap() as usize;
    assert_eq!(r["requests_sent"].as_u64().unwrap() as usize, sent, "{run}");
    assert_eq!(r["completed"].as_u64().unwrap() as usize, sent, "{run}");
    assert!(
        sent > n,
        "the workload of {n} was sent only {sent} times: {run}"
    );
    let input = numbers(&r["input_lens"]);
    assert_eq!(input.len(), sent);
    for (k, len) in input.iter().enumerate() {
        assert_eq!(
            *len,
            input[k % n],
            "request {k}'s prompt is request {}'s",
            k % n
        );
    }
    // Nothing was sent at or after the limit: the start times are on the monotonic clock,
    // and the first came no earlier than the run's start.
    let starts = numbers(&r["start_times"]);
    let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(
        starts.iter().all(|&t| t - first < seconds),
        "a request started {seconds} s or more after the first: {starts:?}"
    );
    let want: BTreeSet<String> = (0..sent).map(|k| id(prefix, k, n)).collect();
    assert_eq!(m.received_ids(), want, "the ids the server received");
    assert!(r.get("requests_not_sent").is_none(), "{run}");
    sent
}

#[test]
fn a_poisson_run_sends_for_its_duration_and_starts_the_workload_over() {
    // 100 req/s for 1.5 s, seed 5, from a pool of 10 requests.
    let poisson = |m: &Mock| {
        Bench::against(&m.url)
            .random(16, 4)
            .prompts(10)
            .args(["--request-rate", "100", "--seed", "5", "--duration", "1.5"])
            .args(["--request-id-prefix", "d-"])
            .save_detailed()
            .run()
            .assert_success()
    };
    let m = mock(Default::default());
    let run = poisson(&m);
    assert!(
        run.stdout
            .contains("Duration: 1.5 s (the workload is sent again"),
        "{run}"
    );
    let sent = check_timed(&run, &m, "d-", 10, 1.5);
    // A Poisson process at 100/s for 1.5 s: 150 arrivals on average, 12 the standard
    // deviation (the draws are seeded: this count is the same every run).
    assert!(
        (90..=210).contains(&sent),
        "{sent} requests in 1.5 s at 100/s"
    );
    // The same seed and flags send the same requests again.
    let m2 = mock(Default::default());
    let again = poisson(&m2);
    assert_eq!(check_timed(&again, &m2, "d-", 10, 1.5), sent, "{again}");
}

#[test]
fn a_ramp_up_goes_with_the_time_passed() {
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .random(16, 2)
        .prompts(7)
        .args(["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "20"])
        .args(["--ramp-up-end-rps", "120", "--duration", "2", "--seed", "1"])
        .args(["--request-id-prefix", "r-"])
        .save_detailed()
        .run()
        .assert_success();
    let sent = check_timed(&run, &m, "r-", 7, 2.0);
    // From 20 to 120 per second over 2 s: 140 requests on average.
    assert!((90..=190).contains(&sent), "{sent} requests");
    let events = run.json()["rps_change_events"].as_array().unwrap().clone();
    let rates: Vec<u64> = events.iter().map(|e| e["rps"].as_u64().unwrap()).collect();
    // Every whole rate from the start up, once and in order, to about the end rate (the
    // last request is drawn a gap before the end).
    assert_eq!(rates, (20..20 + rates.len() as u64).collect::<Vec<_>>());
    assert!(*rates.last().unwrap() >= 100, "{rates:?}");
}

#[test]
fn an_infinite_rate_is_paced_by_the_concurrency_cap() {
    // Each request takes about 4 x 10 ms.
    let m = mock(bench::mock::MockConfig {
        itl: Duration::from_millis(10),
        ..Default::default()
    });
    let run = Bench::against(&m.url)
        .random(16, 4)
        .prompts(5)
        .args(["--max-concurrency", "3", "--duration", "1"])
        .args(["--request-id-prefix", "c-"])
        .save_detailed()
        .run()
        .assert_success();
    let sent = check_timed(&run, &m, "c-", 5, 1.0);
    let r = run.json();
    // Never more in flight than the cap, and kept at it: about 3 / 40 ms = 75 per second.
    assert_eq!(r["peak_concurrent_requests"], 3, "{run}");
    assert!(
        sent >= 30,
        "only {sent} requests in 1 s with 3 at a time: {run}"
    );
    // Each request was due when the cap had room for it, and went then: no queue in the
    // client, and a schedule lag of the dispatcher's own, far below the 0.5 s median a
    // lag counted from the run's start would have here (requests due at 0, sent over 1 s).
    let queued = numbers(&r["queue_times"]);
    assert!(queued.iter().all(|&q| q < 0.1), "{queued:?}");
    assert!(
        r["schedule_lag_ms_median"].as_f64().unwrap() < 100.0,
        "{run}"
    );
    // Without a cap, nothing would pace it.
    let out = Bench::against(&m.url)
        .random(16, 4)
        .prompts(5)
        .args(["--duration", "1"])
        .run()
        .assert_failure();
    assert!(
        out.stderr
            .contains("--duration at an infinite request rate needs --max-concurrency"),
        "{out}"
    );
}

#[test]
fn a_trace_starts_over_when_it_ends() {
    let trace = data("datasets/mooncake/trace.jsonl").display().to_string();
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .backend("openai")
        .args(["--dataset-name", "mooncake", "--dataset-path", &trace])
        .args(["--max-concurrency", "8", "--duration", "1"])
        .args(["--request-id-prefix", "t-"])
        .prompts(5)
        .save_detailed()
        .run()
        .assert_success();
    // The trace's first five times (ms), replayed again one mean gap after the last.
    let due: Vec<f64> = std::fs::read_to_string(data("datasets/mooncake/trace.jsonl"))
        .unwrap()
        .lines()
        .take(5)
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["timestamp"]
                .as_f64()
                .unwrap()
                / 1000.0
        })
        .collect();
    let period = due[4] + (due[4] - due[0]) / 4.0;
    let want = (0..)
        .map(|k| due[k % 5] + (k / 5) as f64 * period)
        .take_while(|&t| t < 1.0)
        .count();
    let sent = check_timed(&run, &m, "t-", 5, 1.0);
    assert_eq!(sent, want, "{run}");
}

#[test]
fn shards_of_a_timed_run_send_what_one_process_sends() {
    let m = mock(Default::default());
    let flags = [
        "--request-rate",
        "80",
        "--seed",
        "9",
        "--duration",
        "1",
        "--request-id-prefix",
        "w-",
    ];
    let single = Bench::against(&m.url)
        .random(16, 2)
        .prompts(6)
        .args(flags)
        .save_detailed()
        .run()
        .assert_success();
    let sent = check_timed(&single, &m, "w-", 6, 1.0);
    let m2 = mock(Default::default());
    let workers = Bench::against(&m2.url)
        .random(16, 2)
        .prompts(6)
        .args(flags)
        .args(["--workers", "2"])
        .save_detailed()
        .run()
        .assert_success();
    // The same arrivals, split between the two processes, merged into one run.
    assert_eq!(check_timed(&workers, &m2, "w-", 6, 1.0), sent);
    let shards = workers.json()["shards"].as_array().unwrap().clone();
    let per_shard: Vec<u64> = shards.iter().map(|s| s["sent"].as_u64().unwrap()).collect();
    assert_eq!(per_shard, [(sent as u64).div_ceil(2), sent as u64 / 2]);
}

#[test]
fn requests_still_running_after_the_drain_are_cancelled_not_failed() {
    // Every answer is held 3 s before its first token: nothing sent in the run's 0.5 s can
    // finish within the 0.5 s of drain after it (a run that completes some and cuts others
    // would split them by timing alone).
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_secs(3),
        ..Default::default()
    });
    let run = Bench::against(&m.url)
        .random(16, 4)
        .prompts(4)
        .args(["--request-rate", "20", "--seed", "3", "--duration", "0.5"])
        .args(["--duration-grace", "0.5", "--request-id-prefix", "g-"])
        .save_detailed()
        .run()
        .assert_failure();
    let r = run.json();
    let sent = r["num_prompts"].as_u64().unwrap() as usize;
    assert!(sent >= 2, "{run}");
    // A run that completed nothing fails, saying why: no request failed.
    assert!(
        run.stderr.contains(&format!(
            "error: no request completed: the client cancelled all {sent} of {sent}"
        )),
        "{run}"
    );
    // Cut by the client at the drain's end: counted on their own, none completed, none
    // failed, every one named.
    assert_eq!(r["cancelled"], sent, "{run}");
    assert_eq!(r["completed"], 0, "{run}");
    assert_eq!(r["failed"], 0, "{run}");
    let named: Vec<usize> = r["cancelled_requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(named, (0..sent).collect::<Vec<_>>(), "{run}");
    let note = format!(
        "--duration: {sent} requests still running 0.5 s after the time was up were cancelled"
    );
    assert!(
        run.stdout.contains(&note) || run.stderr.contains(&note),
        "{run}"
    );
    // The server saw each client go (its record of aborted requests).
    let aborted: BTreeSet<String> = m.aborted_ids(sent).into_iter().collect();
    let want: BTreeSet<String> = (0..sent).map(|k| id("g-", k, 4)).collect();
    assert_eq!(aborted, want);
    // The run ended at the drain's end, about 1 s after its start, without waiting for
    // the answers it cut (3 s after each send).
    assert!(r["duration"].as_f64().unwrap() < 2.9, "{run}");
    // The grace belongs to a run bounded by time.
    let out = Bench::against(&m.url)
        .random(16, 4)
        .prompts(4)
        .args(["--duration-grace", "5"])
        .run()
        .assert_failure();
    assert!(out.stderr.contains("--duration"), "{out}");
}
