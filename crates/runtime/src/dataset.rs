//! The dataset adapter: opens a plugin's request source and drains it into memory before
//! the run starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::bindings::current::dataset::DatasetPlugin as Bindings;
use super::bindings::current::dataset::exports::bench::plugin::dataset::Shard;
use super::bindings::v0_2_0::{self, dataset::DatasetPlugin as BindingsV0_2_0};
use super::bindings::v0_3_0::{self, dataset::DatasetPlugin as BindingsV0_3_0};
use super::bindings::v0_4_1::{self, dataset::DatasetPlugin as BindingsV0_4_1};
use super::bindings::v0_5_0::{self, dataset::DatasetPlugin as BindingsV0_5_0};
use super::bindings::v0_6_0::{self, dataset::DatasetPlugin as BindingsV0_6_0};
use super::{
    CallFailure, DatasetConfig, DatasetDescription, Fault, HostContext, Loaded, PluginCallError,
    PluginInfo, RequestSpec, Sample, Sandbox, TurnResult, TypedPre, Verdict,
};

/// How many requests the first `next-batch` call asks for. Later calls are sized from
/// the time the previous ones took (see [`BatchSizer`]).
const FIRST_BATCH: u32 = 16;

/// The most requests one `next-batch` call asks for.
const MAX_BATCH: u32 = 4096;

/// How long one `next-batch` call should take: long enough that the per-call costs and
/// the host's parallel encoding pay off, far inside the plugin's time budget (10 s by
/// default) whatever a prompt costs to make and however loaded the machine is.
const CALL_TARGET: Duration = Duration::from_millis(250);

/// The fewest requests a shard of a shardable source is given: below this, one more
/// instance (its start, and the source's own setup such as reading the file) costs more
/// than it saves.
const MIN_SHARD_REQUESTS: u32 = 16;

/// Sizes `next-batch` calls so that each takes about [`CALL_TARGET`]: a size grows at most
/// twofold per call and shrinks as far as the last call's time says.
#[derive(Debug)]
struct BatchSizer {
    size: u32,
}

impl BatchSizer {
    fn new() -> Self {
        BatchSizer { size: FIRST_BATCH }
    }

    /// Learns that `asked` requests took `took`.
    fn record(&mut self, asked: u32, took: Duration) {
        let per_request = took.as_secs_f64() / f64::from(asked.max(1));
        let fits = if per_request > 0.0 {
            CALL_TARGET.as_secs_f64() / per_request
        } else {
            f64::INFINITY
        };
        let grown = (f64::from(asked) * 2.0).min(f64::from(MAX_BATCH));
        self.size = fits.min(grown).max(1.0) as u32;
    }
}

/// The instance's exports, by the contract version it was built for.
enum Guest {
    Current(Bindings),
    V0_2_0(BindingsV0_2_0),
    V0_3_0(BindingsV0_3_0),
    V0_4_1(BindingsV0_4_1),
    V0_5_0(BindingsV0_5_0),
    V0_6_0(BindingsV0_6_0),
}

/// An instantiated dataset plugin in its own sandbox.
pub struct DatasetPlugin {
    sandbox: Sandbox,
    bindings: Guest,
    /// The guest path of `--dataset-path`, passed in the dataset config.
    guest_path: Option<String>,
    /// A multi-turn source, kept open after [`DatasetPlugin::sample`] for
    /// [`DatasetPlugin::next_turn`].
    open_source: Option<wasmtime::component::ResourceAny>,
    /// What the sandbox was made with, to make more of them for the shards of a shardable
    /// source.
    host: HostContext,
    dataset_path: Option<PathBuf>,
}

