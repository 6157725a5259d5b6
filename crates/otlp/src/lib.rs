//! `--otlp-endpoint`: a finished run sent to an OpenTelemetry collector over OTLP/HTTP
//! (protobuf), in the shapes the observability stack a team already runs understands:
//!
//! - every request sent, as one span of kind CLIENT named `{operation} {model}` after the
//!   GenAI semantic conventions ([`spans`]): `gen_ai.*` attributes for the operation,
//!   provider, model, token counts and time to first chunk, `error.type` and an error
//!   status for a failed request, and the server's own timing of it where the response
//!   carried it (`bench.server.*`);
//! - the conventions' GenAI client metrics over the run ([`metrics`]): histograms of the
//!   operation duration, token usage, time to first chunk and time per output chunk, with
//!   the bucket boundaries the conventions recommend;
//! - every figure of the run's result file as a gauge `bench.<key>` of the same value, so a
//!   dashboard shows the numbers the result file holds, not a re-derivation of them.
//!
//! Why after the run, from its records, rather than live through the SDK: the spans keep
//! the times the host took when the bytes arrived, nothing is added to the per-request
//! path, and no span is dropped (the SDK's batching processor drops what overflows its
//! queue, 2,048 spans by default, which a load test overflows in a second). The live view
//! of a run is `--metrics-port`'s.

mod convention;
pub mod metrics;
mod send;
pub mod spans;

pub use convention::{operation_name, provider_name};
pub use send::{ExportError, Exporter, Sent};

use bench_record::RequestRecord;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};

/// A run as OTLP describes it: what was measured, against which servers, and when.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    /// The resource's attributes beside `service.name` (`bench`) and `service.version`: the
    /// run's id, label and backend, so that a collector tells runs apart.
    pub resource: Vec<KeyValue>,
    /// `gen_ai.operation.name` ([`operation_name`]).
    pub operation: &'a str,
    /// `gen_ai.provider.name` ([`provider_name`]).
    pub provider: &'a str,
    /// `gen_ai.request.model`: the name the requests asked for.
    pub model: &'a str,
    /// `server.address` and `server.port` of each endpoint, indexed by the records'
    /// `endpoint`; `None` where the run had no server (the native engine).
    pub servers: &'a [Option<Server>],
    /// The wall clock at the run's start, in nanoseconds since the Unix epoch: the records'
    /// times are seconds after it.
    pub origin_unix_nanos: u64,
    /// The run's length in seconds: the metrics' data points are taken at its end.
    pub duration_s: f64,
}

/// Where a request went, as the conventions' `server.address` and `server.port` say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub address: String,
    pub port: u16,
}

/// One request sent, with its token counts as the run's result counts them.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub record: &'a RequestRecord,
    /// The prompt's tokens (the result's `input_lens` entry).
    pub input_tokens: u64,
    /// The output's tokens (the result's `output_lens` entry; 0 for a failed request).
    pub output_tokens: u64,
}

impl Run<'_> {
    /// `t` seconds after the run's start, in nanoseconds since the Unix epoch.
    fn at(&self, t: f64) -> u64 {
        self.origin_unix_nanos + seconds_to_nanos(t)
    }

    /// The run's end, in nanoseconds since the Unix epoch.
    fn end(&self) -> u64 {
        self.at(self.duration_s)
    }

    /// The attributes every span and data point of the run carries.
    fn common_attributes(&self) -> Vec<KeyValue> {
        vec![
            string("gen_ai.operation.name", self.operation),
            string("gen_ai.provider.name", self.provider),
            string("gen_ai.request.model", self.model),
        ]
    }

    /// `server.address` and `server.port` of the endpoint a record went to.
    fn server_attributes(&self, endpoint: u32) -> Vec<KeyValue> {
        match self.servers.get(endpoint as usize) {
            Some(Some(server)) => vec![
                string("server.address", &server.address),
                int("server.port", i64::from(server.port)),
            ],
            _ => Vec::new(),
        }
    }
}

/// `completed`, `failed` or `cancelled` (on purpose, `--request-cancellation-rate`): the
/// `bench.outcome` of spans and of `bench.requests`.
fn outcome(record: &RequestRecord) -> &'static str {
    if record.succeeded() {
        "completed"
    } else if record.cancelled() {
        "cancelled"
    } else {
        "failed"
    }
}

/// A non-negative number of seconds in whole nanoseconds (negative and NaN are 0).
fn seconds_to_nanos(seconds: f64) -> u64 {
    if seconds > 0.0 {
        (seconds * 1e9).round() as u64
    } else {
        0
    }
}

/// An attribute with a string value.
pub fn string(key: &str, value: &str) -> KeyValue {
    attribute(key, any_value::Value::StringValue(value.to_owned()))
}

/// An attribute with an integer value.
pub fn int(key: &str, value: i64) -> KeyValue {
    attribute(key, any_value::Value::IntValue(value))
}

/// An attribute with a floating-point value.
pub fn double(key: &str, value: f64) -> KeyValue {
    attribute(key, any_value::Value::DoubleValue(value))
}

/// An attribute with a boolean value.
pub fn boolean(key: &str, value: bool) -> KeyValue {
    attribute(key, any_value::Value::BoolValue(value))
}

fn attribute(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..KeyValue::default()
    }
}

/// The instrumentation scope of everything bench sends.
fn scope() -> opentelemetry_proto::tonic::common::v1::InstrumentationScope {
    opentelemetry_proto::tonic::common::v1::InstrumentationScope {
        name: "bench".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..Default::default()
    }
}

/// The resource everything of the run is sent under: `service.name` `bench`, its version,
/// and the run's own attributes.
fn resource(run: &Run) -> opentelemetry_proto::tonic::resource::v1::Resource {
    let mut attributes = vec![
        string("service.name", "bench"),
        string("service.version", env!("CARGO_PKG_VERSION")),
    ];
    attributes.extend(run.resource.iter().cloned());
    opentelemetry_proto::tonic::resource::v1::Resource {
        attributes,
        ..Default::default()
    }
}
