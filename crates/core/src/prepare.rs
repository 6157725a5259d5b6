//! Requests ready to send: each body built by the backend plugin, with the headers the host
//! adds. Done before the clock starts (and, for a conversation's next turn, between its
//! turns), never on the per-chunk path.

use anyhow::{Context, Result};
use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::client::PreparedRequest;
use crate::client::structured::OutputChecks;
use crate::runtime::{BackendPlugin, RequestSpec};

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
    let mut checks = OutputChecks::default();
    specs
        .iter()
        .enumerate()
        .map(|(index, spec)| prepare_one(backend, index, spec, host, &mut checks))
        .collect()
}

/// Builds request `index` of the workload with the backend plugin (also during a run, for
/// a conversation's next turn), and compiles its output constraint into `checks`.
pub fn prepare_one(
    backend: &mut BackendPlugin,
    index: usize,
    spec: &RequestSpec,
    host: &HostHeaders,
    checks: &mut OutputChecks,
) -> Result<PreparedRequest> {
    let request_id = spec.request_id.clone().unwrap_or_default();
    let check = spec
        .output_constraint
        .as_ref()
        .map(|c| checks.compile(c))
        .transpose()
        .with_context(|| format!("request {index} ({request_id})"))?;
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
    Ok(PreparedRequest {
        index,
        request_id,
        method,
        headers,
        body: Bytes::from(http.body),
        prompt_len: spec.prompt_len,
        expected_output_len: spec.expected_output_len,
        session: spec.session.clone(),
        check,
    })
}

fn insert(headers: &mut HeaderMap, k: &str, v: &str) -> Result<()> {
    let name = HeaderName::from_bytes(k.as_bytes())
        .with_context(|| format!("invalid header name {k:?}"))?;
    let value =
        HeaderValue::from_str(v).with_context(|| format!("invalid value for header {k}"))?;
    headers.insert(name, value);
    Ok(())
}