impl DatasetPlugin {
    pub(crate) fn new(
        loaded: Arc<Loaded>,
        host: HostContext,
        dataset_path: Option<&Path>,
    ) -> Result<DatasetPlugin> {
        let pre = loaded.pre.clone_dataset(&loaded.name)?;
        let (mut sandbox, guest_path) = Sandbox::new(loaded, host.clone(), dataset_path)?;
        let bindings = match pre {
            DatasetPre::Current(pre) => Guest::Current(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            DatasetPre::V0_2_0(pre) => Guest::V0_2_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            DatasetPre::V0_3_0(pre) => Guest::V0_3_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            DatasetPre::V0_4_1(pre) => Guest::V0_4_1(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            DatasetPre::V0_5_0(pre) => Guest::V0_5_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            DatasetPre::V0_6_0(pre) => Guest::V0_6_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
        };
        Ok(DatasetPlugin {
            sandbox,
            bindings,
            guest_path,
            open_source: None,
            host,
            dataset_path: dataset_path.map(Path::to_path_buf),
        })
    }

    /// The plugin's name as the user gave it.
    pub fn name(&self) -> &str {
        &self.sandbox.loaded.name
    }

    /// The guest path under which the dataset path is visible to the plugin.
    pub fn guest_path(&self) -> Option<&str> {
        self.guest_path.as_deref()
    }

    /// Name, version, description and options.
    pub fn describe(&mut self) -> Result<PluginInfo, PluginCallError> {
        Ok(self.description()?.info)
    }

    /// What the plugin says of itself: [`DatasetPlugin::describe`] and the rules the host
    /// applies for it.
    pub fn description(&mut self) -> Result<DatasetDescription, PluginCallError> {
        match &self.bindings {
            Guest::Current(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
            }
            Guest::V0_2_0(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_2_0::dataset_description_up)
            }
            Guest::V0_3_0(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_3_0::dataset_description_up)
            }
            Guest::V0_4_1(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_4_1::dataset_description_up)
            }
            Guest::V0_5_0(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_5_0::dataset_description_up)
            }
            Guest::V0_6_0(b) => {
                let guest = b.bench_plugin_dataset();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_6_0::dataset_description_up)
            }
        }
    }

    /// Opens the source with `options` and collects up to `num_requests` samples (requests,
    /// with their references when the dataset grades its answers), asking for them in
    /// batches until the source has given that many or reports it is exhausted.
    pub fn sample(
        &mut self,
        num_requests: u32,
        options: Vec<(String, String)>,
    ) -> Result<Vec<Sample>, PluginCallError> {
        self.sample_with_progress(num_requests, options, &mut |_, _| {})
    }

    /// [`DatasetPlugin::sample`], telling `progress` after each batch how many requests
    /// there are so far and how long sampling has taken (a few times a second at most: a
    /// batch is sized to take about a quarter of a second).
    pub fn sample_with_progress(
        &mut self,
        num_requests: u32,
        options: Vec<(String, String)>,
        progress: &mut dyn FnMut(u64, Duration),
    ) -> Result<Vec<Sample>, PluginCallError> {
        // A multi-turn source from an earlier call is done with.
        if let Some(old) = self.open_source.take() {
            self.sandbox
                .call_infallible("drop request-source", |store| old.resource_drop(store))?;
        }
        let description = self.description()?;
        let shards = shard_count(&description, num_requests, self.sandbox.loaded.max_shards);
        let started = Instant::now();
        if shards > 1 {
            return self.sample_sharded(num_requests, options, shards, started, progress);
        }
        let config = DatasetConfig {
            num_requests,
            path: self.guest_path.clone(),
            options,
            shard: None,
        };
        let (requests, handle) = self.drain(&config, num_requests, &mut |n| {
            progress(n, started.elapsed())
        })?;
        // A multi-turn source goes on during the run; any other is done.
        if description.multi_turn {
            self.open_source = Some(handle);
        } else {
            self.sandbox
                .call_infallible("drop request-source", |store| handle.resource_drop(store))?;
        }
        Ok(requests)
    }

    /// Makes `num_requests` with `count` instances of a shardable source, one shard each on
    /// its own thread (this instance makes shard 0), and interleaves their requests back
    /// into the order of the whole set.
    fn sample_sharded(
        &mut self,
        num_requests: u32,
        options: Vec<(String, String)>,
        count: u32,
        started: Instant,
        progress: &mut dyn FnMut(u64, Duration),
    ) -> Result<Vec<Sample>, PluginCallError> {
        let mut forks = Vec::with_capacity(count as usize - 1);
        for _ in 1..count {
            let fork = DatasetPlugin::new(
                self.sandbox.loaded.clone(),
                self.host.clone(),
                self.dataset_path.as_deref(),
            )
            .map_err(|e| {
                self.sandbox.error(
                    "instantiate",
                    CallFailure::Fault {
                        fault: Fault::Host(format!("{e:#}")),
                        output: String::new(),
                    },
                )
            })?;
            forks.push(fork);
        }
        let config = |index: u32| DatasetConfig {
            num_requests,
            path: self.guest_path.clone(),
            options: options.clone(),
            shard: Some(Shard { index, count }),
        };
        // Shard i holds the positions p < num_requests with p % count == i.
        let share = |index: u32| (num_requests - index).div_ceil(count);
        let made = AtomicU64::new(0);
        let configs: Vec<DatasetConfig> = (0..count).map(config).collect();
        let mut parts: Vec<Vec<Sample>> = std::thread::scope(|scope| {
            let workers: Vec<_> = forks
                .iter_mut()
                .zip(&configs[1..])
                .map(|(fork, config)| {
                    let made = &made;
                    let limit = share(config.shard.as_ref().map_or(0, |s| s.index));
                    scope.spawn(move || {
                        fork.drain_and_close(config, limit, &mut |n| {
                            made.fetch_add(n, Ordering::Relaxed);
                        })
                    })
                })
                .collect();
            let first = self.drain_and_close(&configs[0], share(0), &mut |n| {
                let total = made.fetch_add(n, Ordering::Relaxed) + n;
                progress(total, started.elapsed());
            });
            let mut parts = vec![first?];
            for worker in workers {
                parts.push(worker.join().expect("a shard's thread panicked")?);
            }
            Ok::<_, PluginCallError>(parts)
        })?;
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut requests = Vec::with_capacity(total);
        let mut iters: Vec<_> = parts.iter_mut().map(|p| p.drain(..)).collect();
        // A source with fewer requests than asked for ends at the first position a shard
        // lacks; a shard that made more than its share breaks the contract.
        'merge: for position in 0..num_requests as usize {
            match iters[position % count as usize].next() {
                Some(spec) => requests.push(spec),
                None => break 'merge,
            }
        }
        if let Some(extra) = iters.iter_mut().position(|it| it.next().is_some()) {
            return Err(self.sandbox.error(
                "next-batch",
                CallFailure::Contract(format!(
                    "shard {extra} of {count} made requests past the end of the whole set \
                     ({} made)",
                    requests.len()
                )),
            ));
        }
        progress(requests.len() as u64, started.elapsed());
        Ok(requests)
    }

    /// [`DatasetPlugin::drain`], then closes the source.
    fn drain_and_close(
        &mut self,
        config: &DatasetConfig,
        limit: u32,
        made: &mut dyn FnMut(u64),
    ) -> Result<Vec<Sample>, PluginCallError> {
        let (requests, handle) = self.drain(config, limit, made)?;
        self.sandbox
            .call_infallible("drop request-source", |store| handle.resource_drop(store))?;
        Ok(requests)
    }

    /// Opens a source with `config` and collects up to `limit` requests, asking for them in
    /// batches until the source has given that many or reports it is exhausted; tells
    /// `made` how many each batch added. Returns the requests and the open source.
    fn drain(
        &mut self,
        config: &DatasetConfig,
        limit: u32,
        made: &mut dyn FnMut(u64),
    ) -> Result<(Vec<Sample>, wasmtime::component::ResourceAny), PluginCallError> {
        let source = Source::of(&self.bindings);
        let handle = match &source {
            Source::Current(s) => self
                .sandbox
                .call("open", |store| s.call_open(store, config))?,
            Source::V0_2_0(s) => {
                let config = v0_2_0::dataset_config_down(config);
                self.sandbox
                    .call("open", |store| s.call_open(store, &config))?
            }
            Source::V0_3_0(s) => {
                let config = v0_3_0::dataset_config_down(config);
                self.sandbox
                    .call("open", |store| s.call_open(store, &config))?
            }
            Source::V0_4_1(s) => {
                let config = v0_4_1::dataset_config_down(config);
                self.sandbox
                    .call("open", |store| s.call_open(store, &config))?
            }
            Source::V0_5_0(s) => {
                let config = v0_5_0::dataset_config_down(config);
                self.sandbox
                    .call("open", |store| s.call_open(store, &config))?
            }
            Source::V0_6_0(s) => {
                let config = v0_6_0::dataset_config_down(config);
                self.sandbox
                    .call("open", |store| s.call_open(store, &config))?
            }
        };
        let mut requests = Vec::with_capacity(limit.min(1 << 16) as usize);
        let mut sizer = BatchSizer::new();
        loop {
            let remaining = limit - requests.len() as u32;
            if remaining == 0 {
                break;
            }
            let max = remaining.min(sizer.size);
            let call_started = Instant::now();
            // 0.3.0 to 0.5.0 share their request type (`v0_5_0`'s); 0.6.0's is the current
            // one. Before 0.7.0 a batch was requests alone: none is graded.
            let batch = match &source {
                Source::Current(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max)),
                Source::V0_2_0(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max))
                    .map(|batch| ungraded(batch.into_iter().map(v0_2_0::request_spec_up))),
                Source::V0_3_0(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max))
                    .map(|batch| ungraded(batch.into_iter().map(v0_5_0::request_spec_up))),
                Source::V0_4_1(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max))
                    .map(|batch| ungraded(batch.into_iter().map(v0_5_0::request_spec_up))),
                Source::V0_5_0(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max))
                    .map(|batch| ungraded(batch.into_iter().map(v0_5_0::request_spec_up))),
                Source::V0_6_0(s) => self
                    .sandbox
                    .call("next-batch", |store| s.call_next_batch(store, handle, max))
                    .map(ungraded),
            };
            let batch: Vec<Sample> = batch?;
            sizer.record(max, call_started.elapsed());
            if batch.is_empty() {
                break;
            }
            if batch.len() > max as usize {
                return Err(self.sandbox.error(
                    "next-batch",
                    CallFailure::Contract(format!(
                        "returned {} requests, more than the {max} asked for",
                        batch.len()
                    )),
                ));
            }
            made(batch.len() as u64);
            requests.extend(batch);
        }
        Ok((requests, handle))
    }

    /// The next turn of the conversation `turn` ended, from a multi-turn source that
    /// [`DatasetPlugin::sample`] opened; `None` when the conversation is over.
    pub fn next_turn(&mut self, turn: &TurnResult) -> Result<Option<RequestSpec>, PluginCallError> {
        let Some(handle) = self.open_source else {
            return Err(self.sandbox.error("next-turn", CallFailure::NotOpen));
        };
        match Source::of(&self.bindings) {
            Source::Current(s) => self
                .sandbox
                .call("next-turn", |store| s.call_next_turn(store, handle, turn)),
            Source::V0_3_0(s) => {
                let turn = v0_3_0::turn_result_down(turn);
                self.sandbox
                    .call("next-turn", |store| s.call_next_turn(store, handle, &turn))
                    .map(|next| next.map(v0_5_0::request_spec_up))
            }
            Source::V0_4_1(s) => {
                let turn = v0_4_1::turn_result_down(turn);
                self.sandbox
                    .call("next-turn", |store| s.call_next_turn(store, handle, &turn))
                    .map(|next| next.map(v0_5_0::request_spec_up))
            }
            Source::V0_5_0(s) => {
                let turn = v0_5_0::turn_result_down(turn);
                self.sandbox
                    .call("next-turn", |store| s.call_next_turn(store, handle, &turn))
                    .map(|next| next.map(v0_5_0::request_spec_up))
            }
            Source::V0_6_0(s) => {
                let turn = v0_6_0::turn_result_down(turn);
                self.sandbox
                    .call("next-turn", |store| s.call_next_turn(store, handle, &turn))
            }
            // 0.2.0 had no conversations: its sources are never multi-turn.
            Source::V0_2_0(_) => Err(self.sandbox.error("next-turn", CallFailure::NotOpen)),
        }
    }
}

