//! Shards of one run (`bench serve --shard I/N`, `--workers N`, a Kubernetes Indexed Job)
//! and their exact merge (`bench merge`).
//!
//! Why the shards of a run are that run: every shard samples the whole workload with the
//! same seed and builds the whole schedule, and shard `I` of `N` keeps the requests whose
//! global index `k` has `k mod N == I`, each with its global arrival offset. Nothing is
//! drawn per shard, so the union of the shards' requests and send times is the single
//! process's, whatever the arrival process (Poisson, gamma, ramp-up, a replayed trace).
//! Each shard starts its clock at a shared wall-clock time (`--start-at`), so the offsets
//! of all shards count from one instant, up to the machines' clock offsets, which each
//! shard estimates against the server's `Date` header and reports.
//!
//! A shard writes a [`ShardDoc`]: its records under their global indices, the token
//! counts of their texts, and its client diagnostics. [`merge::merge`] checks that the
//! documents are the `N` shards of one run and recomputes every metric from all the
//! records with [`crate::metrics::calculate`]: percentiles are exact, not averaged.

pub mod diagnostics;
pub mod merge;
pub mod record_file;

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail, ensure};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::clock_offset::ClockOffset;
use crate::metrics::{Metrics, MetricsConfig};
use crate::record::RequestRecord;
use crate::report::RunInfo;
use crate::report::save::Interruption;
use crate::runtime::RequestSpec;
use crate::side_reports::SideReports;

pub use diagnostics::{Shard, ShardDiagnostics};

/// The version of [`ShardDoc`]'s layout; `bench merge` reads only its own.
pub const FORMAT: u32 = 1;

/// How a shard document begins when it is printed among other output
/// (`--shard-output -`): `bench merge` finds it in any text, such as `kubectl logs`.
pub const LOG_PREFIX: &str = "bench-shard-result: ";

/// `--start-at`: when the shards start their clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// A wall-clock time shared by every shard.
    At(SystemTime),
    /// Told by the process that started this one, once this one is ready
    /// (`--workers`: see [`crate::observer::Observer::await_start`]).
    Gate,
}

impl FromStr for StartAt {
    type Err = String;

    /// RFC 3339 (`2026-11-27T17:00:00Z`), or `@` and Unix seconds (`@1764262800.5`).
    fn from_str(s: &str) -> Result<StartAt, String> {
        if s == "gate" {
            return Ok(StartAt::Gate);
        }
        parse_wall_clock(s).map(StartAt::At)
    }
}

/// A wall-clock time written as RFC 3339 or as `@` and Unix seconds.
pub fn parse_wall_clock(s: &str) -> Result<SystemTime, String> {
    if let Some(secs) = s.strip_prefix('@') {
        let secs: f64 = secs
            .parse()
            .map_err(|_| format!("{s:?}: after @ comes a number of Unix seconds"))?;
        return Duration::try_from_secs_f64(secs)
            .map(|d| UNIX_EPOCH + d)
            .map_err(|_| format!("{s:?}: Unix seconds must be >= 0"));
    }
    let t = chrono::DateTime::parse_from_rfc3339(s).map_err(|e| {
        format!("{s:?} is not a time: write RFC 3339 (2026-11-27T17:00:00Z) or @UNIX_SECONDS ({e})")
    })?;
    Ok(SystemTime::from(t))
}

/// A wall-clock time as RFC 3339 in UTC, to the microsecond.
pub fn format_wall_clock(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The instant of the monotonic clock at wall-clock time `at` (in the past or future).
pub fn instant_at(at: SystemTime) -> Instant {
    let (now, wall) = (Instant::now(), SystemTime::now());
    match at.duration_since(wall) {
        Ok(ahead) => now + ahead,
        Err(behind) => now.checked_sub(behind.duration()).unwrap_or(now),
    }
}

/// What makes a run a shard: which one, and when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardConfig {
    pub shard: Shard,
    /// `None`: when this shard is ready (its offsets still count from its own start; use
    /// it only where the shards start together anyway).
    pub start_at: Option<StartAt>,
    /// The run's whole `--max-concurrency`; the run's own ([`crate::benchmark::LoadConfig`])
    /// is this shard's part of it ([`Shard::max_concurrency`]).
    pub max_concurrency: Option<usize>,
}

