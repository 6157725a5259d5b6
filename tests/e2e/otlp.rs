//! `--otlp-endpoint`: the run sent to an OpenTelemetry collector over OTLP/HTTP. The
//! collector here is the test's own: it takes the POSTs on loopback, decodes their protobuf
//! bodies with OpenTelemetry's own message types (`opentelemetry-proto`), and the test
//! compares every span and metric with the result file of the same run.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use bench::mock::MockConfig;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

use crate::common::*;

/// One POST the collector took.
struct Post {
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

/// A collector on loopback that answers the first `refuse` POSTs with 503 (and
/// `Retry-After: 0`) and the others with 200, keeping what each carried.
struct Collector {
    port: u16,
    posts: Arc<Mutex<Vec<Post>>>,
}

impl Collector {
    fn start(refuse: usize) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let posts = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(0));
        let kept = posts.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (posts, refused) = (kept.clone(), refused.clone());
                std::thread::spawn(move || serve(stream, refuse, &posts, &refused));
            }
        });
        Collector { port, posts }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans of every POST to /v1/traces, decoded.
    fn spans(&self) -> Vec<Span> {
        self.bodies("/v1/traces")
            .iter()
            .flat_map(|b| {
                ExportTraceServiceRequest::decode(b.as_slice())
                    .expect("OTLP traces")
                    .resource_spans
            })
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    /// The one POST to /v1/metrics, decoded.
    fn metrics(&self) -> ExportMetricsServiceRequest {
        let bodies = self.bodies("/v1/metrics");
        assert_eq!(bodies.len(), 1, "one metrics export");
        ExportMetricsServiceRequest::decode(bodies[0].as_slice()).expect("OTLP metrics")
    }

    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        let posts = self.posts.lock().unwrap();
        posts
            .iter()
            .filter(|p| p.path == path)
            .map(|p| p.body.clone())
            .collect()
    }
}

/// Reads HTTP/1.1 requests off one connection (kept alive) until it closes.
fn serve(stream: TcpStream, refuse: usize, posts: &Mutex<Vec<Post>>, refused: &Mutex<usize>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = HashMap::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
        let length: usize = headers["content-length"].parse().unwrap();
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let path = request_line.split_whitespace().nth(1).unwrap().to_owned();
        let turn_away = {
            let mut refused = refused.lock().unwrap();
            *refused += 1;
            *refused <= refuse
        };
        if turn_away {
            write!(
                writer,
                "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
            )
            .unwrap();
            continue;
        }
        posts.lock().unwrap().push(Post {
            path,
            headers,
            body,
        });
        write!(
            writer,
            "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match attribute(&span.attributes, key)? {
        Value::IntValue(i) => Some(*i),
        other => panic!("{key}: {other:?}"),
    }
}

fn double(span: &Span, key: &str) -> Option<f64> {
    match attribute(&span.attributes, key)? {
        Value::DoubleValue(x) => Some(*x),
        other => panic!("{key}: {other:?}"),
    }
}

fn text(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key)? {
        Value::StringValue(s) => Some(s.clone()),
        other => panic!("{key}: {other:?}"),
    }
}

fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Every request of the result file arrives as one span whose figures are the file's for
/// that request; every figure of the file arrives as a gauge of the same value; the GenAI
/// histograms hold the file's requests; and the collector's header went with each POST.
#[test]
fn each_request_arrives_as_a_span_and_each_figure_as_a_metric_equal_to_the_result() {
    let m = mock(MockConfig {
        fail_rate: 0.1,
        per_request_metrics: true,
        ..MockConfig::default()
    });
    let collector = Collector::start(0);
    let before = unix_nanos(SystemTime::now());
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 8)
        .prompts(40)
        .args(["--max-concurrency", "4", "--label", "otlp-check"])
        .args(["--otlp-endpoint", &collector.url()])
        .args(["--otlp-header", "x-api-key=not-in-the-result"])
        .save_detailed()
        .run()
        .assert_success();
    let after = unix_nanos(SystemTime::now());
    let r = out.json();
    assert_eq!(r["completed"], 36, "{out}");
    assert_eq!(r["failed"], 4, "{out}");
    assert!(out.stdout.contains("OpenTelemetry: 40 spans and "), "{out}");
    for file in out.result_dir().read_dir().unwrap().flatten() {
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            !text.contains("not-in-the-result"),
            "{}: the header's value is kept out of what is saved",
            file.path().display()
        );
    }

    // What arrived, and how.
    {
        let posts = collector.posts.lock().unwrap();
        assert!(!posts.is_empty());
        for post in posts.iter() {
            assert_eq!(post.headers["content-type"], "application/x-protobuf");
            assert_eq!(post.headers["x-api-key"], "not-in-the-result");
        }
    }

    // The spans: one per request, each with the file's figures for it.
    let spans = collector.spans();
    assert_eq!(spans.len(), 40);
    let list = |key: &str| {
        r[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {r:#}"))
            .clone()
    };
    let (input_lens, output_lens, ttfts, latencies, start_times, errors) = (
        list("input_lens"),
        list("output_lens"),
        list("ttfts"),
        list("latencies"),
        list("start_times"),
        list("errors"),
    );
    let server_ttfts = list("server_ttfts");
    let mut by_index: Vec<Option<&Span>> = vec![None; 40];
    for span in &spans {
        let i = int(span, "bench.request.index").unwrap() as usize;
        assert!(
            by_index[i].replace(span).is_none(),
            "request {i} arrived twice"
        );
        assert_eq!(span.name, "text_completion mock");
        assert_eq!(span.kind, 3, "SPAN_KIND_CLIENT");
        assert_eq!(span.trace_id.len(), 16);
        assert_eq!(
            text(&span.attributes, "gen_ai.request.model").as_deref(),
            Some("mock")
        );
        assert_eq!(
            text(&span.attributes, "gen_ai.provider.name").as_deref(),
            Some("openai")
        );
        assert_eq!(
            text(&span.attributes, "server.address").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            int(span, "server.port"),
            Some(i64::from(
                m.url.rsplit(':').next().unwrap().parse::<u16>().unwrap()
            ))
        );
        assert_eq!(
            int(span, "gen_ai.usage.input_tokens"),
            input_lens[i].as_i64()
        );
        assert_eq!(int(span, "gen_ai.request.max_tokens"), Some(8));
        assert!(
            before <= span.start_time_unix_nano && span.end_time_unix_nano <= after,
            "request {i}'s span lies within the run"
        );
        let error = errors[i].as_str().unwrap_or("");
        if error.is_empty() {
            assert_eq!(
                int(span, "gen_ai.usage.output_tokens"),
                output_lens[i].as_i64()
            );
            assert_eq!(
                double(span, "gen_ai.response.time_to_first_chunk"),
                ttfts[i].as_f64()
            );
            let latency_ns = (latencies[i].as_f64().unwrap() * 1e9).round() as u64;
            assert_eq!(
                span.end_time_unix_nano - span.start_time_unix_nano,
                latency_ns
            );
            assert_eq!(
                double(span, "bench.server.ttft_s"),
                server_ttfts[i].as_f64()
            );
            assert_eq!(text(&span.attributes, "error.type"), None);
            assert_eq!(span.status.as_ref().map_or(0, |s| s.code), 0);
        } else {
            assert_eq!(
                text(&span.attributes, "error.type").as_deref(),
                Some("http-500")
            );
            assert!(error.starts_with("http-500"), "{error}");
            assert_eq!(span.status.as_ref().unwrap().code, 2, "STATUS_CODE_ERROR");
            assert_eq!(int(span, "gen_ai.usage.output_tokens"), None);
        }
    }
    // Each span starts where the file's start time puts it, relative to the first.
    let first = start_times[0].as_f64().unwrap();
    let first_span = by_index[0].unwrap().start_time_unix_nano as i128;
    for (i, span) in by_index.iter().enumerate() {
        let want = ((start_times[i].as_f64().unwrap() - first) * 1e9).round() as i128;
        let got = span.unwrap().start_time_unix_nano as i128 - first_span;
        assert!(
            (got - want).abs() <= 1_000,
            "request {i}: {got} ns, file {want} ns"
        );
    }

    // The metrics: every numeric figure of the file as `bench.<key>`, the same number.
    let export = collector.metrics();
    let resource = export.resource_metrics[0].resource.as_ref().unwrap();
    assert_eq!(
        text(&resource.attributes, "service.name").as_deref(),
        Some("bench")
    );
    assert_eq!(
        text(&resource.attributes, "bench.label").as_deref(),
        Some("otlp-check")
    );
    let metrics = &export.resource_metrics[0].scope_metrics[0].metrics;
    let gauges: HashMap<&str, f64> = metrics
        .iter()
        .filter_map(|m| match &m.data {
            Some(metric::Data::Gauge(g)) => match g.data_points[0].value {
                Some(number_data_point::Value::AsDouble(x)) => {
                    Some((m.name.strip_prefix("bench.").unwrap(), x))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    let numbers: HashMap<&str, f64> = r
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_f64()?)))
        .collect();
    assert!(numbers.len() > 40, "{numbers:?}");
    assert_eq!(gauges, numbers, "the gauges are the result file's figures");

    // The GenAI histograms hold the completed requests.
    let histogram = |name: &str| {
        let metric = metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name}"));
        match &metric.data {
            Some(metric::Data::Histogram(h)) => h.data_points.clone(),
            other => panic!("{name}: {other:?}"),
        }
    };
    let completed: Vec<usize> = (0..40)
        .filter(|&i| errors[i].as_str().unwrap_or("").is_empty())
        .collect();
    let duration = histogram("gen_ai.client.operation.duration");
    assert_eq!(duration.len(), 1);
    assert_eq!(duration[0].count, 36);
    assert_eq!(duration[0].bucket_counts.iter().sum::<u64>(), 36);
    let latency_sum: f64 = completed
        .iter()
        .map(|&i| latencies[i].as_f64().unwrap())
        .sum();
    assert!((duration[0].sum.unwrap() - latency_sum).abs() <= 1e-9 * latency_sum);
    let ttfc = histogram("gen_ai.client.operation.time_to_first_chunk");
    let ttft_sum: f64 = completed.iter().map(|&i| ttfts[i].as_f64().unwrap()).sum();
    assert_eq!(ttfc[0].count, 36);
    assert!((ttfc[0].sum.unwrap() - ttft_sum).abs() <= 1e-9 * ttft_sum);
    let itl_count: usize = completed
        .iter()
        .map(|&i| list("itls")[i].as_array().unwrap().len())
        .sum();
    assert_eq!(
        histogram("gen_ai.client.operation.time_per_output_chunk")[0].count,
        itl_count as u64
    );
    let tokens = histogram("gen_ai.client.token.usage");
    let token_sum = |kind: &str| {
        tokens
            .iter()
            .find(|p| text(&p.attributes, "gen_ai.token.type").as_deref() == Some(kind))
            .and_then(|p| p.sum)
            .unwrap()
    };
    assert_eq!(
        token_sum("output"),
        r["total_output_tokens"].as_f64().unwrap()
    );
    let input_completed: f64 = completed
        .iter()
        .map(|&i| input_lens[i].as_f64().unwrap())
        .sum();
    assert_eq!(token_sum("input"), input_completed);
    let requests = metrics.iter().find(|m| m.name == "bench.requests").unwrap();
    let Some(metric::Data::Sum(sum)) = &requests.data else {
        panic!("bench.requests is a sum")
    };
    let count = |outcome: &str| -> i64 {
        sum.data_points
            .iter()
            .filter(|p| text(&p.attributes, "bench.outcome").as_deref() == Some(outcome))
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(n)) => n,
                _ => 0,
            })
            .sum()
    };
    assert_eq!((count("completed"), count("failed")), (36, 4));
}

