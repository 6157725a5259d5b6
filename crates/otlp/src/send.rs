//! OTLP/HTTP with protobuf bodies: `POST {endpoint}/v1/traces` and `/v1/metrics`, as the
//! OpenTelemetry exporters send to `OTEL_EXPORTER_OTLP_ENDPOINT`. A throttled or
//! unavailable collector (429, 502, 503, 504, or no connection) is tried again, after its
//! `Retry-After` where it gives one; what it rejected (OTLP's partial success) is counted.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

/// How often one export request is tried in all.
const ATTEMPTS: u32 = 3;
/// The longest wait before trying again, whatever `Retry-After` asks.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why an export did not arrive.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("--otlp-endpoint {0:?} is not an http:// or https:// URL")]
    Endpoint(String),
    #[error("--otlp-header {0:?} is not a valid HTTP header")]
    Header(String),
    #[error("{url}: the collector answered {status}: {body}")]
    Status {
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("{url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// What arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    pub spans: usize,
    /// Spans the collector said it rejected (OTLP's partial success).
    pub rejected_spans: i64,
    pub metrics: usize,
    /// Data points the collector said it rejected.
    pub rejected_data_points: i64,
}

/// Sends to one collector.
#[derive(Debug, Clone)]
pub struct Exporter {
    client: reqwest::Client,
    traces_url: String,
    metrics_url: String,
}

impl Exporter {
    /// An exporter to the collector at `endpoint` (the base URL, such as
    /// `http://127.0.0.1:4318`), with `headers` on every request (a collector's API key)
    /// and `timeout` for each.
    pub fn new(
        endpoint: &str,
        headers: &[(String, String)],
        timeout: Duration,
    ) -> Result<Exporter, ExportError> {
        let base = endpoint.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://"))
            || reqwest::Url::parse(base).is_err()
        {
            return Err(ExportError::Endpoint(endpoint.to_owned()));
        }
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let bad = || ExportError::Header(format!("{name}={value}"));
            map.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad())?,
                reqwest::header::HeaderValue::from_str(value).map_err(|_| bad())?,
            );
        }
        map.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/x-protobuf"),
        );
        let client = reqwest::Client::builder()
            .default_headers(map)
            .timeout(timeout)
            .build()
            .map_err(ExportError::Client)?;
        Ok(Exporter {
            client,
            traces_url: format!("{base}/v1/traces"),
            metrics_url: format!("{base}/v1/metrics"),
        })
    }

    /// Sends the spans' export requests, then the metrics'.
    pub async fn export(
        &self,
        traces: &[ExportTraceServiceRequest],
        metrics: &ExportMetricsServiceRequest,
    ) -> Result<Sent, ExportError> {
        let mut sent = Sent::default();
        for request in traces {
            let body = self.post(&self.traces_url, request.encode_to_vec()).await?;
            sent.spans += request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .map(|s| s.spans.len())
                .sum::<usize>();
            if let Some(partial) = ExportTraceServiceResponse::decode(body.as_slice())
                .ok()
                .and_then(|r| r.partial_success)
            {
                sent.rejected_spans += partial.rejected_spans;
            }
        }
        let body = self
            .post(&self.metrics_url, metrics.encode_to_vec())
            .await?;
        sent.metrics = metrics
            .resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .map(|s| s.metrics.len())
            .sum();
        if let Some(partial) = ExportMetricsServiceResponse::decode(body.as_slice())
            .ok()
            .and_then(|r| r.partial_success)
        {
            sent.rejected_data_points += partial.rejected_data_points;
        }
        Ok(sent)
    }

    /// One POST, tried again while the collector is throttled or unavailable; the
    /// response's body.
    async fn post(&self, url: &str, body: Vec<u8>) -> Result<Vec<u8>, ExportError> {
        let mut attempt = 1;
        loop {
            let retry = match self.client.post(url).body(body.clone()).send().await {
                Ok(response) if response.status().is_success() => {
                    return response
                        .bytes()
                        .await
                        .map(|b| b.to_vec())
                        .map_err(|source| ExportError::Transport {
                            url: url.to_owned(),
                            source,
                        });
                }
                Ok(response) => {
                    let status = response.status();
                    let wait = retry_after(&response);
                    let error = ExportError::Status {
                        url: url.to_owned(),
                        status,
                        body: response.text().await.unwrap_or_default(),
                    };
                    match status.as_u16() {
                        429 | 502 | 503 | 504 => (error, wait),
                        _ => return Err(error),
                    }
                }
                Err(source) if source.is_connect() || source.is_timeout() => (
                    ExportError::Transport {
                        url: url.to_owned(),
                        source,
                    },
                    None,
                ),
                Err(source) => {
                    return Err(ExportError::Transport {
                        url: url.to_owned(),
                        source,
                    });
                }
            };
            if attempt == ATTEMPTS {
                return Err(retry.0);
            }
            let backoff = Duration::from_millis(250 << attempt);
            tokio::time::sleep(retry.1.unwrap_or(backoff).min(MAX_BACKOFF)).await;
            attempt += 1;
        }
    }
}

/// A response's `Retry-After` in seconds, where it has one.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_a_base_url() {
        let exporter =
            Exporter::new("http://127.0.0.1:4318/", &[], Duration::from_secs(1)).unwrap();
        assert_eq!(exporter.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(exporter.metrics_url, "http://127.0.0.1:4318/v1/metrics");
        assert!(matches!(
            Exporter::new("127.0.0.1:4318", &[], Duration::from_secs(1)),
            Err(ExportError::Endpoint(_))
        ));
        let bad = [("x y".to_owned(), "v".to_owned())];
        assert!(matches!(
            Exporter::new("http://h", &bad, Duration::from_secs(1)),
            Err(ExportError::Header(_))
        ));
    }
}
