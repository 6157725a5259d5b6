//! Each request sent, as one OpenTelemetry span of kind CLIENT after the GenAI semantic
//! conventions: named `{gen_ai.operation.name} {gen_ai.request.model}`, from the request's
//! send to its last output chunk, each in a trace of its own (a run is many independent
//! calls, not one operation), all under the run's resource (`bench.run.id`).
//!
//! Attributes, beside the operation, provider and model every span has:
//! - `gen_ai.request.max_tokens`, `gen_ai.usage.input_tokens` and (completed requests)
//!   `gen_ai.usage.output_tokens`, as the result counts them (`input_lens`, `output_lens`);
//!   `gen_ai.usage.cache_read.input_tokens` where the server said how many prompt tokens
//!   its prefix cache served;
//! - `gen_ai.response.time_to_first_chunk` (seconds; TTFT) when output arrived;
//! - `server.address`, `server.port` of the endpoint it went to;
//! - `error.type` (the failure's kind, as the result names it) and an error status with the
//!   failure's message for a failed request;
//! - bench's own, under `bench.`: the request's index in the workload and id (the
//!   `X-Request-Id` the server saw), its outcome (`completed`, `failed`, `cancelled`), the
//!   output chunks, the time it waited for a `--max-concurrency` slot and its schedule lag,
//!   and the server's timing of it where the response carried it (`bench.server.queue_s`,
//!   `ttft_s`, `generation_s`, `mean_itl_s`, vLLM's `--enable-per-request-metrics`).
//!
//! A failed request's span ends at its last output chunk, or where it began when none
//! arrived: the record keeps when chunks arrived, not when the failure came.

use bench_record::RequestRecord;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span, status,
};
use rand::Rng;

use crate::{Request, Run, boolean, double, int, string};

/// How many spans one export request carries: a collector's default limit on a request's
/// size is 4 MiB (the OpenTelemetry Collector's gRPC receiver; its HTTP one takes more),
/// and a span here is about 570 bytes (1,000 spans of an `openai-chat` run took 566 KB).
pub const SPANS_PER_EXPORT: usize = 2_000;

