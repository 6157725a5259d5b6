//! `bench selfcheck`: how far can this client machine be trusted? It starts the built-in
//! mock server with known delays on loopback, drives it with the real `bench serve` (a
//! child process, so the server's work is not counted against the client) at increasing
//! concurrency, and prints the client's ceiling and its timing error at each level, so a
//! user knows at what load the client starts to distort what it measures.
//!
//! The error is measured against what the server actually did (the mock records when each
//! chunk left), not against its configured delays.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::mock::{MockConfig, spawn};

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

    /// Mean TTFT/ITL error (ms) above which a level counts as distorted.
    #[arg(long, default_value_t = 1.0)]
    tolerance_ms: f64,

    /// Tokenizer for the random prompts (default: GPT-2, built in).
    #[arg(long)]
    tokenizer: Option<String>,
}

/// What one level measured.
struct Level {
    concurrency: usize,
    requests: u64,
    request_rate: f64,
    output_rate: f64,
    ttft_ms: f64,
    itl_ms: f64,
    server_ttft_ms: f64,
    server_itl_ms: f64,
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
        "(server in this process, client = `bench serve` in a child process; error = client mean - server's recorded mean)\n"
    );
    let ceiling = measure(&rt, &work, &tokenizer, 64, args.ceiling_requests, 0, 0, 128)?;
    println!(
        "Ceiling (zero-delay server, 128-token streams, concurrency 64): {:.0} req/s, {:.0} output tok/s\n",
        ceiling.request_rate, ceiling.output_rate
    );
    println!(
        "Timing (server TTFT {} ms, ITL {} ms, {}-token streams):",
        args.ttft_ms, args.itl_ms, args.output_len
    );
    println!(
        "{:>11} {:>9} {:>10} {:>13} {:>12} {:>10} {:>12}  verdict",
        "concurrency",
        "requests",
        "req/s",
        "output tok/s",
        "TTFT err ms",
        "ITL err ms",
        "server TTFT"
    );
    let mut first_distorted = None;
    for &level in &args.levels {
        let n = args.requests.unwrap_or((level * 4).max(200));
        let l = measure(
            &rt,
            &work,
            &tokenizer,
            level,
            n,
            args.ttft_ms,
            args.itl_ms,
            args.output_len,
        )?;
        let (ttft_err, itl_err) = (l.ttft_ms - l.server_ttft_ms, l.itl_ms - l.server_itl_ms);
        let ok = ttft_err.abs() <= args.tolerance_ms && itl_err.abs() <= args.tolerance_ms;
        if !ok && first_distorted.is_none() {
            first_distorted = Some(level);
        }
        println!(
            "{:>11} {:>9} {:>10.0} {:>13.0} {:>+12.2} {:>+10.2} {:>12.2}  {}",
            l.concurrency,
            l.requests,
            l.request_rate,
            l.output_rate,
            ttft_err,
            itl_err,
            l.server_ttft_ms,
            if ok { "ok" } else { "distorted" }
        );
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
#[allow(clippy::too_many_arguments)]
fn measure(
    rt: &tokio::runtime::Runtime,
    work: &Path,
    tokenizer: &str,
    concurrency: usize,
    requests: usize,
    ttft_ms: u64,
    itl_ms: u64,
    output_len: u32,
) -> Result<Level> {
    let server = rt.block_on(spawn(MockConfig {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        ..Default::default()
    }))?;
    let name = format!("level-{concurrency}-{ttft_ms}.json");
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
        .arg("--result-dir")
        .arg(work)
        .output()
        .context("running bench serve")?;
    let truth = server.timing();
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
    Ok(Level {
        concurrency,
        requests: r["completed"].as_u64().unwrap_or(0),
        request_rate: f("request_throughput"),
        output_rate: f("output_throughput"),
        ttft_ms: f("mean_ttft_ms"),
        itl_ms: f("mean_itl_ms"),
        server_ttft_ms: truth.mean_ttft_ms,
        server_itl_ms: truth.mean_itl_ms,
    })
}

/// A private scratch directory for the tokenizer and result files.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("bench-selfcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
