//! `bench selfcheck`: how far can this client machine be trusted? It starts the built-in
//! mock server with known delays on loopback, drives it with the real `bench serve` (a
//! child process, so the server's work is not counted against the client) at increasing
//! concurrency, and prints the client's ceiling and its timing error at each level, so a
//! user knows at what load the client starts to distort what it measures.
//!
//! The error is measured against what the server actually did (the mock records when each
//! chunk left), not against its configured delays, and per request: every client request
//! carries the id `selfcheck-<index>`, the mock keeps what it did for each id, and each
//! client TTFT and ITL gap is paired with the server's own, so the p99 of the error is
//! exact rather than bounded.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use std::collections::HashMap;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use crate::metrics::stats::percentile;
use crate::mock::timing::RequestTiming;
use crate::mock::{MockConfig, spawn};

/// The `--request-id-prefix` of every run: client request `i` is `selfcheck-<i>` at the
/// server too.
const REQUEST_ID_PREFIX: &str = "selfcheck-";

/// GPT-2's tokenizer (modified MIT licence, see tests/data/tokenizers/gpt2), built in so
/// that the check needs no files.
const GPT2_TOKENIZER: &[u8] = include_bytes!("../../../tests/data/tokenizers/gpt2/tokenizer.json");

#[derive(Args, Debug)]
pub struct SelfcheckArgs {
    /// The mock server's time to first token for the timing levels, in ms.
    #[arg(long, default_value_t = 50)]
    ttft_ms: u64,

    /// The mock server's inter-token latency for the timing levels, in ms.
    #[arg(long, default_value_t = 10)]
    itl_ms: u64,

    /// Output tokens per request at the timing levels.
    #[arg(long, default_value_t = 64)]
    output_len: u32,

    /// Concurrency levels to drive, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024")]
    levels: Vec<usize>,

    /// Requests per level (default: 4 times the level, at least 200).
    #[arg(long)]
    requests: Option<usize>,

    /// Requests for the ceiling run (zero-delay server, 128-token streams, concurrency 64).
    #[arg(long, default_value_t = 10_000)]
    ceiling_requests: usize,

    /// TTFT/ITL error (ms) above which a level counts as distorted: the mean error or the
    /// p99 of the absolute per-request (per-gap) error.
    #[arg(long, default_value_t = 1.0)]
    tolerance_ms: f64,

    /// Tokenizer for the random prompts (default: GPT-2, built in).
    #[arg(long)]
    tokenizer: Option<String>,
}

/// One `bench serve` run: the load, and the mock server's delays.
struct Load {
    concurrency: usize,
    requests: usize,
    ttft_ms: u64,
    itl_ms: u64,
    output_len: u32,
    /// Pair each request with the server's record (a timing level, not the ceiling).
    compare: bool,
}

/// What one level measured.
struct Level {
    concurrency: usize,
    requests: u64,
    request_rate: f64,
    output_rate: f64,
    server_ttft_ms: f64,
    /// Only for a load with `compare`.
    errors: Option<TimingErrors>,
}

