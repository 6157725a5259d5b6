//! From scrapes to what the reports show: which server family's metrics these are, and
//! for that family the deltas of its counters over the run and the peaks of its gauges.
//!
//! The names are checked against each server's sources: vLLM `vllm/v1/metrics/loggers.py`
//! (0.32), SGLang `python/sglang/srt/metrics/collector.py`, llama.cpp
//! `tools/server/server-context.cpp` (the `/metrics` handler) and `server-task.cpp`
//! (`prompt_tokens_cached_total`), TGI's router (`tgi_request_queue_duration`,
//! `tgi_queue_size`, `tgi_batch_current_size`, exported by `metrics-exporter-prometheus`
//! as `_sum`/`_count`).
//!
//! The servers' names and metric names live here, in the core, rather than in the backend
//! plugins: the issue asks for these servers' metrics by name, a server's `/metrics` is the
//! same whichever API the run speaks (vLLM serves it to the `openai`, `vllm` and
//! `openai-chat` backends alike), and the plugin contract has no way to declare metrics.

use super::scrape::Snapshot;
use super::spec_decode::SpecDecodeStats;

/// Prompt tokens served from the prefix cache, and those looked up, each a sum of
/// counters.
struct CacheCounters {
    /// Counters whose sum is the prompt tokens taken from the cache.
    hits: &'static [&'static str],
    /// Counters whose sum is every prompt token the server looked up.
    queries: &'static [&'static str],
}

/// One server's metric names for what bench reports; empty where it exposes none.
struct Family {
    /// The name reports give it.
    server: &'static str,
    /// Every metric of the server starts with it: how a scrape is recognised.
    prefix: &'static str,
    cache: Option<CacheCounters>,
    /// Gauges of the KV cache's use as a fraction (0 to 1), the first present is read;
    /// the largest series (engine, rank) counts.
    kv_usage: &'static [&'static str],
    /// Gauges of requests being processed, summed over series.
    running: &'static [&'static str],
    /// Gauges of requests waiting for the scheduler, summed over series.
    waiting: &'static [&'static str],
    /// Counters of requests preempted (evicted from the running batch and redone).
    preemptions: &'static [&'static str],
    /// Histograms of the time a request waited before running, in seconds (base names
    /// of `_sum` and `_count`).
    queue_time: &'static [&'static str],
    /// Gauges of the speculative-decoding acceptance (fraction) and accepted length as
    /// the server last computed them (vLLM has counters instead, read by
    /// [`super::spec_decode`]).
    spec_gauges: Option<(&'static str, &'static str)>,
    /// Counters of drafts, drafted tokens and accepted tokens (llama.cpp, whose names
    /// follow vLLM's), whose deltas give the acceptance over the run.
    spec_counters: Option<SpecCounters>,
}

/// A server's speculative-decoding counters, summed over series.
struct SpecCounters {
    drafts: &'static str,
    draft_tokens: &'static str,
    accepted_tokens: &'static str,
}

/// The families in the order they are tried on a scrape.
const FAMILIES: &[Family] = &[
    Family {
        server: "vllm",
        prefix: "vllm:",
        cache: Some(CacheCounters {
            hits: &["vllm:prefix_cache_hits_total"],
            queries: &["vllm:prefix_cache_queries_total"],
        }),
        // `gpu_cache_usage_perc` is the name before vLLM 0.10; both are fractions.
        kv_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        preemptions: &["vllm:num_preemptions_total"],
        queue_time: &["vllm:request_queue_time_seconds"],
        spec_gauges: None,
        spec_counters: None,
    },
    Family {
        server: "sglang",
        prefix: "sglang:",
        // `prompt_tokens_total` counts every prompt token of a finished request, cached
        // or not; `cached_tokens_total` those its radix cache held.
        cache: Some(CacheCounters {
            hits: &["sglang:cached_tokens_total"],
            queries: &["sglang:prompt_tokens_total"],
        }),
        kv_usage: &["sglang:token_usage"],
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        // SGLang calls a preemption a retraction.
        preemptions: &["sglang:num_retracted_requests_total"],
        queue_time: &["sglang:queue_time_seconds"],
        spec_gauges: Some(("sglang:spec_accept_rate", "sglang:spec_accept_length")),
        spec_counters: None,
    },
    Family {
        server: "llama.cpp",
        prefix: "llamacpp:",
        // `prompt_tokens_total` excludes the cached tokens.
        cache: Some(CacheCounters {
            hits: &["llamacpp:prompt_tokens_cached_total"],
            queries: &[
                "llamacpp:prompt_tokens_total",
                "llamacpp:prompt_tokens_cached_total",
            ],
        }),
        // Only older llama-server builds export it.
        kv_usage: &["llamacpp:kv_cache_usage_ratio"],
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        preemptions: &[],
        queue_time: &[],
        spec_gauges: None,
        // llama-server's `/metrics` handler (build 11434 checked).
        spec_counters: Some(SpecCounters {
            drafts: "llamacpp:spec_decode_num_drafts_total",
            draft_tokens: "llamacpp:spec_decode_num_draft_tokens_total",
            accepted_tokens: "llamacpp:spec_decode_num_accepted_tokens_total",
        }),
    },
    Family {
        server: "tgi",
        prefix: "tgi_",
        cache: None,
        kv_usage: &[],
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        preemptions: &[],
        queue_time: &["tgi_request_queue_duration"],
        spec_gauges: None,
        spec_counters: None,
    },
];