/// What identifies the workload of a run: equal in every shard of one run, checked by
/// the merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadId {
    /// Requests in the whole workload.
    pub requests: usize,
    pub seed: u64,
    /// SHA-256 over every request of the whole workload in order: its id, prompt length,
    /// output length and prompt text.
    pub fingerprint: String,
}

impl WorkloadId {
    /// The identity of the whole workload `specs`, sampled with `seed`.
    pub fn of(specs: &[RequestSpec], seed: u64) -> WorkloadId {
        let mut hash = Sha256::new();
        for spec in specs {
            let id = spec.request_id.as_deref().unwrap_or("");
            hash.update((id.len() as u64).to_le_bytes());
            hash.update(id.as_bytes());
            hash.update(spec.prompt_len.to_le_bytes());
            hash.update(spec.expected_output_len.to_le_bytes());
            let prompt = format!("{:?}", spec.prompt);
            hash.update((prompt.len() as u64).to_le_bytes());
            hash.update(prompt.as_bytes());
        }
        WorkloadId {
            requests: specs.len(),
            seed,
            fingerprint: format!("{:x}", hash.finalize()),
        }
    }
}

/// How a shard's part of the workload was chosen: made by [`ShardPlan::split`] before the
/// backend builds any request, used by the schedule and to give records their global
/// indices back.
#[derive(Debug, Clone)]
pub struct ShardPlan {
    pub config: ShardConfig,
    pub workload: WorkloadId,
    /// The global index of each of this shard's requests, ascending.
    pub global_index: Vec<usize>,
}

impl ShardPlan {
    /// Keeps this shard's requests of the whole workload `specs`.
    pub fn split(config: ShardConfig, specs: &mut Vec<RequestSpec>, seed: u64) -> ShardPlan {
        let workload = WorkloadId::of(specs, seed);
        let global_index = config.shard.indices(specs.len());
        *specs = config.shard.select(specs);
        ShardPlan {
            config,
            workload,
            global_index,
        }
    }

    /// A timed run's shard (`--duration`): it keeps the whole workload `specs`, and sends
    /// the run's positions `k` with `k mod N == I`, each request `k mod n` of the workload
    /// ([`crate::client::load::Timed`]).
    pub fn whole(config: ShardConfig, specs: &[RequestSpec], seed: u64) -> ShardPlan {
        ShardPlan {
            config,
            workload: WorkloadId::of(specs, seed),
            global_index: (0..specs.len()).collect(),
        }
    }

    /// This shard's offsets of the whole workload's schedule.
    pub fn offsets(&self, global: &[f64]) -> Result<Vec<f64>> {
        ensure!(
            global.len() == self.workload.requests,
            "the schedule has {} offsets for a workload of {} requests",
            global.len(),
            self.workload.requests
        );
        Ok(self.config.shard.select(global))
    }

    /// Gives records made with this shard's own (local) indices their global ones.
    pub fn globalise(&self, records: &mut [RequestRecord]) {
        for record in records {
            if let Some(&global) = self.global_index.get(record.index) {
                record.index = global;
            }
        }
    }
}

/// One request as a shard writes it: the record (under its global index) and the counts
/// a merge cannot redo without the shard's tokenizer and dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    #[serde(flatten)]
    pub record: RequestRecord,
    /// The run tokenizer's count of `generated_text`; `None` without a tokenizer.
    pub text_tokens: Option<u32>,
    /// The run tokenizer's count of `reasoning_text`; `None` without a tokenizer or text.
    pub reasoning_tokens: Option<u32>,
    /// Seconds of audio the request uploaded (vLLM's `rtfx`); `None` without audio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_seconds: Option<f64>,
    /// The prompt's block keys ([`crate::prefix_reuse::block_keys`]), for the merged
    /// theoretical prefix-cache hit rate; `None` where the shard counted none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_keys: Option<Vec<u64>>,
}