/// A collector that turns the first POSTs away (503) gets them again, once each.
#[test]
fn a_busy_collector_gets_the_export_again() {
    let m = mock(MockConfig::default());
    let collector = Collector::start(2);
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(16, 8)
        .prompts(10)
        .args(["--otlp-endpoint", &collector.url()])
        .run()
        .assert_success();
    assert!(out.stdout.contains("OpenTelemetry: 10 spans and "), "{out}");
    let spans = collector.spans();
    assert_eq!(spans.len(), 10, "{out}");
    assert!(spans.iter().all(|s| s.name == "chat mock"));
    collector.metrics();
}

/// No collector: a warning that says the run was not sent, and the run's result and exit
/// status as without the flag. A bad endpoint fails before the run, naming the flag.
#[test]
fn an_unreachable_collector_costs_a_warning_not_the_result() {
    let m = mock(MockConfig::default());
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(16, 8)
        .prompts(5)
        .args(["--otlp-endpoint", &format!("http://127.0.0.1:{closed}")])
        .args(["--otlp-timeout", "2"])
        .save_result()
        .run()
        .assert_success();
    assert!(
        out.stderr
            .contains("WARNING: --otlp-endpoint: the run was not (or not all) sent"),
        "{out}"
    );
    assert_eq!(out.json()["completed"], 5);
    let bad = Bench::against(&m.url)
        .backend("openai")
        .random(16, 8)
        .prompts(5)
        .args(["--otlp-endpoint", "127.0.0.1:4318"])
        .run()
        .assert_failure();
    assert!(
        bad.stderr.contains("--otlp-endpoint \"127.0.0.1:4318\""),
        "{bad}"
    );
    assert!(
        !bad.stdout.contains("Successful requests"),
        "nothing was run: {bad}"
    );
}
