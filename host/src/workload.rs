//! The workload: sampled from a dataset plugin (the one place that samples, for every
//! subcommand), then turned into requests ready to send: every body is built by the
//! backend plugin here, before the clock starts, so no plugin code runs on the send path.

use std::path::Path;

use anyhow::{Context, Result};
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::client::PreparedRequest;
use crate::runtime::{BackendPlugin, HostContext, PluginRef, RequestSpec, Runtime};

/// What to sample, resolved from the command line.
pub struct SampleConfig<'a> {
    pub dataset: &'a PluginRef,
    /// `--dataset-path`.
    pub dataset_path: Option<&'a Path>,
    pub num_prompts: u32,
    /// Show a progress bar when preparation takes more than a second.
    pub progress: bool,
}

/// A sampled workload and the name the dataset plugin gave itself.
pub struct Sampled {
    pub dataset_name: String,
    pub specs: Vec<RequestSpec>,
}

/// Samples `config.num_prompts` requests; `options` gives the plugin's options once its
/// name is known (the options a user gave are checked against the plugin that runs).
pub fn sample(
    runtime: &Runtime,
    host: HostContext,
    config: &SampleConfig,
    options: impl FnOnce(&str) -> Result<Vec<(String, String)>>,
) -> Result<Sampled> {
    let mut dataset = runtime.load_dataset(config.dataset, host, config.dataset_path)?;
    let dataset_name = dataset.describe()?.name;
    let specs = dataset.sample(config.num_prompts, options(&dataset_name)?, config.progress)?;
    Ok(Sampled {
        dataset_name,
        specs,
    })
}

/// Gives every request without an id vLLM's `<prefix><index>`.
pub fn assign_request_ids(specs: &mut [RequestSpec], prefix: &str) {
    for (i, spec) in specs.iter_mut().enumerate() {
        if spec.request_id.is_none() {
            spec.request_id = Some(format!("{prefix}{i}"));
        }
    }
}

/// Headers the host adds to every request: `Authorization` from `OPENAI_API_KEY` (as
/// vLLM does), then the user's `--header` values, which override the plugin's.
#[derive(Debug, Clone, Default)]
pub struct HostHeaders {
    pub api_key: Option<String>,
    pub extra: Vec<(String, String)>,
}

/// Builds every request with the backend plugin.
pub fn prepare(
    backend: &mut BackendPlugin,
    specs: &[RequestSpec],
    host: &HostHeaders,
) -> Result<Vec<PreparedRequest>> {
    let mut out = Vec::with_capacity(specs.len());
    for (index, spec) in specs.iter().enumerate() {
        let request_id = spec.request_id.clone().unwrap_or_default();
        let http = backend
            .build_request(spec)
            .with_context(|| format!("building request {index} ({request_id})"))?;
        let method = reqwest::Method::from_bytes(http.method.as_bytes())
            .with_context(|| format!("request {index}: invalid HTTP method {:?}", http.method))?;
        // Sized for these headers: a default map has room for six, and 100,000 requests
        // held for the whole run would carry about 30 MB of empty slots.
        let count = usize::from(host.api_key.is_some()) + http.headers.len() + host.extra.len();
        let mut headers = HeaderMap::with_capacity(count);
        if let Some(key) = &host.api_key {
            insert(&mut headers, "authorization", &format!("Bearer {key}"))?;
        }
        let mut request_id_header = None;
        for (k, v) in &http.headers {
            insert(&mut headers, k, v)
                .with_context(|| format!("request {index}: header from the backend plugin"))?;
            if k.eq_ignore_ascii_case("x-request-id") {
                request_id_header = Some(v.clone());
            }
        }
        for (k, v) in &host.extra {
            insert(&mut headers, k, v).with_context(|| format!("--header {k}={v}"))?;
        }
        // vLLM: request ids win over --header values.
        if let Some(v) = request_id_header {
            insert(&mut headers, "x-request-id", &v)?;
        }
        out.push(PreparedRequest {
            index,
            request_id,
            method,
            headers,
            body: Bytes::from(http.body),
            prompt_len: spec.prompt_len,
            expected_output_len: spec.expected_output_len,
        });
    }
    Ok(out)
}

fn insert(headers: &mut HeaderMap, k: &str, v: &str) -> Result<()> {
    let name = HeaderName::from_bytes(k.as_bytes())
        .with_context(|| format!("invalid header name {k:?}"))?;
    let value =
        HeaderValue::from_str(v).with_context(|| format!("invalid value for header {k}"))?;
    headers.insert(name, value);
    Ok(())
}
