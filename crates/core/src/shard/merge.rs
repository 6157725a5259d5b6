//! `bench merge`: the shards of one run back into one result, every metric recomputed
//! from all the records (see the module above).

use std::collections::HashMap;

use anyhow::{Context, Result, bail, ensure};

use super::ShardDoc;
use super::diagnostics::ShardDiagnostics;
use crate::metrics::{self, Metrics};
use crate::report::RunInfo;
use crate::report::save::Interruption;
use crate::side_reports::SideReports;

/// A merged run: what a single process would have reported, with each shard's client.
#[derive(Debug)]
pub struct Merged {
    /// Computed from every shard's records.
    pub metrics: Metrics,
    /// What the shards measured beside their records; `shards` holds each shard's
    /// diagnostics.
    pub side: SideReports,
    pub run: RunInfo,
    /// Requests in the whole workload.
    pub requests: usize,
    /// Set when a shard was stopped before its share ended: which, and what it cost.
    pub interrupted: Option<Interruption>,
    /// The shards' `--shutdown-grace-sec` (the longest).
    pub shutdown_grace: std::time::Duration,
}

/// How far apart the shards' clocks may be, by their estimates against the server, before
/// the merged result warns that their starts were not simultaneous.
const CLOCK_SPREAD_WARNING_MS: f64 = 5.0;

/// A shard that became ready this much after the shared start sent its first requests late.
const LATE_START_WARNING_S: f64 = 0.001;