/// The run's requests as spans, in export requests of at most [`SPANS_PER_EXPORT`] spans.
pub fn export_requests(run: &Run, requests: &[Request]) -> Vec<ExportTraceServiceRequest> {
    let mut rng = rand::rng();
    requests
        .chunks(SPANS_PER_EXPORT)
        .map(|chunk| ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(crate::resource(run)),
                scope_spans: vec![ScopeSpans {
                    scope: Some(crate::scope()),
                    spans: chunk.iter().map(|r| span(run, r, &mut rng)).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        })
        .collect()
}

/// One request's span.
fn span(run: &Run, request: &Request, rng: &mut impl Rng) -> Span {
    let record = request.record;
    let start = run.at(record.start_time);
    let end = start + crate::seconds_to_nanos(last_chunk(record));
    Span {
        trace_id: nonzero_id::<16>(rng).to_vec(),
        span_id: nonzero_id::<8>(rng).to_vec(),
        name: format!("{} {}", run.operation, run.model),
        kind: span::SpanKind::Client as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        attributes: attributes(run, request),
        status: Some(match record.failure() {
            Some(failure) => Status {
                code: status::StatusCode::Error as i32,
                message: failure.message.clone(),
            },
            None => Status::default(),
        }),
        ..Default::default()
    }
}

/// Seconds from the request's send to its last output chunk: its latency when it
/// completed, else the first chunk and the gaps after it (0 when none arrived).
fn last_chunk(record: &RequestRecord) -> f64 {
    if record.succeeded() {
        record.latency
    } else if record.ttft > 0.0 {
        record.ttft + record.itl.iter().sum::<f64>()
    } else {
        0.0
    }
}

fn attributes(
    run: &Run,
    request: &Request,
) -> Vec<opentelemetry_proto::tonic::common::v1::KeyValue> {
    let record = request.record;
    let mut attributes = run.common_attributes();
    attributes.extend(run.server_attributes(record.endpoint));
    attributes.extend([
        int(
            "gen_ai.request.max_tokens",
            i64::from(record.expected_output_len),
        ),
        int("gen_ai.usage.input_tokens", request.input_tokens as i64),
        string("bench.request.id", &record.request_id),
        int("bench.request.index", record.index as i64),
        string("bench.outcome", crate::outcome(record)),
        double("bench.concurrency_wait_s", record.concurrency_wait),
        double(
            "bench.schedule_lag_s",
            record.start_time - record.intended_start_time - record.concurrency_wait,
        ),
    ]);
    if record.succeeded() {
        attributes.push(int(
            "gen_ai.usage.output_tokens",
            request.output_tokens as i64,
        ));
    }
    if record.ttft > 0.0 {
        attributes.push(double("gen_ai.response.time_to_first_chunk", record.ttft));
        attributes.push(int("bench.output_chunks", record.itl.len() as i64 + 1));
    }
    if let Some(cached) = record.cached_prompt_tokens {
        attributes.push(int(
            "gen_ai.usage.cache_read.input_tokens",
            i64::from(cached),
        ));
    }
    if let Some(failure) = record.failure() {
        attributes.push(string("error.type", &failure.kind.name()));
    }
    if let Some(turn) = record.turn {
        attributes.push(int("bench.turn", i64::from(turn)));
    }
    if record.retried {
        attributes.push(boolean("bench.retried", true));
    }
    if let Some(timing) = &record.server_timing {
        for (key, value) in [
            ("bench.server.queue_s", timing.queue),
            ("bench.server.ttft_s", timing.ttft),
            ("bench.server.generation_s", timing.generation),
            ("bench.server.mean_itl_s", timing.mean_itl),
        ] {
            if let Some(value) = value {
                attributes.push(double(key, value));
            }
        }
    }
    attributes
}

/// A random id that is not all zeros (OTLP's "invalid" id).
fn nonzero_id<const N: usize>(rng: &mut impl Rng) -> [u8; N] {
    loop {
        let id: [u8; N] = rng.random();
        if id.iter().any(|&b| b != 0) {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_record::{FailureKind, ServerTiming};
    use opentelemetry_proto::tonic::common::v1::any_value::Value;

    fn run() -> Run<'static> {
        Run {
            resource: vec![string("bench.run.id", "r")],
            operation: "chat",
            provider: "openai",
            model: "m",
            servers: &[],
            origin_unix_nanos: 1_000_000_000_000,
            duration_s: 10.0,
        }
    }

    fn value<'a>(span: &'a Span, key: &str) -> Option<&'a Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
    }

    #[test]
    fn a_completed_request_is_a_client_span_from_send_to_last_chunk() {
        let record = RequestRecord {
            index: 7,
            request_id: "bench-1-7".into(),
            start_time: 2.0,
            intended_start_time: 1.5,
            concurrency_wait: 0.25,
            ttft: 0.1,
            itl: vec![0.02, 0.03],
            latency: 0.15,
            expected_output_len: 3,
            cached_prompt_tokens: Some(16),
            server_timing: Some(ServerTiming {
                queue: Some(0.01),
                ..ServerTiming::default()
            }),
            ..RequestRecord::default()
        };
        let request = Request {
            record: &record,
            input_tokens: 32,
            output_tokens: 3,
        };
        let exports = export_requests(&run(), &[request]);
        let span = &exports[0].resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "chat m");
        assert_eq!(span.kind, span::SpanKind::Client as i32);
        assert_eq!(span.start_time_unix_nano, 1_002_000_000_000);
        assert_eq!(span.end_time_unix_nano, 1_002_150_000_000);
        assert_eq!(span.trace_id.len(), 16);
        assert_eq!(span.span_id.len(), 8);
        assert_eq!(
            value(span, "gen_ai.usage.input_tokens"),
            Some(&Value::IntValue(32))
        );
        assert_eq!(
            value(span, "gen_ai.usage.output_tokens"),
            Some(&Value::IntValue(3))
        );
        assert_eq!(
            value(span, "gen_ai.request.max_tokens"),
            Some(&Value::IntValue(3))
        );
        assert_eq!(
            value(span, "gen_ai.response.time_to_first_chunk"),
            Some(&Value::DoubleValue(0.1))
        );
        assert_eq!(
            value(span, "gen_ai.usage.cache_read.input_tokens"),
            Some(&Value::IntValue(16))
        );
        assert_eq!(
            value(span, "bench.output_chunks"),
            Some(&Value::IntValue(3))
        );
        assert_eq!(
            value(span, "bench.schedule_lag_s"),
            Some(&Value::DoubleValue(0.25))
        );
        assert_eq!(
            value(span, "bench.server.queue_s"),
            Some(&Value::DoubleValue(0.01))
        );
        assert_eq!(value(span, "bench.server.ttft_s"), None);
        assert_eq!(value(span, "error.type"), None);
        assert_eq!(span.status.as_ref().unwrap().code, 0);
    }

    #[test]
    fn a_failed_request_carries_its_kind_and_message() {
        let record = RequestRecord {
            start_time: 1.0,
            ttft: 0.5,
            itl: vec![0.25],
            outcome: Err(FailureKind::StreamCut.failure("cut")),
            ..RequestRecord::default()
        };
        let request = Request {
            record: &record,
            input_tokens: 4,
            output_tokens: 0,
        };
        let exports = export_requests(&run(), &[request]);
        let span = &exports[0].resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(
            value(span, "error.type"),
            Some(&Value::StringValue("stream-cut".into()))
        );
        assert_eq!(
            value(span, "bench.outcome"),
            Some(&Value::StringValue("failed".into()))
        );
        assert_eq!(value(span, "gen_ai.usage.output_tokens"), None);
        let status = span.status.as_ref().unwrap();
        assert_eq!(status.code, status::StatusCode::Error as i32);
        assert_eq!(status.message, "cut");
        assert_eq!(
            span.end_time_unix_nano - span.start_time_unix_nano,
            750_000_000
        );
    }

    #[test]
    fn spans_are_split_into_exports_of_bounded_size() {
        let records = vec![RequestRecord::default(); SPANS_PER_EXPORT + 1];
        let requests: Vec<Request> = records
            .iter()
            .map(|record| Request {
                record,
                input_tokens: 1,
                output_tokens: 1,
            })
            .collect();
        let exports = export_requests(&run(), &requests);
        let sizes: Vec<usize> = exports
            .iter()
            .map(|e| e.resource_spans[0].scope_spans[0].spans.len())
            .collect();
        assert_eq!(sizes, [SPANS_PER_EXPORT, 1]);
    }
}