/// The family's gauges in `s` (KV-cache usage, requests running and waiting), each as
/// its peak reads it: a ratio's largest series, a count's sum.
fn gauge_values(family: &Family, s: &Snapshot) -> Vec<(&'static str, f64)> {
    let ratios = family.kv_usage.iter().map(|&n| (n, true));
    let counts = family
        .running
        .iter()
        .chain(family.waiting)
        .map(|&n| (n, false));
    ratios
        .chain(counts)
        .filter_map(|(name, ratio)| {
            let v = if ratio { s.max(name) } else { s.total(name) };
            v.map(|v| (name, v))
        })
        .collect()
}

/// The gauges of one scrape during the run, for the live views (`--ui dashboard`,
/// `--metrics-port`); none when no family bench knows is in it.
pub fn live_gauges(s: &Snapshot) -> Vec<(&'static str, f64)> {
    family_of(s).map_or_else(Vec::new, |family| gauge_values(family, s))
}

/// The family whose metrics `snapshot` holds, first in [`FAMILIES`] order.
fn family_of(snapshot: &Snapshot) -> Option<&'static Family> {
    FAMILIES.iter().find(|f| snapshot.has_prefix(f.prefix))
}

/// What the server's counters say about its prefix cache during the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServerCache {
    /// Which server's counters were read (`vllm`, `sglang`, `llama.cpp`).
    #[serde(deserialize_with = "super::names::one")]
    pub server: super::names::Name,
    /// Prompt tokens the server took from its prefix cache during the run.
    pub cached_prompt_tokens: u64,
    /// Prompt tokens it looked up in the cache (cached or computed) during the run.
    pub queried_prompt_tokens: u64,
}

impl ServerCache {
    /// Cached over queried prompt tokens; 0 when nothing was queried.
    pub fn hit_rate(&self) -> f64 {
        if self.queried_prompt_tokens == 0 {
            0.0
        } else {
            self.cached_prompt_tokens as f64 / self.queried_prompt_tokens as f64
        }
    }

    /// The difference between two scrapes of the same server, from the first family of
    /// counters both have; `None` when neither has any.
    pub fn between(before: &Snapshot, after: &Snapshot) -> Option<ServerCache> {
        FAMILIES.iter().find_map(|family| {
            let counters = family.cache.as_ref()?;
            Some(ServerCache {
                server: family.server,
                cached_prompt_tokens: counter_delta(before, after, counters.hits)?,
                queried_prompt_tokens: counter_delta(before, after, counters.queries)?,
            })
        })
    }
}

/// The growth of the sum of `names` between two scrapes; `None` when one is missing or
/// the counter went down (a restarted server: no figure).
fn counter_delta(before: &Snapshot, after: &Snapshot, names: &[&str]) -> Option<u64> {
    let d = after.sum(names)? - before.sum(names)?;
    (d >= 0.0).then_some(d.round() as u64)
}

/// The server-side queue time of the requests that finished during the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueTime {
    /// Requests observed by the histogram during the run.
    pub requests: u64,
    /// Their mean time in the server's queue, in milliseconds.
    pub mean_ms: f64,
}

/// A gauge the server exposes, read during the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Peak {
    /// The metric read.
    #[serde(deserialize_with = "super::names::one")]
    pub metric: super::names::Name,
    /// Its largest value over the scrapes.
    pub peak: f64,
}

/// Another server's speculative decoding: SGLang's gauges read after the run, or the deltas
/// of llama.cpp's counters over it (rate = accepted / drafted tokens, length = 1 +
/// accepted tokens per draft, vLLM's formulas).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SpecGauges {
    /// Accepted over drafted tokens, in percent.
    pub acceptance_rate: f64,
    /// Tokens per forward pass of the target model.
    pub acceptance_length: f64,
}

/// One scrape during the run: seconds since the run started, and the family's gauges.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TimelinePoint {
    pub t: f64,
    #[serde(deserialize_with = "super::names::pairs")]
    pub values: Vec<(&'static str, f64)>,
}