/// What one shard of a run writes (`--shard-output`) for `bench merge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardDoc {
    /// [`FORMAT`].
    pub bench_shard_format: u32,
    pub shard: Shard,
    pub workload: WorkloadId,
    /// The run as this shard reports it (with the global `--max-concurrency`).
    pub run: RunInfo,
    pub metrics_config: MetricsConfig,
    /// Whether the run loaded a tokenizer (the token counts then come with the records).
    pub has_tokenizer: bool,
    /// Whether the records carry their prompts' block keys (the theoretical prefix-cache
    /// hit rate was computed).
    pub prefix_keys: bool,
    /// The monotonic clock at this shard's start (vLLM's `start_times` origin).
    pub clock_origin_s: f64,
    pub diagnostics: ShardDiagnostics,
    /// Set when this shard was stopped before its share ended.
    pub interrupted: Option<Interruption>,
    /// `--shutdown-grace-sec`: how long its requests in flight had after a stop.
    pub shutdown_grace_s: f64,
    /// What the server's `/metrics` said between this shard's scrapes before its start
    /// and after its end: the merge takes the shard that ended last, whose window holds
    /// every shard's requests (all started at the shared start).
    pub server_metrics: Option<crate::server_metrics::report::ServerReport>,
    /// With several endpoints: each one's `/metrics` report over the same window (see
    /// `server_metrics`).
    #[serde(default)]
    pub endpoint_server_metrics: Vec<Option<crate::server_metrics::report::ServerReport>>,
    /// `--probe-request-rate`'s statistics: shard 0 alone sends the probes.
    pub probe: Option<crate::probe::ProbeStats>,
    pub records: Vec<ShardRecord>,
}

/// What a shard run measured besides its metrics, for its [`ShardDoc`].
#[derive(Debug, Clone)]
pub struct ShardRun {
    pub plan: ShardPlan,
    /// The global `--max-concurrency` (the run's own is this shard's part of it).
    pub max_concurrency: Option<usize>,
    pub started_late_s: f64,
    pub clock_offset: Result<ClockOffset, String>,
    /// Seconds of audio per request, by local index; empty without audio.
    pub audio_seconds: Vec<f64>,
    /// `--shutdown-grace-sec`.
    pub shutdown_grace: std::time::Duration,
}

