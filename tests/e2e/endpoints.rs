//! Several endpoints (`--base-url` repeated): two mocks of different speeds, each one's
//! own record of what it was sent (`/mock/requests`, its `/metrics`) the truth for its
//! share of the run's figures.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const PROMPTS: usize = 24;
const OUTPUT_LEN: usize = 6;

/// A fast and a slow mock, each with its prefix-cache counters in `/metrics`.
fn two_mocks() -> (Mock, Mock) {
    let speed = |ttft_ms, itl_ms| bench::mock::MockConfig {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        prefix_cache: true,
        ..Default::default()
    };
    (mock(speed(5, 1)), mock(speed(60, 6)))
}

fn run(fast: &Mock, slow: &Mock, strategy: &str) -> Value {
    let out = Bench::against(&fast.url)
        .random(16, OUTPUT_LEN as u32)
        .prompts(PROMPTS as u64)
        .args([
            "--base-url",
            &slow.url,
            "--url-selection-strategy",
            strategy,
        ])
        .args(["--max-concurrency", "4", "--request-id-prefix", "ep-"])
        .save_detailed()
        .run()
        .assert_success();
    assert!(out.stdout.contains(" Endpoints "), "{out}");
    out.json()
}

/// Each endpoint's share as the result states it and as its mock recorded it: the same
/// requests, its figures from its own requests only, its `/metrics` its own.
fn check_shares(r: &Value, mocks: [&Mock; 2]) -> [usize; 2] {
    let indices: Vec<u64> = r["endpoint_indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(indices.len(), PROMPTS);
    let input_lens = r["input_lens"].as_array().unwrap();
    let endpoints = r["endpoints"].as_array().unwrap();
    assert_eq!(endpoints.len(), 2);
    let mut shares = [0; 2];
    for (e, (endpoint, m)) in endpoints.iter().zip(mocks).enumerate() {
        assert_eq!(endpoint["url"], m.url.as_str());
        let sent: BTreeSet<String> = (0..PROMPTS)
            .filter(|&i| indices[i] == e as u64)
            .map(|i| format!("ep-{i}"))
            .collect();
        assert_eq!(m.received_ids(), sent, "endpoint {e}");
        shares[e] = sent.len();
        assert_eq!(endpoint["completed"], sent.len(), "{endpoint}");
        assert_eq!(endpoint["failed"], 0);
        assert_eq!(endpoint["total_output_tokens"], sent.len() * OUTPUT_LEN);
        let input: u64 = (0..PROMPTS)
            .filter(|&i| indices[i] == e as u64)
            .map(|i| input_lens[i].as_u64().unwrap())
            .sum();
        assert_eq!(endpoint["total_input_tokens"], input, "{endpoint}");
        // The mock's own count of the prompt tokens it was sent (its prefix cache's
        // queries), read from its /metrics by bench.
        assert_eq!(
            endpoint["server_metrics"]["cache"]["queried_prompt_tokens"], input,
            "{endpoint}"
        );
        // The endpoint's TTFTs are its requests' (every one at least its server's).
        let ttfts = r["ttfts"].as_array().unwrap();
        let records = m.server.as_ref().unwrap().requests();
        let mut sum = 0.0;
        for record in &records {
            let i: usize = record.id.strip_prefix("ep-").unwrap().parse().unwrap();
            let ttft_ms = ttfts[i].as_f64().unwrap() * 1e3;
            assert!(ttft_ms >= record.ttft_ms - 0.5, "{record:?}: {ttft_ms}");
            sum += ttft_ms;
        }
        let mean = endpoint["mean_ttft_ms"].as_f64().unwrap();
        assert!(
            (mean - sum / records.len() as f64).abs() < 1e-6,
            "{endpoint}"
        );
    }
    assert_eq!(shares[0] + shares[1], PROMPTS);
    assert_eq!(r["completed"], PROMPTS);
    shares
}

#[test]
fn round_robin_sends_request_i_to_url_i_mod_n_and_reports_each_endpoint() {
    let (fast, slow) = two_mocks();
    let r = run(&fast, &slow, "round-robin");
    assert_eq!(r["url_selection_strategy"], "round-robin");
    let indices: Vec<u64> = (0..PROMPTS as u64).map(|i| i % 2).collect();
    assert_eq!(r["endpoint_indices"], serde_json::json!(indices));
    assert_eq!(check_shares(&r, [&fast, &slow]), [PROMPTS / 2; 2]);
    // The slow server's figures are its own: ten times the fast one's TTFT by design.
    let (f, s) = (&r["endpoints"][0], &r["endpoints"][1]);
    assert!(
        f["mean_ttft_ms"].as_f64() < s["mean_ttft_ms"].as_f64(),
        "{f} {s}"
    );
}

/// With 4 requests in flight, the slow server holds its requests ten times longer, so
/// the fewest-outstanding choice sends it fewer; but not none: a request that starts while
/// the fast one has requests in flight and the slow one none goes to the slow one.
/// (Without the in-flight counts every request would go to the first endpoint.)
#[test]
fn least_outstanding_follows_the_endpoints_speeds() {
    let _alone = gate::exclusive();
    let (fast, slow) = two_mocks();
    let r = run(&fast, &slow, "least-outstanding");
    assert_eq!(r["url_selection_strategy"], "least-outstanding");
    let [to_fast, to_slow] = check_shares(&r, [&fast, &slow]);
    assert!(
        to_slow > 0 && to_fast > to_slow,
        "fast {to_fast}, slow {to_slow}"
    );
}

#[test]
fn one_url_twice_or_a_bad_one_is_refused_by_name() {
    let fast = mock(Default::default());
    for (extra, needle) in [
        (
            fast.url.clone(),
            format!("--base-url {:?} is given twice", fast.url),
        ),
        (
            "not a url".to_string(),
            "--base-url \"not a url\" is not a URL".to_string(),
        ),
    ] {
        let out = Bench::against(&fast.url)
            .random(16, 4)
            .prompts(2)
            .args(["--base-url", &extra])
            .run()
            .assert_failure();
        assert!(out.stderr.contains(&needle), "{needle}: {out}");
    }
    assert!(fast.received_ids().is_empty());
    // With one URL the result is as before: no endpoint keys.
    let out = Bench::against(&fast.url)
        .random(16, 4)
        .prompts(2)
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    for key in ["endpoints", "endpoint_indices", "url_selection_strategy"] {
        assert!(r.get(key).is_none(), "{key}");
    }
    assert!(!out.stdout.contains(" Endpoints "), "{out}");
}
