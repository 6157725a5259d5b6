//! What a run's metrics are asked for: which statistics and percentiles the reports show
//! (`--percentile-metrics`, `--metric-percentiles`), which prompt length counts, and the
//! token counter. Plain settings, below everything that computes.

use crate::pyjson::float_repr;
use anyhow::{Context, Result, bail, ensure};

use super::goodput::Goodput;

use crate::record::RequestRecord;

/// Counts the tokens of a generated text (vLLM:
/// `len(tokenizer(text, add_special_tokens=False).input_ids)`).
pub type TokenCounter<'a> = &'a dyn Fn(&str) -> Result<usize>;

/// A metric whose mean, median, std and percentiles can be reported
/// (`--percentile-metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PercentileMetric {
    Ttft,
    Tpot,
    Itl,
    E2el,
    /// Time spent waiting for a concurrency slot (reported only with `--max-concurrency`).
    ClientQueueTime,
    /// E2EL plus client queue time (only with `--max-concurrency` and a finite rate).
    E2elIncludingClientQueue,
}

impl PercentileMetric {
    /// Every metric, in the order vLLM prints them.
    pub const ALL: [PercentileMetric; 6] = [
        PercentileMetric::Ttft,
        PercentileMetric::Tpot,
        PercentileMetric::Itl,
        PercentileMetric::E2el,
        PercentileMetric::ClientQueueTime,
        PercentileMetric::E2elIncludingClientQueue,
    ];

    /// The name used on the command line and in result keys (`mean_{name}_ms`).
    pub fn name(self) -> &'static str {
        match self {
            PercentileMetric::Ttft => "ttft",
            PercentileMetric::Tpot => "tpot",
            PercentileMetric::Itl => "itl",
            PercentileMetric::E2el => "e2el",
            PercentileMetric::ClientQueueTime => "client_queue_time",
            PercentileMetric::E2elIncludingClientQueue => "e2el_including_client_queue",
        }
    }
}

/// vLLM's default `--percentile-metrics` for generation backends.
pub const DEFAULT_PERCENTILE_METRICS: &str = "ttft,tpot,itl";
/// vLLM's default `--metric-percentiles`.
pub const DEFAULT_METRIC_PERCENTILES: &str = "99";

/// Parses `--percentile-metrics` (comma-separated; vLLM's default for generation is
/// [`DEFAULT_PERCENTILE_METRICS`]). Unlike vLLM, which silently ignores unknown names, an
/// unknown name is an error so a typo cannot drop a metric from the report.
pub fn parse_percentile_metrics(arg: &str) -> Result<Vec<PercentileMetric>> {
    let mut selected = Vec::new();
    for name in arg.split(',').map(str::trim) {
        let Some(metric) = PercentileMetric::ALL.into_iter().find(|m| m.name() == name) else {
            let allowed: Vec<&str> = PercentileMetric::ALL.iter().map(|m| m.name()).collect();
            bail!(
                "--percentile-metrics: unknown metric {name:?}; allowed: {}",
                allowed.join(", ")
            );
        };
        if !selected.contains(&metric) {
            selected.push(metric);
        }
    }
    Ok(selected)
}

/// Parses `--metric-percentiles` (comma-separated numbers in [0, 100], e.g. `25,50,99.9`).
pub fn parse_percentiles(arg: &str) -> Result<Vec<f64>> {
    arg.split(',')
        .map(|item| {
            let p: f64 = item
                .trim()
                .parse()
                .with_context(|| format!("--metric-percentiles: {item:?} is not a number"))?;
            ensure!(
                (0.0..=100.0).contains(&p),
                "--metric-percentiles: Percentiles must be in the range [0, 100] (got {item:?})"
            );
            Ok(p)
        })
        .collect()
}

/// Which prompt length of a request `total_input_tokens`, `total_token_throughput` and
/// `input_lens` count (`--input-tokens`).
// A command line can take it as a flag's value (feature `clap`, which the CLI turns on).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputTokenSource {
    /// vLLM's rule (0.32, `endpoint_request_func.py`): the server's `usage.prompt_tokens`
    /// when the response carried one, else the dataset's `prompt_len`; `calculate_metrics`
    /// then sums `outputs[i].prompt_len` over successful requests.
    #[default]
    Usage,
    /// The dataset's `prompt_len` always, as counted with the run's tokenizer (the same
    /// figure for every server, whatever its tokenizer or chat template).
    Dataset,
}

impl InputTokenSource {
    /// The prompt length of `record` under this rule.
    pub fn prompt_len(self, record: &RequestRecord) -> u32 {
        match self {
            InputTokenSource::Usage => record.usage_prompt_len.unwrap_or(record.prompt_len),
            InputTokenSource::Dataset => record.prompt_len,
        }
    }
}

/// What `calculate` needs besides the records. Serialised so that the shards of a run
/// carry it to `bench merge` ([`crate::shard`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MetricsConfig {
    /// `--metric-percentiles`.
    pub percentiles: Vec<f64>,
    /// `--percentile-metrics`: which metric sections the reports show.
    pub percentile_metrics: Vec<PercentileMetric>,
    /// `--goodput`.
    pub goodput: Goodput,
    /// `--input-tokens`.
    pub input_tokens: InputTokenSource,
    /// `--prefix-cache-block-size`: the block size of the theoretical prefix-cache hit
    /// rate ([`crate::prefix_reuse`]); 0 leaves it out.
    pub prefix_block_size: usize,
    /// `--split-itl-by-tokens`: where a response said how many tokens each chunk carried,
    /// ITL has one entry per token, each chunk's gap split evenly among its tokens
    /// ([`tokens::split_itl`]); off, ITL is vLLM's, one entry per chunk.
    pub split_itl_by_tokens: bool,
    /// `--cost-per-hour`: the deployment's price in US dollars per hour, turned into the
    /// run's cost ([`super::cost`]); `None` leaves cost out. Carried to `bench merge` with
    /// the rest, so that a merged run's cost is its merged duration's and totals'; a shard
    /// written before the flag existed has none.
    #[serde(default)]
    pub cost_per_hour_usd: Option<f64>,
}

impl Default for MetricsConfig {
    /// vLLM's defaults: p99 of TTFT, TPOT and ITL, no goodput.
    fn default() -> MetricsConfig {
        MetricsConfig {
            percentiles: vec![99.0],
            percentile_metrics: vec![
                PercentileMetric::Ttft,
                PercentileMetric::Tpot,
                PercentileMetric::Itl,
            ],
            goodput: Goodput::default(),
            input_tokens: InputTokenSource::default(),
            prefix_block_size: crate::prefix_reuse::DEFAULT_BLOCK_SIZE,
            split_itl_by_tokens: false,
            cost_per_hour_usd: None,
        }
    }
}

/// vLLM's label for a percentile: `P99`, `P99.9` (`str(int(p))` when integral).
pub fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        float_repr(p)
    }
}