/// Merges the `N` shards of one run. Each document comes with where it was read from
/// (named in errors). Refused: a shard missing or given twice, documents of different
/// runs (workload, schedule, metric settings), records outside their shard's share.
pub fn merge(docs: Vec<(String, ShardDoc)>) -> Result<Merged> {
    let Some((first_source, first)) = docs.first() else {
        bail!("no shard results to merge");
    };
    let count = first.shard.count;
    let mut by_index: Vec<Option<&str>> = vec![None; count];
    for (source, doc) in &docs {
        ensure!(
            doc.shard.count == count,
            "{source} is shard {} of {} shards, {first_source} of {count}: not shards of one run",
            doc.shard,
            doc.shard.count
        );
        if let Some(other) = by_index[doc.shard.index].replace(source) {
            bail!("shard {} is given twice: {other} and {source}", doc.shard);
        }
        same_run(first_source, first, source, doc)?;
        for shard_record in &doc.records {
            let index = shard_record.record.index;
            // A timed run's (`--duration`) positions go past its workload.
            let timed = doc.run.duration_limit_s.is_some();
            ensure!(
                (timed || index < doc.workload.requests) && index % count == doc.shard.index,
                "{source}: request {index} is not in shard {}'s share of {} requests",
                doc.shard,
                doc.workload.requests
            );
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|&i| by_index[i].is_none())
        .map(|i| format!("{i}/{count}"))
        .collect();
    ensure!(
        missing.is_empty(),
        "shard {} missing: a merge needs every shard of the run (given {})",
        missing.join(", "),
        docs.len()
    );

    let mut docs: Vec<ShardDoc> = docs.into_iter().map(|(_, doc)| doc).collect();
    docs.sort_by_key(|doc| doc.shard.index);
    let first = &docs[0];
    let requests = first.workload.requests;
    let has_tokenizer = docs.iter().all(|d| d.has_tokenizer);
    let has_prefix_keys = docs.iter().all(|d| d.prefix_keys);
    let config = first.metrics_config.clone();
    // Each shard's clock started at the shared start, so the run lasted as long as its
    // longest shard (vLLM's duration: start to the last response).
    let duration = docs
        .iter()
        .map(|d| d.diagnostics.duration_s)
        .fold(0.0, f64::max);
    let clock_origin_s = first.clock_origin_s;
    let shutdown_grace = docs
        .iter()
        .map(|d| std::time::Duration::try_from_secs_f64(d.shutdown_grace_s).unwrap_or_default())
        .max()
        .unwrap_or_default();
    // The shard that ended last, whose window holds every shard's requests.
    let last_ended = |has: fn(&ShardDoc) -> bool| {
        docs.iter().filter(|d| has(d)).max_by(|a, b| {
            a.diagnostics
                .duration_s
                .total_cmp(&b.diagnostics.duration_s)
        })
    };
    let server_metrics =
        last_ended(|d| d.server_metrics.is_some()).and_then(|d| d.server_metrics.clone());
    let endpoint_server_metrics = last_ended(|d| !d.endpoint_server_metrics.is_empty())
        .map(|d| d.endpoint_server_metrics.clone())
        .unwrap_or_default();
    let probe = docs.iter().find_map(|d| d.probe);
    let mut audio_seconds = Vec::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut records = Vec::with_capacity(docs.iter().map(|d| d.records.len()).sum());
    let mut prefix_keys: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut shards = Vec::with_capacity(docs.len());
    let mut run = first.run.clone();
    let mut interruptions = Vec::new();
    for doc in docs {
        run.date = run.date.max(doc.run.date);
        run.started_at = run.started_at.min(doc.run.started_at);
        if let Some(i) = doc.interrupted {
            interruptions.push((doc.shard, i));
        }
        for shard_record in doc.records {
            let record = shard_record.record;
            // The shard's tokenizer counted these texts; the merge looks its counts up
            // (a tokenizer gives one text one count, whichever shard counted it).
            if let Some(n) = shard_record.text_tokens {
                counts.insert(record.generated_text.clone(), n as usize);
            }
            if let Some(n) = shard_record.reasoning_tokens {
                counts.insert(record.reasoning_text.clone(), n as usize);
            }
            if let Some(keys) = shard_record.prefix_keys {
                prefix_keys.insert(record.index, keys);
            }
            if let Some(seconds) = shard_record.audio_seconds {
                if audio_seconds.len() <= record.index {
                    audio_seconds.resize(record.index + 1, 0.0);
                }
                audio_seconds[record.index] = seconds;
            }
            records.push(record);
        }
        shards.push(doc.diagnostics);
    }
    for key in ["shard", "start_at", "shard_output", "workers"] {
        run.args.remove(key);
    }
    let counter = |text: &str| -> Result<usize> {
        counts
            .get(text)
            .copied()
            .context("a text no shard counted the tokens of")
    };
    let mut computed = metrics::calculate(
        records,
        duration,
        has_tokenizer.then_some(&counter as metrics::TokenCounter<'_>),
        &config,
    )
    .context("computing the merged metrics")?;
    if run.duration_limit_s.is_some() {
        // A timed run's request count is what its shards sent.
        run.num_prompts = computed.per_request.records.len();
    }
    computed.per_request.clock_origin_s = clock_origin_s;
    let mut side = SideReports {
        server_metrics,
        endpoint_server_metrics,
        probe,
        ..SideReports::default()
    };
    if has_prefix_keys {
        let keys: Vec<Option<Vec<u64>>> = computed
            .per_request
            .records
            .iter()
            .map(|r| prefix_keys.remove(&r.index))
            .collect();
        side.prefix_reuse = Some(crate::prefix_reuse::of_records(
            &computed.per_request.records,
            &keys,
            config.prefix_block_size,
        ));
    }
    side.client_cpu = shards
        .iter()
        .filter_map(|s| s.cpu)
        .reduce(|a, b| metrics::ClientCpu {
            total_s: a.total_s + b.total_s,
            decode_s: a.decode_s + b.decode_s,
        });
    side.http_client = shards
        .iter()
        .find_map(|s| crate::client::transport_name(s.http_client.as_deref()?));
    // Each record's own seconds (a timed run's shards wrote them by record).
    computed.set_rtfx(&audio_seconds, None);
    computed.warnings.extend(shard_warnings(&shards));
    side.shards = shards;
    Ok(Merged {
        metrics: computed,
        side,
        run,
        requests,
        interrupted: merged_interruption(&interruptions),
        shutdown_grace,
    })
}

/// Refuses `doc` (from `source`) unless it is a shard of the same run as `first`.
fn same_run(first_source: &str, first: &ShardDoc, source: &str, doc: &ShardDoc) -> Result<()> {
    let differs = |what: &str| -> Result<()> {
        bail!(
            "{source} and {first_source} are not shards of one run: their {what} differ \
             (every shard must run the same command but for --shard)"
        )
    };
    if doc.workload != first.workload {
        return differs("workloads (requests, seed or the requests themselves)");
    }
    if doc.metrics_config != first.metrics_config {
        return differs("metric settings (percentiles, goodput, --input-tokens, ...)");
    }
    let (a, b) = (&doc.run, &first.run);
    // A timed run's `num_prompts` is what each shard sent.
    let prompts = |r: &RunInfo| r.duration_limit_s.is_none().then_some(r.num_prompts);
    if (a.backend.as_str(), a.model_id.as_str(), prompts(a))
        != (b.backend.as_str(), b.model_id.as_str(), prompts(b))
    {
        return differs("backends, models or --num-prompts");
    }
    if a.duration_limit_s.map(f64::to_bits) != b.duration_limit_s.map(f64::to_bits) {
        return differs("--duration");
    }
    if a.request_rate.to_bits() != b.request_rate.to_bits()
        || a.burstiness.to_bits() != b.burstiness.to_bits()
        || a.ramp_up != b.ramp_up
        || a.max_concurrency != b.max_concurrency
    {
        return differs("schedules (--request-rate, --burstiness, ramp-up, --max-concurrency)");
    }
    if doc.diagnostics.start_at != first.diagnostics.start_at {
        return differs("start times (--start-at)");
    }
    Ok(())
}

/// What the merged result should warn of: shards whose clocks disagree, shards that
/// started late.
fn shard_warnings(shards: &[ShardDiagnostics]) -> Vec<String> {
    let mut warnings = Vec::new();
    let offsets: Vec<(f64, f64)> = shards
        .iter()
        .filter_map(|s| s.clock_offset.map(|c| (c.offset_ms, c.uncertainty_ms)))
        .collect();
    if let (Some(low), Some(high)) = (
        offsets.iter().map(|o| o.0).reduce(f64::min),
        offsets.iter().map(|o| o.0).reduce(f64::max),
    ) {
        let slack = offsets.iter().map(|o| o.1).fold(0.0, f64::max);
        if high - low > CLOCK_SPREAD_WARNING_MS + 2.0 * slack {
            warnings.push(format!(
                "the shards' clocks differ by about {:.1} ms (estimated against the server's \
                 Date header, +/- {slack:.1} ms): their shared start was that far from \
                 simultaneous; synchronise the machines' clocks (NTP, chrony)",
                high - low
            ));
        }
    }
    for s in shards {
        if s.started_late_s > LATE_START_WARNING_S {
            warnings.push(format!(
                "shard {} ({}) was ready {:.3} s after the shared start: its first requests \
                 went late (its schedule lag shows how late); start the shards earlier",
                s.shard, s.host, s.started_late_s
            ));
        }
    }
    warnings
}

/// One interruption for the merged result: the shards' reasons, and what they cost.
fn merged_interruption(interruptions: &[(super::Shard, Interruption)]) -> Option<Interruption> {
    if interruptions.is_empty() {
        return None;
    }
    Some(Interruption {
        reason: interruptions
            .iter()
            .map(|(shard, i)| format!("shard {shard}: {}", i.reason))
            .collect::<Vec<_>>()
            .join("; "),
        not_sent: interruptions.iter().map(|(_, i)| i.not_sent).sum(),
        cancelled: interruptions.iter().map(|(_, i)| i.cancelled).sum(),
    })
}
