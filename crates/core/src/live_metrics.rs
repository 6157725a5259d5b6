//! `--metrics-port`: the run's figures so far ([`crate::client::live`]) served as
//! Prometheus text on `GET /metrics` while the run goes on, for the Prometheus (or any
//! OpenMetrics scraper) a team already runs.
//!
//! The text is made at each scrape, from a snapshot, by the `prometheus-client` crate's
//! encoder (a registry built for the scrape: scrapes come every few seconds, so nothing is
//! kept between them and the run's hot paths never touch it). The names follow
//! Prometheus' conventions (`bench_` prefix, seconds, `_total` counters); the latencies
//! are gauges of quantiles labelled `quantile`, as a summary's are, read off the live
//! HdrHistograms (three significant digits).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use anyhow::{Context, Result};
use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::client::live::{LiveMetric, LiveSnapshot, LiveStats};

/// The quantiles each latency is served at.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

/// What `/metrics` answers with (OpenMetrics text, which Prometheus reads).
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Serves `/metrics` on `addr` from `live` on the current tokio runtime until the task is
/// aborted (the run's end). Binding happens here, so a port in use is an error before the
/// run starts; the address bound (port 0 picks one) is returned with the task.
pub async fn serve(
    addr: SocketAddr,
    live: Arc<LiveStats>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics-port: binding {addr}"))?;
    let bound = listener
        .local_addr()
        .context("--metrics-port: the bound address")?;
    let start = Instant::now();
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let live = live.clone();
            async move {
                let text = render(&live.snapshot(), start.elapsed().as_secs_f64());
                ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
            }
        }),
    );
    let task = tokio::spawn(async move {
        // Ends only with an I/O error of the listener; the run goes on without it.
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("--metrics-port: the /metrics server stopped: {e}");
        }
    });
    Ok((bound, task))
}

/// The snapshot as OpenMetrics text, `elapsed` seconds into the run.
pub fn render(s: &LiveSnapshot, elapsed: f64) -> String {
    let mut registry = Registry::with_prefix("bench");
    let counter = |registry: &mut Registry, name: &str, help: &str, value: u64| {
        let c: Counter<u64> = Counter::default();
        c.inc_by(value);
        registry.register(name, help, c);
    };
    let gauge = |registry: &mut Registry, name: &str, help: &str, value: f64| {
        let g: Gauge<f64, AtomicU64> = Gauge::default();
        g.set(value);
        registry.register(name, help, g);
    };
    counter(
        &mut registry,
        "requests_sent",
        "Requests sent so far",
        s.sent,
    );
    counter(
        &mut registry,
        "requests_completed",
        "Requests answered successfully",
        s.completed,
    );
    counter(
        &mut registry,
        "requests_failed",
        "Requests that failed",
        s.failed,
    );
    counter(
        &mut registry,
        "requests_cancelled",
        "Requests the client cancelled on purpose",
        s.cancelled,
    );
    counter(
        &mut registry,
        "output_tokens",
        "Output tokens of the completed requests (the server's usage, else one per chunk)",
        s.output_tokens,
    );
    let done = s.completed + s.failed + s.cancelled;
    gauge(
        &mut registry,
        "requests_in_flight",
        "Requests sent and not yet answered",
        s.sent.saturating_sub(done) as f64,
    );
    gauge(
        &mut registry,
        "run_elapsed_seconds",
        "Seconds since the measured run started",
        elapsed,
    );
    let failures = Family::<Vec<(String, String)>, Counter<u64>>::default();
    for (kind, n) in &s.failures_by_kind {
        failures
            .get_or_create(&vec![("kind".to_owned(), kind.to_string())])
            .inc_by(*n);
    }
    registry.register("request_failures", "Failed requests by kind", failures);
    for metric in LiveMetric::ALL {
        let h = s.histogram(metric);
        let quantiles = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
        if !h.is_empty() {
            for q in QUANTILES {
                quantiles
                    .get_or_create(&vec![("quantile".to_owned(), q.to_string())])
                    .set(h.value_at_quantile(q) as f64 / 1e6);
            }
        }
        let name = metric.name();
        registry.register(
            format!("{name}_seconds"),
            format!("The {} so far, by quantile", metric_title(metric)),
            quantiles,
        );
        gauge(
            &mut registry,
            &format!("{name}_mean_seconds"),
            &format!("The mean {} so far", metric_title(metric)),
            if h.is_empty() { 0.0 } else { h.mean() / 1e6 },
        );
        counter(
            &mut registry,
            &format!("{name}_observations"),
            &format!("Values of the {} so far", metric_title(metric)),
            h.len(),
        );
    }
    let lag = s.schedule_lag();
    let lag_quantiles = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
    if !lag.is_empty() {
        for q in QUANTILES {
            lag_quantiles
                .get_or_create(&vec![("quantile".to_owned(), q.to_string())])
                .set(lag.value_at_quantile(q) as f64 / 1e6);
        }
    }
    registry.register(
        "schedule_lag_seconds",
        "How late requests were sent against their schedule so far, by quantile",
        lag_quantiles,
    );
    gauge(
        &mut registry,
        "schedule_lag_max_seconds",
        "The latest a request was sent against its schedule so far",
        lag.max() as f64 / 1e6,
    );
    let server = Family::<Vec<(String, String)>, Gauge<f64, AtomicU64>>::default();
    for (source, gauges) in &s.server_gauges {
        for (name, value) in gauges {
            server
                .get_or_create(&vec![
                    ("server".to_owned(), source.clone()),
                    ("name".to_owned(), (*name).to_owned()),
                ])
                .set(*value);
        }
    }
    registry.register(
        "server_gauge",
        "The server's own gauges at bench's latest read of its /metrics \
         (--server-metrics-interval)",
        server,
    );
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

fn metric_title(metric: LiveMetric) -> &'static str {
    match metric {
        LiveMetric::Ttft => "time to first token",
        LiveMetric::Tpot => "time per output token",
        LiveMetric::Itl => "inter-token latency",
        LiveMetric::E2el => "end-to-end latency",
    }
}
