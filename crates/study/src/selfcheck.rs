//! `bench selfcheck`'s measurement: how far can this client machine be trusted? Each level
//! is one run of `bench serve`'s own benchmark (in this process) against a fresh built-in
//! mock server with known delays on loopback, on a runtime and threads of its own; the
//! ceiling is a run against a zero-delay server.
//!
//! The error is measured against what the server actually did (the mock records when each
//! chunk left), not against its configured delays, and per request: every client request
//! carries the id `selfcheck-<index>`, the mock keeps what it did for each id, and each
//! client TTFT and ITL gap is paired with the server's own, so the p99 of the error is
//! exact rather than bounded. The CLI (`bench selfcheck`) chooses the levels and prints.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use bench_core::benchmark::{LoadConfig, ReportConfig, ServeConfig, serve};
use bench_core::client::{HttpClientKind, Tls};
use bench_core::metrics::MetricsConfig;
use bench_core::metrics::stats::percentile;
use bench_core::observer::{Event, Observer};
use bench_core::record::RequestRecord;
use bench_core::report::SaveOptions;
use bench_core::runtime::{PluginRef, RuntimeConfig};
use bench_core::targets::http::HttpConfig;
use bench_core::workload::WorkloadConfig;
use bench_mock::timing::RequestTiming;
use bench_mock::{MockConfig, spawn};

/// The `--request-id-prefix` of every run: client request `i` is `selfcheck-<i>` at the
/// server too.
pub const REQUEST_ID_PREFIX: &str = "selfcheck-";

/// What every level's run shares: the tokenizer of the random prompts (a name or a
/// path), and the caches the caller found in the environment (the library reads none).
#[derive(Debug, Clone)]
pub struct Setup {
    pub tokenizer: String,
    /// The Hugging Face cache folders (`tokenizer::hub_cache_roots_from_env`).
    pub hub_cache: Vec<PathBuf>,
    /// The compiled-plugin cache (`runtime::cache_dir_from_env`).
    pub plugin_cache: Option<PathBuf>,
}

/// One `bench serve` run: the load, and the mock server's delays.
pub struct Load {
    pub concurrency: usize,
    pub requests: usize,
    pub ttft_ms: u64,
    pub itl_ms: u64,
    pub output_len: u32,
    /// Pair each request with the server's record (a timing level, not the ceiling).
    pub compare: bool,
}

/// What one level measured.
pub struct Level {
    pub concurrency: usize,
    pub requests: u64,
    pub request_rate: f64,
    pub output_rate: f64,
    pub server_ttft_ms: f64,
    /// Only for a load with `compare`.
    pub errors: Option<TimingErrors>,
}

/// The client's timing error against the server's, request by request (client − server,
/// in ms). Means are signed; p99s are of the absolute error, so a client that is late on
/// one gap and early on the next shows on both.
#[derive(Debug, Clone, PartialEq)]
pub struct TimingErrors {
    /// Successful client requests paired with a server entry.
    pub paired: usize,
    /// Successful client requests the server has no entry for (none expected).
    pub unmatched: usize,
    /// Paired requests with another number of gaps at the client than at the server;
    /// their gaps are left out rather than paired at random.
    pub gap_mismatches: usize,
    pub ttft_mean_ms: f64,
    pub ttft_p99_ms: f64,
    pub itl_mean_ms: f64,
    pub itl_p99_ms: f64,
}

impl TimingErrors {
    /// Whether every request was paired and each error is within `tolerance_ms`.
    pub fn within(&self, tolerance_ms: f64) -> bool {
        self.paired > 0
            && self.unmatched == 0
            && self.gap_mismatches == 0
            && [
                self.ttft_mean_ms,
                self.ttft_p99_ms,
                self.itl_mean_ms,
                self.itl_p99_ms,
            ]
            .iter()
            .all(|e| e.abs() <= tolerance_ms)
    }
}

