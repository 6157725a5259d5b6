//! `--metrics-port`: the run's figures so far served as Prometheus text while the run goes
//! on, scraped as Prometheus would and parsed by the `prometheus-parse` crate.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bench::mock::MockConfig;

use crate::common::*;

/// One `GET /metrics`, its body; `None` while nothing listens.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("application/openmetrics-text"), "{head}");
    Some(body.to_owned())
}

/// A scrape's samples: the value by metric name and sorted labels.
type Samples = HashMap<(String, Vec<(String, String)>), f64>;

/// The scrape's samples by name and labels, parsed by `prometheus-parse`.
fn parse(body: &str) -> Samples {
    let lines = body.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text that parses");
    scrape
        .samples
        .into_iter()
        .map(|s| {
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                other => panic!("{}: unexpected {other:?}", s.metric),
            };
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            labels.sort();
            ((s.metric, labels), value)
        })
        .collect()
}

fn get(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    *samples
        .get(&(name.to_owned(), labels.clone()))
        .unwrap_or_else(|| panic!("no {name}{labels:?} in {:?}", samples.keys()))
}

#[test]
fn the_runs_live_figures_are_served_as_prometheus_text() {
    // TTFT uniform on [50 ms, 150 ms): 400 requests, 8 at a time, about 5 s.
    let m = mock(MockConfig {
        ttft: Duration::from_millis(50),
        ttft_spread: Duration::from_millis(100),
        output_len: 2,
        fail_rate: 0.05,
        server_metrics: bench::mock::ServerMetrics {
            family: Some(bench::mock::ServerFamily::Vllm),
            ..Default::default()
        },
        ..MockConfig::default()
    });
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let running = Bench::against(&m.url)
        .random(16, 2)
        .prompts(400)
        .args([
            "--max-concurrency",
            "8",
            "--metrics-port",
            &port.to_string(),
        ])
        .args(["--server-metrics-interval", "0.2"])
        .save_result()
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut scrapes = Vec::new();
    // Scrape until the server goes away with the run's end.
    loop {
        match scrape(port) {
            Some(body) => scrapes.push(parse(&body)),
            None if !scrapes.is_empty() => break,
            None => assert!(Instant::now() < deadline, "nothing served on {port}"),
        }
        std::thread::sleep(Duration::from_millis(150));
        if Instant::now() > deadline {
            break;
        }
    }
    let out = running.wait(Duration::from_secs(60));
    assert!(out.success(), "{out}");
    let result = out.json();
    assert!(scrapes.len() >= 5, "{} scrapes", scrapes.len());
    let mut last_completed = 0.0;
    for s in &scrapes {
        let sent = get(s, "bench_requests_sent_total", &[]);
        let completed = get(s, "bench_requests_completed_total", &[]);
        let failed = get(s, "bench_requests_failed_total", &[]);
        let in_flight = get(s, "bench_requests_in_flight", &[]);
        // Counters only grow; what is in flight is what was sent and not yet recorded:
        // the cap's 8, and answers that have ended but wait for the decode thread.
        assert!(completed >= last_completed);
        last_completed = completed;
        assert_eq!(in_flight, sent - completed - failed);
        assert!((0.0..=16.0).contains(&in_flight), "{in_flight}");
        if completed > 0.0 {
            for q in ["0.5", "0.9", "0.99"] {
                let ttft = get(s, "bench_ttft_seconds", &[("quantile", q)]);
                assert!((0.05..0.2).contains(&ttft), "p{q} TTFT {ttft} s");
            }
            // Requests go out at once (no rate): none is late by a whole TTFT.
            assert!(get(s, "bench_schedule_lag_seconds", &[("quantile", "0.5")]) < 0.05);
            assert_eq!(
                get(s, "bench_ttft_observations_total", &[]),
                completed,
                "one TTFT per completed request"
            );
        }
    }
    // The server's own gauges, as bench last read them (every 0.2 s), by server and name.
    let is_running = |labels: &Vec<(String, String)>| {
        labels.contains(&("name".to_owned(), "vllm:num_requests_running".to_owned()))
            && labels.contains(&("server".to_owned(), m.url.clone()))
    };
    let running: Vec<f64> = scrapes
        .iter()
        .filter_map(|s| {
            s.iter()
                .find(|((name, labels), _)| name == "bench_server_gauge" && is_running(labels))
                .map(|(_, v)| *v)
        })
        .collect();
    assert!(!running.is_empty(), "no server gauge in any scrape");
    assert!(
        running.iter().all(|&r| (0.0..=8.0).contains(&r)),
        "{running:?}"
    );
    // Seen while it ran: a part of the run, never more than the result's.
    let completed = result["completed"].as_f64().unwrap();
    assert!(last_completed > 0.0 && last_completed <= completed);
    let failed: f64 = result["failed"].as_f64().unwrap();
    assert!(failed > 0.0, "the mock fails 5%");
    let last = scrapes.last().unwrap();
    let http_500 = last
        .iter()
        .find(|((name, _), _)| name == "bench_request_failures_total")
        .map(|((_, labels), v)| (labels.clone(), *v));
    // Every 20th request fails (the mock's pattern), so the last scrape has seen some.
    let (labels, n) = http_500.expect("failures by kind in the last scrape");
    assert_eq!(labels, vec![("kind".to_owned(), "http-500".to_owned())]);
    assert!(n > 0.0 && n <= failed, "{n} of {failed}");
}

#[test]
fn metrics_port_is_refused_where_no_one_process_sees_the_run() {
    let out = bench(&["--metrics-port", "0", "--workers", "2"]).assert_failure();
    assert!(out.stderr.contains("--metrics-port"), "{out}");
    let out = bench(&["throughput", "--metrics-port", "0"]).assert_failure();
    assert!(
        out.stderr.contains("--metrics-port is bench serve's"),
        "{out}"
    );
}