impl DatasetPlugin {
    /// The dataset's verdict on `output`, the generated text of a completed request whose
    /// sample carried `reference`. Only a dataset built for 0.7.0 or later attaches
    /// references, so only such a dataset is asked; any other is a contract error.
    pub fn grade(&mut self, reference: &str, output: &str) -> Result<Verdict, PluginCallError> {
        match &self.bindings {
            Guest::Current(b) => {
                let dataset = b.bench_plugin_dataset();
                self.sandbox.call("grade", |store| {
                    dataset.call_grade(store, reference, output)
                })
            }
            _ => Err(self.sandbox.error(
                "grade",
                CallFailure::Contract(format!(
                    "a dataset built for bench:plugin@{} cannot grade answers (graders came \
                     with 0.7.0)",
                    self.sandbox.loaded.version
                )),
            )),
        }
    }
}

/// The pre-linked dataset component, by contract version.
pub(crate) enum DatasetPre {
    Current(super::bindings::current::dataset::DatasetPluginPre<super::host::StoreState>),
    V0_2_0(v0_2_0::dataset::DatasetPluginPre<super::host::StoreState>),
    V0_3_0(v0_3_0::dataset::DatasetPluginPre<super::host::StoreState>),
    V0_4_1(v0_4_1::dataset::DatasetPluginPre<super::host::StoreState>),
    V0_5_0(v0_5_0::dataset::DatasetPluginPre<super::host::StoreState>),
    V0_6_0(v0_6_0::dataset::DatasetPluginPre<super::host::StoreState>),
}