/// Pairs the client's record of request `i` with the server's entry for `<prefix><i>`
/// (failed requests are left out: their times are not measurements). When an id has
/// several entries the last one wins: bench's ready check sends request 0's id before the
/// run, and its stream finishes before the run's request 0 can start.
pub fn timing_errors(
    prefix: &str,
    client: &[RequestRecord],
    server: &[RequestTiming],
) -> TimingErrors {
    let truth: HashMap<&str, &RequestTiming> = server.iter().map(|r| (r.id.as_str(), r)).collect();
    let (mut ttft, mut itl) = (Vec::new(), Vec::new());
    let (mut unmatched, mut gap_mismatches) = (0, 0);
    for record in client.iter().filter(|r| r.succeeded()) {
        let Some(server) = truth.get(format!("{prefix}{}", record.index).as_str()) else {
            unmatched += 1;
            continue;
        };
        ttft.push(record.ttft * 1e3 - server.ttft_ms);
        if record.itl.len() != server.itl_ms.len() {
            gap_mismatches += 1;
            continue;
        }
        itl.extend(
            record
                .itl
                .iter()
                .zip(&server.itl_ms)
                .map(|(c, s)| c * 1e3 - s),
        );
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let p99_abs = |v: &[f64]| percentile(&v.iter().map(|e| e.abs()).collect::<Vec<_>>(), 99.0);
    TimingErrors {
        paired: ttft.len(),
        unmatched,
        gap_mismatches,
        ttft_mean_ms: mean(&ttft),
        ttft_p99_ms: p99_abs(&ttft),
        itl_mean_ms: mean(&itl),
        itl_p99_ms: p99_abs(&itl),
    }
}

/// One `bench serve` run against a fresh mock server with the given delays.
pub fn measure(rt: &tokio::runtime::Runtime, setup: &Setup, load: &Load) -> Result<Level> {
    let &Load {
        concurrency,
        ttft_ms,
        itl_ms,
        compare,
        ..
    } = load;
    let server = rt.block_on(spawn(MockConfig {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        ..Default::default()
    }))?;
    let config = serve_config(setup, server.base_url(), load)?;
    let mut quiet = Quiet::default();
    let outcome = serve(&config, &mut quiet);
    let truth = server.timing();
    let per_request = if compare {
        server.requests()
    } else {
        Vec::new()
    };
    rt.block_on(server.shutdown())?;
    let failed = |why: String| {
        anyhow::anyhow!(
            "bench serve failed at concurrency {concurrency}: {why}{}",
            quiet
                .warnings
                .iter()
                .map(|w| format!("\nWARNING: {w}"))
                .collect::<String>()
        )
    };
    let outcome = outcome.map_err(|e| failed(format!("{e:#}")))?;
    if let Some(i) = &outcome.interrupted {
        return Err(failed(format!("stopped early: {}", i.reason)));
    }
    if outcome.all_failed() {
        return Err(failed(format!(
            "every request failed; first error: {}",
            outcome
                .first_failure()
                .map(ToString::to_string)
                .unwrap_or_default()
        )));
    }
    let m = &outcome.metrics;
    Ok(Level {
        concurrency,
        requests: m.completed as u64,
        request_rate: m.request_throughput,
        output_rate: m.output_throughput,
        server_ttft_ms: truth.mean_ttft_ms,
        errors: compare.then(|| timing_errors(REQUEST_ID_PREFIX, outcome.records(), &per_request)),
    })
}

/// What `bench serve --backend openai --model mock --tokenizer T --base-url URL
/// --random-input-len 128 --random-output-len L --num-prompts N --max-concurrency C
/// --request-id-prefix selfcheck- --disable-tqdm` resolves to, with no result file.
fn serve_config(setup: &Setup, base_url: String, load: &Load) -> Result<ServeConfig> {
    Ok(ServeConfig {
        model: Some("mock".to_owned()),
        served_model_name: None,
        tokenizer: Some(setup.tokenizer.clone()),
        skip_tokenizer_init: false,
        native: None,
        workload: WorkloadConfig {
            dataset: PluginRef::parse("random")?,
            dataset_path: None,
            num_prompts: u32::try_from(load.requests).context("--requests")?,
            seed: 0,
            options: vec![
                ("input-len".to_owned(), "128".to_owned()),
                ("output-len".to_owned(), load.output_len.to_string()),
            ],
            request_id_prefix: Some(REQUEST_ID_PREFIX.to_owned()),
            hub_cache: setup.hub_cache.clone(),
            chat_template_kwargs: None,
            lora: None,
            runtime: RuntimeConfig {
                cache_dir: setup.plugin_cache.clone(),
                ..RuntimeConfig::default()
            },
            progress: false,
        },
        http: HttpConfig {
            base_urls: vec![base_url],
            routing: Default::default(),
            endpoint: None,
            backend: PluginRef::parse("openai")?,
            backend_options: Vec::new(),
            ignore_eos: false,
            extra_body: None,
            headers: Vec::new(),
            api_key: None,
            request_timeout: Duration::from_secs(6 * 3600),
            http_client: HttpClientKind::Auto,
            tls: Tls::Verify,
            preconnect: load.concurrency,
            probe_request_rate: None,
            server_metrics: Default::default(),
        },
        load: LoadConfig {
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            ramp_up: None,
            max_concurrency: Some(load.concurrency),
            ready_check: None,
            warm_ups: 0,
            shutdown_grace: Duration::from_secs(5),
            self_timed: Some(false),
            time_scale: 1.0,
            profile: false,
            // The client's own ceiling: nothing beside the run.
            gpu_telemetry: false,
            cancellation: None,
            until_confident: None,
            metrics_addr: None,
            duration: None,
            duration_grace: std::time::Duration::ZERO,
        },
        metrics: MetricsConfig::default(),
        report: ReportConfig {
            label: None,
            metadata: Vec::new(),
            command_line: serde_json::Map::new(),
            save: SaveOptions::default(),
            record_file: None,
        },
        shard: None,
    })
}

/// Shows nothing of a level's run; keeps its warnings for the message when it fails.
#[derive(Default)]
struct Quiet {
    warnings: Vec<String>,
}

impl Observer for Quiet {
    fn event(&mut self, event: Event<'_>) {
        if let Event::Warning(w) = event {
            self.warnings.push(w.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::record::FailureKind;

    fn server(id: &str, ttft_ms: f64, itl_ms: &[f64]) -> RequestTiming {
        RequestTiming {
            id: id.to_owned(),
            ttft_ms,
            itl_ms: itl_ms.to_vec(),
            first_content_ms: None,
            metrics: None,
        }
    }

    /// The client's record of request `index`: TTFT and gaps in seconds.
    fn client(index: usize, ttft: f64, itl: &[f64], failed: bool) -> RequestRecord {
        RequestRecord {
            index,
            ttft,
            itl: itl.to_vec(),
            outcome: match failed {
                true => Err(FailureKind::Http(500).failure("Internal Server Error")),
                false => Ok(()),
            },
            ..RequestRecord::default()
        }
    }

    #[test]
    fn each_request_and_gap_is_paired_by_id_and_the_later_entry_wins() {
        // 100 requests, each client TTFT 0.2 ms above the server's; request 7 is 3 ms
        // late. Gaps: +0.1 ms everywhere except one gap of request 42, 2 ms late, with the
        // next gap 2 ms early (a client reading two chunks at once).
        let n = 100;
        let mut records = Vec::new();
        let mut truth = vec![server("p-0", 99.0, &[1.0, 1.0, 1.0])]; // the ready check
        for i in 0..n {
            let ttft = 50.0 + i as f64 * 0.01;
            let gaps = [10.0, 10.5, 9.5];
            truth.push(server(&format!("p-{i}"), ttft, &gaps));
            let late = if i == 7 { 3.0 } else { 0.0 };
            let mut client_gaps: Vec<f64> = gaps.iter().map(|g| g + 0.1).collect();
            if i == 42 {
                client_gaps[1] += 2.0;
                client_gaps[2] -= 2.0;
            }
            let client_gaps: Vec<f64> = client_gaps.iter().map(|g| g / 1e3).collect();
            records.push(client(i, (ttft + 0.2 + late) / 1e3, &client_gaps, false));
        }
        // The server's list is in finishing order, not workload order.
        truth[1..].reverse();
        let e = timing_errors("p-", &records, &truth);
        assert_eq!((e.paired, e.unmatched, e.gap_mismatches), (n, 0, 0));
        assert!(
            (e.ttft_mean_ms - (0.2 + 3.0 / n as f64)).abs() < 1e-9,
            "{e:?}"
        );
        // 99 errors of 0.2 and one of 3.2: numpy's p99 interpolates between them at
        // 0.01 of the way.
        assert!((e.ttft_p99_ms - (0.2 + 0.01 * 3.0)).abs() < 1e-9, "{e:?}");
        assert!((e.itl_mean_ms - 0.1).abs() < 1e-9, "{e:?}");
        // 300 gaps: 298 at 0.1, then |2.1| and |-1.9|; index 296.01 of the sorted list.
        assert!((e.itl_p99_ms - 0.1).abs() < 1e-9, "{e:?}");
        assert!(e.within(0.5));
        assert!(!e.within(0.15));

        // With 50 late gaps the tail shows in the p99 of the absolute error.
        for record in records.iter_mut().take(25) {
            record.itl[1] += 2.0 / 1e3;
            record.itl[2] -= 2.0 / 1e3;
        }
        let e = timing_errors("p-", &records, &truth);
        assert!((e.itl_mean_ms - 0.1).abs() < 1e-9, "{e:?}");
        assert!(e.itl_p99_ms > 1.8, "{e:?}");
        assert!(!e.within(1.0));
    }

    #[test]
    fn missing_entries_and_gap_count_mismatches_are_counted_not_paired() {
        let records = [
            client(0, 0.051, &[0.010, 0.010], false),
            client(1, 0.052, &[0.010], false),
            client(2, 0.0, &[], true),
            client(3, 0.053, &[0.011, 0.009], false),
        ];
        let truth = [
            server("q0", 50.0, &[10.0, 10.0]),
            // Three gaps at the server, one at the client: not paired.
            server("q1", 50.0, &[5.0, 5.0, 5.0]),
            // q2 failed at the client; q3 has no entry.
            server("q2", 50.0, &[10.0]),
        ];
        let e = timing_errors("q", &records, &truth);
        assert_eq!((e.paired, e.unmatched, e.gap_mismatches), (2, 1, 1));
        assert!((e.ttft_mean_ms - 1.5).abs() < 1e-9, "{e:?}");
        assert!(e.itl_mean_ms.abs() < 1e-9, "only q0's gaps: {e:?}");
        assert!(!e.within(10.0), "an unpaired request fails the level");
    }
}
