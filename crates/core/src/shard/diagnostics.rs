//! Which shard a process is (`--shard I/N`), and what a merged result reports of each
//! shard's client. Kept below the metrics, which carry the diagnostics of a merged run.

use std::fmt;
use std::str::FromStr;

use anyhow::{Result, ensure};
use serde::{Deserialize, Serialize};

use crate::client::cpu::ClientCpu;
use crate::clock_offset::ClockOffset;
use crate::metrics::client::LagSummary;

/// `--shard I/N`: this process is shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let (index, count) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?} is not I/N (shard I of N, from 0)"))?;
        let parse = |part: &str, what: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| format!("{s:?}: {what} {part:?} is not a whole number"))
        };
        let shard = Shard {
            index: parse(index, "the shard index")?,
            count: parse(count, "the number of shards")?,
        };
        if shard.count == 0 {
            return Err(format!("{s:?}: the number of shards must be at least 1"));
        }
        if shard.index >= shard.count {
            return Err(format!(
                "{s:?}: the shard index counts from 0, so it must be below {}",
                shard.count
            ));
        }
        Ok(shard)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// The global indices of this shard's requests in a workload of `total`, ascending.
    pub fn indices(self, total: usize) -> Vec<usize> {
        (self.index..total).step_by(self.count).collect()
    }

    /// This shard's items of a list indexed by global request index.
    pub fn select<T: Clone>(self, all: &[T]) -> Vec<T> {
        all.iter()
            .skip(self.index)
            .step_by(self.count)
            .cloned()
            .collect()
    }

    /// This shard's part of a global `--max-concurrency`: the cap split as evenly as whole
    /// numbers allow (the first `cap mod N` shards take one more), so that the shards
    /// together never exceed it. Each shard holds its own slots: a single process lends a
    /// free slot to whichever request is next, the shards only to their own.
    pub fn max_concurrency(self, cap: usize) -> Result<usize> {
        ensure!(
            cap >= self.count,
            "--max-concurrency {cap} is fewer than the {} shards: each shard needs a slot",
            self.count
        );
        Ok(cap / self.count + usize::from(self.index < cap % self.count))
    }
}

/// A shard's client, as the merged result reports it per shard: enough to tell whether
/// this shard kept its schedule and where its clock stood.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardDiagnostics {
    pub shard: Shard,
    /// The machine (a pod's name on Kubernetes).
    pub host: String,
    /// The cores its process could run on (its CPU affinity, or a container's CPU set).
    pub cores: usize,
    /// Requests of its share, sent or not.
    pub requests: usize,
    /// Requests it sent.
    pub sent: usize,
    /// vLLM's `benchmark_duration` of this shard: its start to its last response.
    pub duration_s: f64,
    pub schedule_lag_ms: LagSummary,
    pub cpu: Option<ClientCpu>,
    /// Which HTTP client sent its requests (`h1`, `reqwest`).
    pub http_client: Option<String>,
    /// The shared start (`--start-at`), RFC 3339; `None` when it started when ready.
    pub start_at: Option<String>,
    /// How long after the shared start the shard was ready to send (0 when on time): its
    /// first requests then went late, which its schedule lag shows.
    pub started_late_s: f64,
    /// This machine's clock against the server's; `None` when it could not be estimated
    /// (`clock_offset_note` says why).
    pub clock_offset: Option<ClockOffset>,
    pub clock_offset_note: Option<String>,
}
