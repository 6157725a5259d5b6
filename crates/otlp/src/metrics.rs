//! The run's metrics in one OTLP export request, each data point from the run's start to
//! its end (cumulative):
//!
//! - the GenAI client metrics of the semantic conventions, over the completed requests, one
//!   data point per endpoint: `gen_ai.client.operation.duration` (E2EL, seconds),
//!   `gen_ai.client.token.usage` (`gen_ai.token.type` `input` and `output`, tokens as the
//!   result counts them), `gen_ai.client.operation.time_to_first_chunk` (TTFT) and
//!   `gen_ai.client.operation.time_per_output_chunk` (each gap between output chunks:
//!   the ITL values), with the conventions' bucket boundaries and exact sums, minima and
//!   maxima;
//! - `bench.requests`: the requests sent, by `bench.outcome` and `error.type`;
//! - each figure of the result file as a gauge `bench.<key>` (`bench.p99_ttft_ms`), the
//!   very number the file holds.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric, number_data_point,
};

use crate::convention::{DURATION_BUCKETS, TOKEN_BUCKETS};
use crate::{Request, Run, string};

/// The run's metrics: see the module documentation. `figures` are the result file's
/// numeric figures by key.
pub fn export_request(
    run: &Run,
    requests: &[Request],
    figures: &[(String, f64)],
) -> ExportMetricsServiceRequest {
    let mut metrics = histograms(run, requests);
    metrics.push(request_counts(run, requests));
    metrics.extend(figures.iter().map(|(key, value)| gauge(run, key, *value)));
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(crate::resource(run)),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(crate::scope()),
                metrics,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Values of one histogram, by the attributes of their data point.
type Series = BTreeMap<Vec<(String, String)>, Vec<f64>>;

/// The four GenAI client histograms over the completed requests.
fn histograms(run: &Run, requests: &[Request]) -> Vec<Metric> {
    let (mut duration, mut tokens, mut first_chunk, mut per_chunk) =
        (Series::new(), Series::new(), Series::new(), Series::new());
    for request in requests.iter().filter(|r| r.record.succeeded()) {
        let record = request.record;
        let point = point_key(run, record.endpoint, &[]);
        duration
            .entry(point.clone())
            .or_default()
            .push(record.latency);
        for (kind, count) in [
            ("input", request.input_tokens),
            ("output", request.output_tokens),
        ] {
            let key = point_key(run, record.endpoint, &[("gen_ai.token.type", kind)]);
            tokens.entry(key).or_default().push(count as f64);
        }
        if record.ttft > 0.0 {
            first_chunk
                .entry(point.clone())
                .or_default()
                .push(record.ttft);
            per_chunk.entry(point).or_default().extend(&record.itl);
        }
    }
    [
        (
            "gen_ai.client.operation.duration",
            "GenAI operation duration: from the request's send to its last output chunk",
            "s",
            duration,
            &DURATION_BUCKETS[..],
        ),
        (
            "gen_ai.client.token.usage",
            "Input and output tokens of each completed request",
            "{token}",
            tokens,
            &TOKEN_BUCKETS[..],
        ),
        (
            "gen_ai.client.operation.time_to_first_chunk",
            "Time from the request's send to its first output chunk (TTFT)",
            "s",
            first_chunk,
            &DURATION_BUCKETS[..],
        ),
        (
            "gen_ai.client.operation.time_per_output_chunk",
            "Time between successive output chunks (ITL)",
            "s",
            per_chunk,
            &DURATION_BUCKETS[..],
        ),
    ]
    .into_iter()
    .filter(|(.., series, _)| !series.is_empty())
    .map(|(name, description, unit, series, bounds)| Metric {
        name: name.to_owned(),
        description: description.to_owned(),
        unit: unit.to_owned(),
        data: Some(metric::Data::Histogram(Histogram {
            data_points: series
                .into_iter()
                .map(|(key, values)| histogram_point(run, &key, &values, bounds))
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
        })),
        ..Default::default()
    })
    .collect()
}

/// The attributes of a data point as sortable pairs: the run's, the endpoint's server, and
/// `extra`.
fn point_key(run: &Run, endpoint: u32, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut key: Vec<(String, String)> = run
        .common_attributes()
        .into_iter()
        .chain(run.server_attributes(endpoint))
        .map(|kv| (kv.key, text_of(kv.value)))
        .collect();
    key.extend(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    key
}

/// An attribute's value as the text a data point's key holds (`server.port` back to an
/// integer in [`attributes_of`]).
fn text_of(value: Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    match value.and_then(|v| v.value) {
        Some(Value::StringValue(s)) => s,
        Some(Value::IntValue(i)) => i.to_string(),
        _ => String::new(),
    }
}

/// A data point key's attributes, `server.port` as the integer the conventions make it.
fn attributes_of(key: &[(String, String)]) -> Vec<KeyValue> {
    key.iter()
        .map(|(k, v)| match (k.as_str(), v.parse::<i64>()) {
            ("server.port", Ok(port)) => crate::int(k, port),
            _ => string(k, v),
        })
        .collect()
}

/// One histogram data point over `values`, with OTLP's buckets: bucket `i` counts the
/// values in `(bounds[i-1], bounds[i]]`, the last one those above every bound.
fn histogram_point(
    run: &Run,
    key: &[(String, String)],
    values: &[f64],
    bounds: &[f64],
) -> HistogramDataPoint {
    let mut bucket_counts = vec![0u64; bounds.len() + 1];
    for &v in values {
        bucket_counts[bounds.partition_point(|&b| b < v)] += 1;
    }
    HistogramDataPoint {
        attributes: attributes_of(key),
        start_time_unix_nano: run.origin_unix_nanos,
        time_unix_nano: run.end(),
        count: values.len() as u64,
        sum: Some(values.iter().sum()),
        bucket_counts,
        explicit_bounds: bounds.to_vec(),
        min: values.iter().copied().reduce(f64::min),
        max: values.iter().copied().reduce(f64::max),
        ..Default::default()
    }
}

/// `bench.requests`: the requests sent, by outcome (and failure kind).
fn request_counts(run: &Run, requests: &[Request]) -> Metric {
    let mut counts: BTreeMap<(&str, String), u64> = BTreeMap::new();
    for request in requests {
        let record = request.record;
        let kind = record
            .failure()
            .map(|f| f.kind.name().into_owned())
            .unwrap_or_default();
        *counts.entry((crate::outcome(record), kind)).or_default() += 1;
    }
    Metric {
        name: "bench.requests".to_owned(),
        description: "Requests sent, by outcome and failure kind".to_owned(),
        unit: "{request}".to_owned(),
        data: Some(metric::Data::Sum(Sum {
            data_points: counts
                .into_iter()
                .map(|((outcome, kind), count)| {
                    let mut attributes = run.common_attributes();
                    attributes.push(string("bench.outcome", outcome));
                    if !kind.is_empty() {
                        attributes.push(string("error.type", &kind));
                    }
                    NumberDataPoint {
                        attributes,
                        start_time_unix_nano: run.origin_unix_nanos,
                        time_unix_nano: run.end(),
                        value: Some(number_data_point::Value::AsInt(count as i64)),
                        ..Default::default()
                    }
                })
                .collect(),
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Default::default()
    }
}

/// A figure of the result file as the gauge `bench.<key>`, taken at the run's end.
fn gauge(run: &Run, key: &str, value: f64) -> Metric {
    Metric {
        name: format!("bench.{key}"),
        description: format!("The result file's `{key}`"),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: vec![NumberDataPoint {
                attributes: run.common_attributes(),
                start_time_unix_nano: run.origin_unix_nanos,
                time_unix_nano: run.end(),
                value: Some(number_data_point::Value::AsDouble(value)),
                ..Default::default()
            }],
        })),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Server;
    use bench_record::{FailureKind, RequestRecord};

    fn record(latency: f64, ttft: f64, itl: Vec<f64>) -> RequestRecord {
        RequestRecord {
            latency,
            ttft,
            itl,
            ..RequestRecord::default()
        }
    }

    #[test]
    fn histograms_hold_every_completed_request_in_otlps_buckets() {
        let servers = [Some(Server {
            address: "127.0.0.1".into(),
            port: 8000,
        })];
        let run = Run {
            resource: Vec::new(),
            operation: "text_completion",
            provider: "openai",
            model: "m",
            servers: &servers,
            origin_unix_nanos: 5,
            duration_s: 1.0,
        };
        let records = [
            record(0.01, 0.005, vec![0.002, 0.003]),
            record(0.5, 0.1, vec![]),
            RequestRecord {
                outcome: Err(FailureKind::Http(503).failure("busy")),
                ..RequestRecord::default()
            },
        ];
        let requests: Vec<Request> = records
            .iter()
            .map(|record| Request {
                record,
                input_tokens: 10,
                output_tokens: 3,
            })
            .collect();
        let figures = [("p99_ttft_ms".to_owned(), 99.5)];
        let export = export_request(&run, &requests, &figures);
        let metrics = &export.resource_metrics[0].scope_metrics[0].metrics;
        let by_name = |name: &str| metrics.iter().find(|m| m.name == name).unwrap();
        let Some(metric::Data::Histogram(h)) = &by_name("gen_ai.client.operation.duration").data
        else {
            panic!("a histogram")
        };
        let point = &h.data_points[0];
        assert_eq!(point.count, 2);
        assert_eq!(point.sum, Some(0.51));
        assert_eq!((point.min, point.max), (Some(0.01), Some(0.5)));
        // 0.01 lies on the first bound, so in the first bucket; 0.5 in (0.32, 0.64].
        assert_eq!(point.bucket_counts[0], 1);
        assert_eq!(point.bucket_counts[6], 1);
        assert_eq!(point.bucket_counts.iter().sum::<u64>(), 2);
        assert!(point.attributes.contains(&crate::int("server.port", 8000)));
        let Some(metric::Data::Histogram(chunks)) =
            &by_name("gen_ai.client.operation.time_per_output_chunk").data
        else {
            panic!("a histogram")
        };
        assert_eq!(chunks.data_points[0].count, 2);
        let Some(metric::Data::Histogram(tokens)) = &by_name("gen_ai.client.token.usage").data
        else {
            panic!("a histogram")
        };
        assert_eq!(tokens.data_points.len(), 2, "input and output");
        let Some(metric::Data::Sum(counts)) = &by_name("bench.requests").data else {
            panic!("a sum")
        };
        let total: i64 = counts
            .data_points
            .iter()
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(n)) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 3);
        let Some(metric::Data::Gauge(g)) = &by_name("bench.p99_ttft_ms").data else {
            panic!("a gauge")
        };
        assert_eq!(
            g.data_points[0].value,
            Some(number_data_point::Value::AsDouble(99.5))
        );
        assert_eq!(g.data_points[0].time_unix_nano, 1_000_000_005);
    }
}
