//! The dataset adapter: opens a plugin's request source and drains it into memory before
//! the run starts.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Result, bail};

use super::bindings::dataset::DatasetPlugin as Bindings;
use super::{DatasetConfig, HostContext, Loaded, PluginInfo, RequestSpec, Sandbox, TypedPre};

/// How many requests the host asks for per `next-batch` crossing.
const BATCH: u32 = 256;

/// An instantiated dataset plugin in its own sandbox.
pub struct DatasetPlugin {
    sandbox: Sandbox,
    bindings: Bindings,
    /// The guest path of `--dataset-path`, passed in the dataset config.
    guest_path: Option<String>,
}

impl DatasetPlugin {
    pub(crate) fn new(
        loaded: Arc<Loaded>,
        host: HostContext,
        dataset_path: Option<&Path>,
    ) -> Result<DatasetPlugin> {
        let TypedPre::Dataset(pre) = &loaded.pre else {
            bail!("plugin '{}' is not a dataset plugin", loaded.name);
        };
        let pre = pre.clone();
        let (mut sandbox, guest_path) = Sandbox::new(loaded, host, dataset_path)?;
        let bindings = sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?;
        Ok(DatasetPlugin {
            sandbox,
            bindings,
            guest_path,
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
    pub fn describe(&mut self) -> Result<PluginInfo> {
        let guest = self.bindings.bench_plugin_dataset();
        self.sandbox
            .call_infallible("describe", |store| guest.call_describe(store))
    }

    /// Opens the source with `options` and collects up to `num_requests` requests, asking
    /// for them in batches until the source has given that many or reports it is exhausted.
    pub fn sample(
        &mut self,
        num_requests: u32,
        options: Vec<(String, String)>,
    ) -> Result<Vec<RequestSpec>> {
        let config = DatasetConfig {
            num_requests,
            path: self.guest_path.clone(),
            options,
        };
        let guest = self.bindings.bench_plugin_dataset();
        let source = guest.request_source();
        let handle = self
            .sandbox
            .call("open", |store| source.call_open(store, &config))?;
        let mut requests = Vec::with_capacity(num_requests.min(1 << 16) as usize);
        let drained = loop {
            let remaining = num_requests - requests.len() as u32;
            if remaining == 0 {
                break Ok(());
            }
            let max = remaining.min(BATCH);
            let batch = match self.sandbox.call("next-batch", |store| {
                source.call_next_batch(store, handle, max)
            }) {
                Ok(batch) => batch,
                Err(e) => break Err(e),
            };
            if batch.is_empty() {
                break Ok(());
            }
            if batch.len() > max as usize {
                break Err(anyhow::anyhow!(
                    "plugin '{}': next-batch returned {} requests, more than the {max} asked for",
                    self.name(),
                    batch.len()
                ));
            }
            requests.extend(batch);
        };
        drained?;
        self.sandbox
            .call_infallible("drop request-source", |store| handle.resource_drop(store))?;
        Ok(requests)
    }
}