/// The client's timing error against the server's, request by request (client − server,
/// in ms). Means are signed; p99s are of the absolute error, so a client that is late on
/// one gap and early on the next shows on both.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimingErrors {
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
    fn within(&self, tolerance_ms: f64) -> bool {
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

/// The per-request lists of a `--save-detailed` result, in workload order (seconds).
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientTimes {
    pub ttfts: Vec<f64>,
    pub itls: Vec<Vec<f64>>,
    /// Requests that failed: their times are not measurements.
    pub failed: Vec<bool>,
}

impl ClientTimes {
    fn from_result(r: &Value) -> Result<Self> {
        let list = |key: &str| {
            r[key]
                .as_array()
                .with_context(|| format!("the result has no `{key}` list"))
        };
        let seconds = |v: &Value| {
            v.as_f64()
                .with_context(|| format!("not a number of seconds: {v}"))
        };
        let ttfts = list("ttfts")?.iter().map(seconds).collect::<Result<_>>()?;
        let itls = list("itls")?
            .iter()
            .map(|gaps| {
                gaps.as_array()
                    .with_context(|| format!("not a list of gaps: {gaps}"))?
                    .iter()
                    .map(seconds)
                    .collect()
            })
            .collect::<Result<_>>()?;
        let failed = list("errors")?
            .iter()
            .map(|e| e.as_str().is_some_and(|e| !e.is_empty()))
            .collect();
        Ok(ClientTimes {
            ttfts,
            itls,
            failed,
        })
    }
}

/// Pairs client request `i` with the server's entry for `<prefix><i>`. When an id has
/// several entries the last one wins: bench's ready check sends request 0's id before the
/// run, and its stream finishes before the run's request 0 can start.
pub(crate) fn timing_errors(
    prefix: &str,
    client: &ClientTimes,
    server: &[RequestTiming],
) -> TimingErrors {
    let truth: HashMap<&str, &RequestTiming> = server.iter().map(|r| (r.id.as_str(), r)).collect();
    let (mut ttft, mut itl) = (Vec::new(), Vec::new());
    let (mut unmatched, mut gap_mismatches) = (0, 0);
    for (i, (client_ttft, client_gaps)) in client.ttfts.iter().zip(&client.itls).enumerate() {
        if client.failed.get(i).copied().unwrap_or(false) {
            continue;
        }
        let Some(server) = truth.get(format!("{prefix}{i}").as_str()) else {
            unmatched += 1;
            continue;
        };
        ttft.push(client_ttft * 1e3 - server.ttft_ms);
        if client_gaps.len() != server.itl_ms.len() {
            gap_mismatches += 1;
            continue;
        }
        itl.extend(
            client_gaps
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

pub fn run(args: SelfcheckArgs) -> Result<()> {
    if args.levels.is_empty() || args.levels.contains(&0) {
        bail!("--levels must list concurrencies greater than 0");
    }
    if args.tolerance_ms.is_nan() || args.tolerance_ms <= 0.0 || args.output_len < 2 {
        bail!("--tolerance-ms must be positive and --output-len at least 2");
    }
    let work = tempfile_dir()?;
    let tokenizer = match &args.tokenizer {
        Some(t) => t.clone(),
        None => {
            let path = work.join("tokenizer.json");
            std::fs::write(&path, GPT2_TOKENIZER)
                .with_context(|| format!("writing {}", path.display()))?;
            path.display().to_string()
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Best effort: a failure shows up as a clear error in the child's own check.
    let _ = crate::cli::limits::raise_open_file_limit();

    println!(
        "bench selfcheck: the client's ceiling and timing error against the built-in mock server"
    );
    println!(
        "(server in this process, client = `bench serve` in a child process; error = client - server, \
         request by request and gap by gap: its mean, and the p99 of its absolute value)\n"
    );
    let ceiling = measure(
        &rt,
        &work,
        &tokenizer,
        &Load {
            concurrency: 64,
            requests: args.ceiling_requests,
            ttft_ms: 0,
            itl_ms: 0,
            output_len: 128,
            compare: false,
        },
    )?;
    println!(
        "Ceiling (zero-delay server, 128-token streams, concurrency 64): {:.0} req/s, {:.0} output tok/s\n",
        ceiling.request_rate, ceiling.output_rate
    );
    println!(
        "Timing (server TTFT {} ms, ITL {} ms, {}-token streams):",
        args.ttft_ms, args.itl_ms, args.output_len
    );
    println!(
        "{:>11} {:>9} {:>10} {:>13} {:>12} {:>10} {:>12} {:>13} {:>12}  verdict",
        "concurrency",
        "requests",
        "req/s",
        "output tok/s",
        "TTFT err ms",
        "ITL err ms",
        "server TTFT",
        "p99 TTFT err",
        "p99 ITL err"
    );
    let mut first_distorted = None;
    for &level in &args.levels {
        let n = args.requests.unwrap_or((level * 4).max(200));
        let l = measure(
            &rt,
            &work,
            &tokenizer,
            &Load {
                concurrency: level,
                requests: n,
                ttft_ms: args.ttft_ms,
                itl_ms: args.itl_ms,
                output_len: args.output_len,
                compare: true,
            },
        )?;
        let e = l
            .errors
            .as_ref()
            .context("a timing level has its per-request comparison")?;
        let ok = e.within(args.tolerance_ms);
        if !ok && first_distorted.is_none() {
            first_distorted = Some(level);
        }
        println!(
            "{:>11} {:>9} {:>10.0} {:>13.0} {:>+12.2} {:>+10.2} {:>12.2} {:>13.2} {:>12.2}  {}",
            l.concurrency,
            l.requests,
            l.request_rate,
            l.output_rate,
            e.ttft_mean_ms,
            e.itl_mean_ms,
            l.server_ttft_ms,
            e.ttft_p99_ms,
            e.itl_p99_ms,
            if ok { "ok" } else { "distorted" }
        );
        if e.unmatched > 0 || e.gap_mismatches > 0 {
            println!(
                "{:>11} {} of {} requests had no server record; {} had another number of \
                 gaps than the server sent (left out of the ITL error)",
                "",
                e.unmatched,
                e.paired + e.unmatched,
                e.gap_mismatches
            );
        }
    }
    println!();
    match first_distorted {
        None => println!(
            "Within {} ms at every level: results up to concurrency {} can be trusted on this machine.",
            args.tolerance_ms,
            args.levels.iter().max().unwrap_or(&0)
        ),
        Some(l) => println!(
            "From concurrency {l} on, the client adds more than {} ms: treat timings at that load with care.",
            args.tolerance_ms
        ),
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// One `bench serve` run against a fresh mock server with the given delays.
fn measure(
    rt: &tokio::runtime::Runtime,
    work: &Path,
    tokenizer: &str,
    load: &Load,
) -> Result<Level> {
    let &Load {
        concurrency,
        requests,
        ttft_ms,
        itl_ms,
        output_len,
        compare,
    } = load;
    let server = rt.block_on(spawn(MockConfig {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        ..Default::default()
    }))?;
    let name = format!("level-{concurrency}-{ttft_ms}.json");
    // The per-request lists, and ids the server's record can be matched with.
    let detailed: &[&str] = if compare {
        &["--save-detailed", "--request-id-prefix", REQUEST_ID_PREFIX]
    } else {
        &[]
    };
    let exe = std::env::current_exe().context("locating the bench binary")?;
    let out = Command::new(exe)
        .args([
            "serve",
            "--backend",
            "openai",
            "--model",
            "mock",
            "--tokenizer",
            tokenizer,
        ])
        .args([
            "--base-url",
            &server.base_url(),
            "--random-input-len",
            "128",
        ])
        .args(["--random-output-len", &output_len.to_string()])
        .args(["--num-prompts", &requests.to_string()])
        .args(["--max-concurrency", &concurrency.to_string()])
        .args([
            "--disable-tqdm",
            "--save-result",
            "--result-filename",
            &name,
        ])
        .args(detailed)
        .arg("--result-dir")
        .arg(work)
        .output()
        .context("running bench serve")?;
    let truth = server.timing();
    let per_request = if compare {
        server.requests()
    } else {
        Vec::new()
    };
    rt.block_on(server.shutdown())?;
    if !out.status.success() {
        bail!(
            "bench serve failed at concurrency {concurrency}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = work.join(&name);
    let r: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let errors = if compare {
        let client = ClientTimes::from_result(&r)
            .with_context(|| format!("reading the per-request times in {}", path.display()))?;
        Some(timing_errors(REQUEST_ID_PREFIX, &client, &per_request))
    } else {
        None
    };
    Ok(Level {
        concurrency,
        requests: r["completed"].as_u64().unwrap_or(0),
        request_rate: f("request_throughput"),
        output_rate: f("output_throughput"),
        server_ttft_ms: truth.mean_ttft_ms,
        errors,
    })
}

/// A private scratch directory for the tokenizer and result files.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("bench-selfcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(id: &str, ttft_ms: f64, itl_ms: &[f64]) -> RequestTiming {
        RequestTiming {
            id: id.to_owned(),
            ttft_ms,
            itl_ms: itl_ms.to_vec(),
        }
    }

    #[test]
    fn each_request_and_gap_is_paired_by_id_and_the_later_entry_wins() {
        // 100 requests, each client TTFT 0.2 ms above the server's; request 7 is 3 ms
        // late. Gaps: +0.1 ms everywhere except one gap of request 42, 2 ms late, with the
        // next gap 2 ms early (a client reading two chunks at once).
        let n = 100;
        let mut client = ClientTimes::default();
        let mut truth = vec![server("p-0", 99.0, &[1.0, 1.0, 1.0])]; // the ready check
        for i in 0..n {
            let ttft = 50.0 + i as f64 * 0.01;
            let gaps = [10.0, 10.5, 9.5];
            truth.push(server(&format!("p-{i}"), ttft, &gaps));
            let late = if i == 7 { 3.0 } else { 0.0 };
            client.ttfts.push((ttft + 0.2 + late) / 1e3);
            let mut client_gaps: Vec<f64> = gaps.iter().map(|g| g + 0.1).collect();
            if i == 42 {
                client_gaps[1] += 2.0;
                client_gaps[2] -= 2.0;
            }
            client
                .itls
                .push(client_gaps.iter().map(|g| g / 1e3).collect());
            client.failed.push(false);
        }
        // The server's list is in finishing order, not workload order.
        truth[1..].reverse();
        let e = timing_errors("p-", &client, &truth);
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
        for gaps in client.itls.iter_mut().take(25) {
            gaps[1] += 2.0 / 1e3;
            gaps[2] -= 2.0 / 1e3;
        }
        let e = timing_errors("p-", &client, &truth);
        assert!((e.itl_mean_ms - 0.1).abs() < 1e-9, "{e:?}");
        assert!(e.itl_p99_ms > 1.8, "{e:?}");
        assert!(!e.within(1.0));
    }

    #[test]
    fn missing_entries_and_gap_count_mismatches_are_counted_not_paired() {
        let client = ClientTimes {
            ttfts: vec![0.051, 0.052, 0.0, 0.053],
            itls: vec![vec![0.010, 0.010], vec![0.010], vec![], vec![0.011, 0.009]],
            failed: vec![false, false, true, false],
        };
        let truth = [
            server("q0", 50.0, &[10.0, 10.0]),
            // Three gaps at the server, one at the client: not paired.
            server("q1", 50.0, &[5.0, 5.0, 5.0]),
            // q2 failed at the client; q3 has no entry.
            server("q2", 50.0, &[10.0]),
        ];
        let e = timing_errors("q", &client, &truth);
        assert_eq!((e.paired, e.unmatched, e.gap_mismatches), (2, 1, 1));
        assert!((e.ttft_mean_ms - 1.5).abs() < 1e-9, "{e:?}");
        assert!(e.itl_mean_ms.abs() < 1e-9, "only q0's gaps: {e:?}");
        assert!(!e.within(10.0), "an unpaired request fails the level");
    }

    #[test]
    fn client_times_come_from_the_detailed_result() {
        let r = serde_json::json!({
            "ttfts": [0.05, 0.0],
            "itls": [[0.01, 0.012], []],
            "errors": ["", "http-500: Internal Server Error"],
        });
        let c = ClientTimes::from_result(&r).unwrap();
        assert_eq!(c.ttfts, [0.05, 0.0]);
        assert_eq!(c.itls, [vec![0.01, 0.012], vec![]]);
        assert_eq!(c.failed, [false, true]);
        let err = ClientTimes::from_result(&serde_json::json!({"ttfts": []})).unwrap_err();
        assert!(format!("{err:#}").contains("itls"), "{err:#}");
    }
}