impl TypedPre {
    fn clone_dataset(&self, name: &str) -> Result<DatasetPre> {
        Ok(match self {
            TypedPre::Dataset(pre) => DatasetPre::Current(pre.clone()),
            TypedPre::DatasetV0_2_0(pre) => DatasetPre::V0_2_0(pre.clone()),
            TypedPre::DatasetV0_3_0(pre) => DatasetPre::V0_3_0(pre.clone()),
            TypedPre::DatasetV0_4_1(pre) => DatasetPre::V0_4_1(pre.clone()),
            TypedPre::DatasetV0_5_0(pre) => DatasetPre::V0_5_0(pre.clone()),
            TypedPre::DatasetV0_6_0(pre) => DatasetPre::V0_6_0(pre.clone()),
            _ => bail!("plugin '{name}' is not a dataset plugin"),
        })
    }
}

/// The `request-source` resource's functions, by contract version.
enum Source<'a> {
    Current(
        super::bindings::current::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>,
    ),
    V0_2_0(v0_2_0::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>),
    V0_3_0(v0_3_0::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>),
    V0_4_1(v0_4_1::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>),
    V0_5_0(v0_5_0::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>),
    V0_6_0(v0_6_0::dataset::exports::bench::plugin::dataset::GuestRequestSource<'a>),
}