/// Everything bench read from the server's `/metrics` over a run.
/// Serialised so that a shard of a run carries it to the merge ([`crate::shard`]).
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerReport {
    /// The family whose metrics were read (`vllm`, `sglang`, `llama.cpp`, `tgi`).
    #[serde(deserialize_with = "super::names::one")]
    pub server: super::names::Name,
    pub cache: Option<ServerCache>,
    /// vLLM's speculative-decoding statistics (its own result keys).
    pub spec_decode: Option<SpecDecodeStats>,
    /// Another server's speculative-decoding gauges.
    pub spec_gauges: Option<SpecGauges>,
    /// Requests preempted during the run.
    pub preemptions: Option<u64>,

    pub queue_time: Option<QueueTime>,
    /// The KV cache's use, as a fraction; from the scrapes during the run.
    pub kv_cache_usage: Option<Peak>,
    pub requests_running: Option<Peak>,
    pub requests_waiting: Option<Peak>,
    /// Every scrape during the run, in order (empty without an interval).
    pub timeline: Vec<TimelinePoint>,
    /// What the family exposes none of, or what could not be read, for one note.
    #[serde(deserialize_with = "super::names::many")]
    pub not_found: Vec<&'static str>,
}

impl ServerReport {
    /// The report of a run from the scrapes before and after it and those during it
    /// (`during`: seconds since the start and the scrape); `None` when neither end's
    /// scrape holds metrics of a server bench knows.
    pub fn between(
        before: &Snapshot,
        during: &[(f64, Snapshot)],
        after: &Snapshot,
    ) -> Option<ServerReport> {
        let spec_decode =
            SpecDecodeStats::between(before.spec_decode.as_ref(), after.spec_decode.as_ref());
        let Some(family) = family_of(after).or_else(|| family_of(before)) else {
            // vLLM's rule reads its counters whatever else the text holds.
            return spec_decode.map(|spec_decode| ServerReport {
                server: "vllm",
                spec_decode: Some(spec_decode),
                ..ServerReport::default()
            });
        };
        let mut not_found = Vec::new();
        let mut note = |found: bool, what: &'static str| {
            if !found {
                not_found.push(what);
            }
        };
        let cache = ServerCache::between(before, after).filter(|c| c.server == family.server);
        note(cache.is_some(), "prefix-cache counters");
        let spec_gauges = family
            .spec_gauges
            .and_then(|(rate, length)| {
                Some(SpecGauges {
                    acceptance_rate: 100.0 * after.max(rate)?,
                    acceptance_length: after.max(length)?,
                })
            })
            .or_else(|| {
                let c = family.spec_counters.as_ref()?;
                let drafts = counter_delta(before, after, &[c.drafts])?;
                let drafted = counter_delta(before, after, &[c.draft_tokens])?;
                let accepted = counter_delta(before, after, &[c.accepted_tokens])?;
                // No draft during the run: no speculative decoding to report.
                (drafts > 0 && drafted > 0).then(|| SpecGauges {
                    acceptance_rate: 100.0 * accepted as f64 / drafted as f64,
                    acceptance_length: 1.0 + accepted as f64 / drafts as f64,
                })
            });
        note(
            spec_decode.is_some() || spec_gauges.is_some(),
            "speculative decoding",
        );
        let preemptions = first_delta(before, after, family.preemptions);
        note(preemptions.is_some(), "preemptions");
        let queue_time = family.queue_time.iter().find_map(|base| {
            let count = counter_delta(before, after, &[&format!("{base}_count")])?;
            let sum =
                after.total(&format!("{base}_sum"))? - before.total(&format!("{base}_sum"))?;
            Some(QueueTime {
                requests: count,
                mean_ms: if count == 0 {
                    0.0
                } else {
                    1000.0 * sum / count as f64
                },
            })
        });
        note(queue_time.is_some(), "queue time");
        // A gauge's peak needs scrapes while the requests ran: the ones at both ends see
        // an idle server.
        let peak = |names: &'static [&'static str], max: bool| -> Option<Peak> {
            let metric = *names
                .iter()
                .find(|n| during.iter().any(|(_, s)| s.total(n).is_some()))?;
            let read = |s: &Snapshot| if max { s.max(metric) } else { s.total(metric) };
            let peak = during
                .iter()
                .filter_map(|(_, s)| read(s))
                .chain(read(before))
                .chain(read(after))
                .fold(f64::MIN, f64::max);
            Some(Peak { metric, peak })
        };
        let kv_cache_usage = peak(family.kv_usage, true);
        let requests_running = peak(family.running, false);
        let requests_waiting = peak(family.waiting, false);
        if during.is_empty() {
            note(
                false,
                "peaks of gauges (they need --server-metrics-interval)",
            );
        } else {
            note(kv_cache_usage.is_some(), "KV-cache usage");
            note(
                requests_running.is_some() || requests_waiting.is_some(),
                "requests running/waiting",
            );
        }
        let timeline = during
            .iter()
            .map(|(t, s)| TimelinePoint {
                t: *t,
                values: gauge_values(family, s),
            })
            .collect();
        Some(ServerReport {
            server: family.server,
            cache,
            spec_decode,
            spec_gauges,
            preemptions,
            queue_time,
            kv_cache_usage,
            requests_running,
            requests_waiting,
            timeline,
            not_found,
        })
    }
}

/// The delta of the first of `names` both scrapes have.
fn first_delta(before: &Snapshot, after: &Snapshot, names: &[&str]) -> Option<u64> {
    names
        .iter()
        .find_map(|n| counter_delta(before, after, &[n]))
}
