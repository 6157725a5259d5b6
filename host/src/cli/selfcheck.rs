//! `bench selfcheck`: how far can this client machine be trusted? It drives the built-in
//! mock server at increasing concurrency (the measurement is `bench_study::selfcheck`'s)
//! and prints the client's ceiling and its timing error at each level, so a user knows at
//! what load the client starts to distort what it measures.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use bench_study::selfcheck::{Load, Setup, measure};
use clap::Args;

use crate::tokenizer::hub_cache_roots_from_env;

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
    // Best effort: the server's and the client's connections are both this process's.
    let _ = crate::cli::limits::raise_open_file_limit();

    println!(
        "bench selfcheck: the client's ceiling and timing error against the built-in mock server"
    );
    println!(
        "(server and client = `bench serve`'s benchmark in this process, each on threads of its own; \
         error = client - server, request by request and gap by gap: its mean, and the p99 of its \
         absolute value)\n"
    );
    let setup = Setup {
        tokenizer,
        hub_cache: hub_cache_roots_from_env(),
        plugin_cache: crate::runtime::cache_dir_from_env(),
    };
    let ceiling = measure(
        &rt,
        &setup,
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
            &setup,
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

/// A private scratch directory for the tokenizer and result files.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("bench-selfcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