impl<'a> Source<'a> {
    fn of(guest: &'a Guest) -> Source<'a> {
        match guest {
            Guest::Current(b) => Source::Current(b.bench_plugin_dataset().request_source()),
            Guest::V0_2_0(b) => Source::V0_2_0(b.bench_plugin_dataset().request_source()),
            Guest::V0_3_0(b) => Source::V0_3_0(b.bench_plugin_dataset().request_source()),
            Guest::V0_4_1(b) => Source::V0_4_1(b.bench_plugin_dataset().request_source()),
            Guest::V0_5_0(b) => Source::V0_5_0(b.bench_plugin_dataset().request_source()),
            Guest::V0_6_0(b) => Source::V0_6_0(b.bench_plugin_dataset().request_source()),
        }
    }
}

/// Samples without references: the batch of a source built before 0.7.0, when datasets
/// could not grade their answers.
fn ungraded(requests: impl IntoIterator<Item = RequestSpec>) -> Vec<Sample> {
    requests
        .into_iter()
        .map(|request| Sample {
            request,
            reference: None,
        })
        .collect()
}

/// How many shards to make `num_requests` in: up to `max_shards` (one per core by
/// default) for a shardable source, with at least [`MIN_SHARD_REQUESTS`] each; 1 (no
/// sharding) for any other.
fn shard_count(description: &DatasetDescription, num_requests: u32, max_shards: u32) -> u32 {
    if !description.shardable || description.multi_turn {
        return 1;
    }
    max_shards.min(num_requests / MIN_SHARD_REQUESTS).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_grow_twofold_at_most_and_shrink_to_the_call_target() {
        let mut sizer = BatchSizer::new();
        assert_eq!(sizer.size, FIRST_BATCH);
        // Fast calls: doubling, up to the cap.
        for _ in 0..20 {
            let asked = sizer.size;
            sizer.record(asked, Duration::from_millis(1));
            assert!(sizer.size <= (asked * 2).min(MAX_BATCH));
        }
        assert_eq!(sizer.size, MAX_BATCH);
        // A slow machine: 4,096 requests took 8.192 s, so 2 ms each; 250 ms fits 125.
        sizer.record(MAX_BATCH, Duration::from_millis(8192));
        assert_eq!(sizer.size, 125);
        // One request took longer than the target: one at a time.
        sizer.record(1, Duration::from_secs(3));
        assert_eq!(sizer.size, 1);
    }
}
