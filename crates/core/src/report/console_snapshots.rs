//! Snapshots (`insta`, in `snapshots/`) of the console report for the hand-made run of
//! `metrics::tests`: every line, label, column and trailing space of the block vLLM's users
//! read, in each shape the run's options give it. `tests.rs` checks the vLLM part against
//! vLLM's own text; these pin the whole output, so any change to it shows up as a diff to
//! review (`INSTA_UPDATE=always cargo test -p bench --lib console_snapshots` accepts it).

use super::{RunInfo, console};
use crate::metrics::tests::{fixture, words};
use crate::metrics::{
    ClientCpu, Goodput, Metrics, MetricsConfig, PercentileMetric, PromptTokenCheck, TokenCounter,
    calculate,
};
use crate::record::ServerTiming;
use crate::server_metrics::{ServerCache, ServerReport};
use crate::side_reports::SideReports;

/// The report tests' run, through the chat backend, without extra keys.
fn run() -> RunInfo {
    RunInfo {
        backend: "openai-chat".into(),
        metadata: vec![],
        args: serde_json::Map::new(),
        cancellation: None,
        ..super::tests::run()
    }
}

/// Every optional line: p50 and p99 of every metric, a goodput SLO, the queue sections
/// (a concurrency cap and a finite rate), the failures, and every client and server
/// figure bench can report.
#[test]
fn every_section() {
    // The server's own timing on the successful requests (vLLM's per-request metrics).
    let records = fixture()
        .into_iter()
        .map(|mut r| {
            if r.succeeded() {
                r.server_timing = Some(ServerTiming {
                    queue: Some(r.ttft / 4.0),
                    ttft: Some(r.ttft / 2.0),
                    generation: Some(r.latency - r.ttft),
                    mean_itl: None,
                });
            }
            r
        })
        .collect();
    let mut m = calculate(
        records,
        10.0,
        Some(&words),
        &MetricsConfig {
            percentiles: vec![50.0, 99.0],
            percentile_metrics: PercentileMetric::ALL.to_vec(),
            goodput: Goodput {
                ttft_ms: Some(250.0),
                ..Goodput::default()
            },
            ..MetricsConfig::default()
        },
    )
    .unwrap();
    m.client.connection_retries = 2;
    m.client.prompt_tokens = Some(PromptTokenCheck {
        requests_with_usage: 3,
        server_tokens: 190,
        dataset_tokens: 180,
        mismatched_requests: 1,
        constant_offset: None,
    });
    let side = SideReports {
        http_client: Some("h1"),
        client_cpu: Some(ClientCpu {
            total_s: 4.0,
            decode_s: 1.0,
        }),
        server_metrics: Some(ServerReport {
            server: "vllm",
            cache: Some(ServerCache {
                server: "vllm",
                cached_prompt_tokens: 90,
                queried_prompt_tokens: 180,
            }),
            ..ServerReport::default()
        }),
        ..SideReports::default()
    };
    insta::assert_snapshot!(console(&m, &side, &run()));
}

/// vLLM's defaults (p99 of TTFT, TPOT and ITL, no goodput), all requests at once with
/// no cap, nothing measured beyond the requests themselves: the block as a plain `vllm bench serve` prints it.
#[test]
fn defaults_at_an_infinite_rate() {
    let m = metrics(MetricsConfig::default(), true);
    let run = RunInfo {
        request_rate: f64::INFINITY,
        max_concurrency: None,
        ..run()
    };
    insta::assert_snapshot!(console(&m, &SideReports::default(), &run));
}

/// Without a tokenizer vLLM drops the token counts, the token throughputs and the
/// token-based sections; with a cap but no finite rate, client queueing is reported but
/// not the queue-inclusive latency.
#[test]
fn without_a_tokenizer_capped_at_an_infinite_rate() {
    let m = metrics(
        MetricsConfig {
            percentile_metrics: PercentileMetric::ALL.to_vec(),
            ..MetricsConfig::default()
        },
        false,
    );
    let run = RunInfo {
        tokenizer_id: None,
        request_rate: f64::INFINITY,
        ..run()
    };
    insta::assert_snapshot!(console(&m, &SideReports::default(), &run));
}

/// `--cost-per-hour`: the "Cost" block after the throughputs, at vLLM's defaults
/// otherwise.
#[test]
fn cost_block_with_a_price() {
    let m = metrics(
        MetricsConfig {
            cost_per_hour_usd: Some(3.5),
            ..MetricsConfig::default()
        },
        true,
    );
    insta::assert_snapshot!(console(&m, &SideReports::default(), &run()));
}

/// The fixture's metrics, its tokens counted by words or not at all.
fn metrics(config: MetricsConfig, tokenizer: bool) -> Metrics {
    let count: Option<TokenCounter> = if tokenizer { Some(&words) } else { None };
    calculate(fixture(), 10.0, count, &config).unwrap()
}
