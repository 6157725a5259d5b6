//! `--otlp-endpoint`: each finished run sent to an OpenTelemetry collector (`bench_otlp`:
//! its requests as GenAI spans, its figures as metrics). The result file is saved before
//! and does not depend on it: a collector that cannot be reached costs a warning that says
//! so, never the run's result or its exit code.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use bench_otlp::{Exporter, Request, Run, Server};

use crate::benchmark::{Outcome, ServeConfig};

/// `bench serve`'s flags of the OTLP export (under "Observability").
#[derive(clap::Args, Debug, Clone, serde::Serialize)]
pub struct OtlpArgs {
    /// Once the run ends, send it to the OpenTelemetry collector at URL over OTLP/HTTP
    /// (protobuf; URL is the base, as OTEL_EXPORTER_OTLP_ENDPOINT: `/v1/traces` and
    /// `/v1/metrics` are added): each request as a span after the GenAI semantic
    /// conventions (`chat MODEL`, its token counts, time to first chunk, error type, and
    /// the server's own timing where known), the conventions' client histograms
    /// (duration, token usage, time to first chunk, time per output chunk), and every
    /// figure of the result as a gauge `bench.<key>`. Example: `--otlp-endpoint
    /// http://127.0.0.1:4318`.
    #[arg(long, value_name = "URL", help_heading = "Observability")]
    pub otlp_endpoint: Option<String>,

    /// A header on every OTLP request, KEY=VALUE (repeatable): a collector's API key, say.
    /// Kept out of the result.
    #[arg(
        long,
        value_name = "KEY=VALUE",
        requires = "otlp_endpoint",
        help_heading = "Observability"
    )]
    pub otlp_header: Vec<String>,

    /// How long each OTLP request may take before it is tried again (3 tries in all).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "10",
        value_parser = super::args::parse_interval,
        requires = "otlp_endpoint",
        help_heading = "Observability"
    )]
    #[serde(serialize_with = "super::args::seconds")]
    pub otlp_timeout: Duration,
}

/// The collector to send to, as the flags name it.
pub(super) struct Otlp {
    exporter: Exporter,
    endpoint: String,
}

/// The exporter the flags ask for (`None` without `--otlp-endpoint`), checked before the run
/// so that a bad URL or header fails before anything is sent.
pub(super) fn exporter(args: &OtlpArgs) -> Result<Option<Otlp>> {
    let Some(endpoint) = &args.otlp_endpoint else {
        return Ok(None);
    };
    let headers = args
        .otlp_header
        .iter()
        .map(|h| {
            h.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .with_context(|| format!("--otlp-header {h:?}: expected KEY=VALUE"))
        })
        .collect::<Result<Vec<_>>>()?;
    let exporter = Exporter::new(endpoint, &headers, args.otlp_timeout)?;
    Ok(Some(Otlp {
        exporter,
        endpoint: endpoint.clone(),
    }))
}

/// Sends `outcome`'s run to the collector, and says on standard output what arrived (or,
/// as a warning, why it did not).
pub(super) fn export(otlp: Option<&Otlp>, config: &ServeConfig, outcome: &Outcome) {
    let Some(otlp) = otlp else {
        return;
    };
    match send(otlp, config, outcome) {
        Ok(sent) => {
            println!(
                "OpenTelemetry: {} spans and {} metrics sent to {}",
                sent.spans, sent.metrics, otlp.endpoint
            );
            if sent.rejected_spans > 0 || sent.rejected_data_points > 0 {
                eprintln!(
                    "WARNING: --otlp-endpoint: the collector rejected {} spans and {} data \
                     points",
                    sent.rejected_spans, sent.rejected_data_points
                );
            }
        }
        Err(e) => eprintln!(
            "WARNING: --otlp-endpoint: the run was not (or not all) sent: {e:#}; the result \
             file holds it"
        ),
    }
}

fn send(otlp: &Otlp, config: &ServeConfig, outcome: &Outcome) -> Result<bench_otlp::Sent> {
    let per_request = &outcome.metrics.per_request;
    let requests: Vec<Request> = per_request
        .records
        .iter()
        .zip(per_request.input_lens())
        .zip(&per_request.output_lens)
        .map(|((record, input_tokens), &output_tokens)| Request {
            record,
            input_tokens,
            output_tokens,
        })
        .collect();
    let servers: Vec<Option<Server>> = match config.native {
        Some(_) => Vec::new(),
        None => config.http.base_urls.iter().map(|u| server(u)).collect(),
    };
    let pooling = per_request
        .records
        .iter()
        .any(|r| r.pooled_results.is_some());
    let backend = outcome.run.backend.as_str();
    let model = config
        .served_model_name
        .as_deref()
        .unwrap_or(&outcome.run.model_id);
    let mut resource = vec![
        bench_otlp::string("bench.run.id", &format!("{:032x}", rand::random::<u128>())),
        bench_otlp::string("bench.backend", backend),
        bench_otlp::string("bench.run.started_at", &outcome.run.started_at.to_rfc3339()),
    ];
    if let Some(label) = &outcome.run.label {
        resource.push(bench_otlp::string("bench.label", label));
    }
    if let Some(path) = &outcome.saved {
        resource.push(bench_otlp::string(
            "bench.result",
            &path.display().to_string(),
        ));
    }
    let run = Run {
        resource,
        operation: bench_otlp::operation_name(backend, pooling),
        provider: bench_otlp::provider_name(backend),
        model,
        servers: &servers,
        origin_unix_nanos: origin_unix_nanos(outcome),
        duration_s: outcome.metrics.duration_s,
    };
    let traces = bench_otlp::spans::export_requests(&run, &requests);
    let metrics = bench_otlp::metrics::export_request(&run, &requests, &figures(outcome)?);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime for the OTLP export")?
        .block_on(otlp.exporter.export(&traces, &metrics))
        .map_err(Into::into)
}

/// `server.address` and `server.port` of a base URL.
fn server(url: &str) -> Option<Server> {
    let url = reqwest::Url::parse(url).ok()?;
    Some(Server {
        address: url.host_str()?.to_owned(),
        port: url.port_or_known_default()?,
    })
}

/// The wall clock at the run's start, in nanoseconds since the Unix epoch: the records'
/// times are seconds after the monotonic clock's reading then (`clock_origin_s`), so the
/// start lies as far before now on the wall clock as that reading lies before the
/// monotonic clock's now. Without that reading, the time the run was announced.
fn origin_unix_nanos(outcome: &Outcome) -> u64 {
    let per_request = &outcome.metrics.per_request;
    let since = crate::client::cpu::monotonic().as_secs_f64() - per_request.clock_origin_s;
    let start = match Duration::try_from_secs_f64(since) {
        Ok(ago) if per_request.clock_origin_s > 0.0 => SystemTime::now() - ago,
        _ => SystemTime::from(outcome.run.started_at),
    };
    start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The result's numeric figures by key, as the result file holds them.
fn figures(outcome: &Outcome) -> Result<Vec<(String, f64)>> {
    let doc = crate::report::result_doc(&outcome.metrics, &outcome.side, &outcome.run, false);
    let serde_json::Value::Object(doc) =
        serde_json::to_value(&doc).context("the run's result as JSON")?
    else {
        anyhow::bail!("a result did not serialise to an object");
    };
    Ok(doc
        .into_iter()
        .filter_map(|(key, value)| Some((key, value.as_f64()?)))
        .collect())
}