impl ShardDoc {
    /// The document of a shard whose metrics (records with global indices) are `metrics`.
    /// `count_tokens` is the run's tokenizer, for the texts' counts.
    pub fn new(
        metrics: &Metrics,
        side: &SideReports,
        run: &RunInfo,
        shard: &ShardRun,
        interrupted: Option<&Interruption>,
        count_tokens: Option<crate::metrics::TokenCounter<'_>>,
        prefix_keys: Option<Vec<Option<Vec<u64>>>>,
    ) -> Result<ShardDoc> {
        let has_prefix_keys = prefix_keys.is_some();
        let mut prefix_keys = prefix_keys.unwrap_or_default().into_iter();
        let plan = &shard.plan;
        let count = |text: &str| -> Result<Option<u32>> {
            match count_tokens {
                Some(count) => Ok(Some(count(text)? as u32)),
                None => Ok(None),
            }
        };
        let local: std::collections::HashMap<usize, usize> = plan
            .global_index
            .iter()
            .enumerate()
            .map(|(local, &global)| (global, local))
            .collect();
        let records = metrics
            .per_request
            .records
            .iter()
            .map(|record| {
                Ok(ShardRecord {
                    text_tokens: count(&record.generated_text)
                        .with_context(|| format!("counting request {}", record.index))?,
                    reasoning_tokens: match record.reasoning_text.is_empty() {
                        true => None,
                        false => count(&record.reasoning_text)
                            .with_context(|| format!("counting request {}", record.index))?,
                    },
                    audio_seconds: match run.duration_limit_s {
                        // A timed run's shard holds the whole workload, sent again and
                        // again: record `k` sent request `k mod n`.
                        Some(_) => shard
                            .audio_seconds
                            .get(record.index % plan.global_index.len().max(1))
                            .copied(),
                        None => local
                            .get(&record.index)
                            .and_then(|&i| shard.audio_seconds.get(i))
                            .copied(),
                    },
                    prefix_keys: prefix_keys.next().flatten(),
                    record: record.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (clock_offset, clock_offset_note) = match &shard.clock_offset {
            Ok(offset) => (Some(*offset), None),
            Err(why) => (None, Some(why.clone())),
        };
        Ok(ShardDoc {
            bench_shard_format: FORMAT,
            shard: plan.config.shard,
            workload: plan.workload.clone(),
            run: RunInfo {
                max_concurrency: shard.max_concurrency,
                ..run.clone()
            },
            metrics_config: metrics.config.clone(),
            has_tokenizer: metrics.has_tokenizer,
            prefix_keys: has_prefix_keys,
            clock_origin_s: metrics.per_request.clock_origin_s,
            diagnostics: ShardDiagnostics {
                shard: plan.config.shard,
                host: host_name(),
                cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
                requests: plan.global_index.len(),
                sent: metrics.client.sent,
                duration_s: metrics.duration_s,
                schedule_lag_ms: metrics.client.schedule_lag_ms,
                cpu: side.client_cpu,
                http_client: side.http_client.map(str::to_owned),
                start_at: match plan.config.start_at {
                    Some(StartAt::At(t)) => Some(format_wall_clock(t)),
                    _ => None,
                },
                started_late_s: shard.started_late_s,
                clock_offset,
                clock_offset_note,
            },
            interrupted: interrupted.cloned(),
            shutdown_grace_s: shard.shutdown_grace.as_secs_f64(),
            server_metrics: side.server_metrics.clone(),
            endpoint_server_metrics: side.endpoint_server_metrics.clone(),
            probe: side.probe,
            records,
        })
    }

    /// The document as one JSON line.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).context("writing the shard's records as JSON")
    }

    /// Writes the document to `path` (atomically: a merge never reads half a file).
    pub fn write(&self, path: &Path) -> Result<()> {
        let json = self.to_json()?;
        crate::report::save::write_atomically(path, &[json.as_bytes(), b"\n"])
            .with_context(|| format!("writing the shard's records to {}", path.display()))
    }

    /// Every shard document in the file at `path`: the file is one document (what
    /// `--shard-output FILE` writes), or any text holding [`LOG_PREFIX`] lines (what
    /// `--shard-output -` prints, collected by `kubectl logs`). A record file
    /// (`--record-file`) is [`record_file::read`]'s.
    pub fn read_all(path: &Path) -> Result<Vec<ShardDoc>> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading shard results {}", path.display()))?;
        let parse = |json: &str, line: Option<usize>| -> Result<ShardDoc> {
            let place = match line {
                Some(n) => format!("{} line {n}", path.display()),
                None => path.display().to_string(),
            };
            let value: serde_json::Value = serde_json::from_str(json)
                .with_context(|| format!("{place}: not a shard result (invalid JSON)"))?;
            let format = value.get("bench_shard_format").and_then(|v| v.as_u64());
            match format {
                Some(f) if f == u64::from(FORMAT) => {}
                Some(f) => bail!(
                    "{place}: a shard result of format {f}; this bench reads format {FORMAT} \
                     (merge with the bench version that ran the shards)"
                ),
                None => bail!(
                    "{place}: not a shard result (no bench_shard_format key): \
                     `bench merge` reads what `bench serve --shard I/N` writes"
                ),
            }
            serde_json::from_value(value)
                .with_context(|| format!("{place}: a malformed shard result"))
        };
        let trimmed = text.trim_start();
        if trimmed.starts_with('{') {
            return Ok(vec![parse(trimmed, None)?]);
        }
        let docs = text
            .lines()
            .enumerate()
            .filter_map(|(n, line)| {
                let at = line.find(LOG_PREFIX)?;
                Some(parse(&line[at + LOG_PREFIX.len()..], Some(n + 1)))
            })
            .collect::<Result<Vec<_>>>()?;
        ensure!(
            !docs.is_empty(),
            "{}: holds no shard result (neither a JSON document nor a line with {:?})",
            path.display(),
            LOG_PREFIX.trim_end()
        );
        Ok(docs)
    }
}

/// This machine's name, for the per-shard diagnostics (a pod's name on Kubernetes).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests;
