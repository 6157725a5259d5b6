//! The token-accounting parts of the reports: a reasoning run's time to the first content
//! token beside TTFT, reasoning tokens, ITL split by tokens and token totals that differ.

use serde_json::{Value, json};

use super::tests::run;
use super::{console, result_doc};
use crate::metrics::tests::{fixture, words};
use crate::metrics::{Metrics, MetricsConfig, PercentileMetric, calculate};
use crate::record::RequestRecord;
use crate::side_reports::SideReports;

/// The fixture with reasoning in requests 0 ("let me see", its content 0.25 s after the
/// start) and 3 ("hmm", content in its first chunk at 0.4 s); request 1's content came at
/// its TTFT.
fn reasoning_run() -> Vec<RequestRecord> {
    let mut records = fixture();
    records[0].reasoning_text = "let me see".into();
    records[0].ttfc = Some(0.25);
    records[1].ttfc = Some(0.2);
    records[3].reasoning_text = "hmm".into();
    records[3].ttfc = Some(0.4);
    records
}

fn metrics(records: Vec<RequestRecord>, config: &MetricsConfig) -> Metrics {
    calculate(records, 10.0, Some(&words), config).unwrap()
}

fn p50_p99() -> MetricsConfig {
    MetricsConfig {
        percentiles: vec![50.0, 99.0],
        ..MetricsConfig::default()
    }
}

fn result_json(m: &Metrics, detailed: bool) -> Value {
    serde_json::to_value(result_doc(m, &SideReports::default(), &run(), detailed)).unwrap()
}

#[test]
fn a_reasoning_run_shows_the_first_content_token_next_to_ttft() {
    let m = metrics(reasoning_run(), &p50_p99());
    let text = console(&m, &SideReports::default(), &run());
    // Right after vLLM's TTFT section, in its layout: TTFCs 250, 200, 400 ms.
    let ttft_then_ttfc = "---------------Time to First Token----------------\n\
                          Mean TTFT (ms):                          233.33    \n\
                          Median TTFT (ms):                        200.00    \n\
                          P50 TTFT (ms):                           200.00    \n\
                          P99 TTFT (ms):                           396.00    \n\
                          -----------Time to First Content Token------------\n\
                          Mean TTFC (ms):                          283.33    \n\
                          Median TTFC (ms):                        250.00    \n\
                          P50 TTFC (ms):                           250.00    \n\
                          P99 TTFC (ms):                           397.00    \n\
                          -----Time per Output Token";
    assert!(text.contains(ttft_then_ttfc), "{text}");
    let line = |label: &str, value: &str| format!("{label:<40} {value:<10}\n");
    assert!(
        text.contains(&line("Requests with reasoning:", "2")),
        "{text}"
    );
    assert!(
        text.contains(&line("Reasoning tokens (tokenizer count):", "4")),
        "{text}"
    );
    assert!(!text.contains("Requests without content:"), "{text}");

    let v = result_json(&m, true);
    assert_eq!(
        v["mean_ttfc_ms"],
        json!(m.reasoning.as_ref().unwrap().ttfc.mean)
    );
    assert_eq!(v["median_ttfc_ms"], json!(250.0));
    assert_eq!(v["p99_ttfc_ms"], json!(397.0));
    assert!(v["std_ttfc_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["requests_with_reasoning"], json!(2));
    assert_eq!(v["requests_without_content"], json!(0));
    assert_eq!(v["total_reasoning_tokens"], json!(4));
    // Per request with --save-detailed: null where no content arrived (the failed one).
    assert_eq!(v["ttfcs"], json!([0.25, 0.2, null, 0.4]));
    // TTFC's keys follow TTFT's.
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let at = |key: &str| keys.iter().position(|k| *k == key).unwrap();
    assert_eq!(at("mean_ttfc_ms"), at("p99_ttft_ms") + 1);
    assert!(result_json(&m, false).get("ttfcs").is_none());
    // Without TTFT among --percentile-metrics, no TTFC either.
    let no_ttft = MetricsConfig {
        percentile_metrics: vec![PercentileMetric::Itl],
        ..p50_p99()
    };
    let m = metrics(reasoning_run(), &no_ttft);
    assert!(!console(&m, &SideReports::default(), &run()).contains("TTFC"));
    assert!(result_json(&m, true).get("mean_ttfc_ms").is_none());
}

#[test]
fn a_run_without_reasoning_reports_no_ttfc() {
    let mut records = fixture();
    for r in &mut records {
        r.ttfc = Some(r.ttft);
    }
    let m = metrics(records, &p50_p99());
    assert!(!console(&m, &SideReports::default(), &run()).contains("TTFC"));
    let v = result_json(&m, true);
    for key in [
        "mean_ttfc_ms",
        "ttfcs",
        "requests_with_reasoning",
        "total_reasoning_tokens",
        "itl_split_by_tokens_requests",
    ] {
        assert!(v.get(key).is_none(), "{key}");
    }
}

#[test]
fn split_itl_and_differing_totals_are_in_the_result() {
    let mut records = fixture();
    records[0].chunk_tokens = vec![1, 2, 1, 1, 1];
    let split = MetricsConfig {
        split_itl_by_tokens: true,
        ..p50_p99()
    };
    let m = metrics(records, &split);
    let v = result_json(&m, true);
    assert_eq!(v["itl_split_by_tokens_requests"], json!(1));
    assert_eq!(v["itls"][0], json!([0.01, 0.01, 0.03, 0.05, 0.1]));
    let text = console(&m, &SideReports::default(), &run());
    let line = format!("{:<40} {:<10}\n", "Requests with ITL split by tokens:", 1);
    assert!(text.contains(&line), "{text}");
    // The fixture's server says 6 output tokens, the tokenizer 7.
    assert_eq!(
        v["output_token_count_mismatch"],
        json!({"server_usage": 6, "tokenizer_count": 7, "difference_pct": 100.0 / 6.0})
    );
    assert!(v.get("input_token_count_mismatch").is_none());
    let mut records = fixture();
    records[0].server_prompt_tokens = Some(110);
    let v = result_json(&metrics(records, &p50_p99()), false);
    assert_eq!(
        v["input_token_count_mismatch"],
        json!({"server_usage": 110, "dataset_count": 100, "difference_pct": 100.0 / 11.0})
    );
}
