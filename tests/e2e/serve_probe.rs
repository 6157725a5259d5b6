//! What `bench serve` does around its run, as vLLM's `bench serve` does: the probe loop of
//! `--probe-request-rate` (one-token probes beside the workload, reported apart from it),
//! the server's profiler around the run (`--profile`), runs with no tokenizer
//! (`--skip-tokenizer-init`), and `OPENAI_API_KEY` sent as a bearer token and written
//! nowhere.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;

/// The id bench gives its probes (the mock records streams by id).
const PROBE_ID: &str = bench::probe::PROBE_REQUEST_ID;

/// numpy's `percentile` (linear) of `values`, unsorted, for `p` in [0, 100].
fn np_percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let index = (v.len() - 1) as f64 * p / 100.0;
    let (lo, hi) = (index.floor() as usize, index.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (index - lo as f64)
}

#[test]
fn probes_run_beside_the_workload_and_are_reported_apart_from_it() {
    const PROMPTS: u64 = 40;
    const RATE: f64 = 10.0;
    within_bounds("probe latencies against the server's record", || {
        // A fresh server per attempt: its record holds this attempt's requests only.
        let m = mock(bench::mock::MockConfig {
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(5),
            ..Default::default()
        });
        let out = Bench::against(&m.url)
            .backend("openai")
            .random(8, 4)
            .prompts(PROMPTS)
            // 40 requests at 20/s, at most 2 at once: about two seconds of load.
            .args(["--request-rate", "20", "--max-concurrency", "2"])
            .args(["--request-id-prefix", "main-"])
            .args(["--probe-request-rate", &RATE.to_string()])
            .save_result()
            .run()
            .assert_success();
        let r = out.json();
        // The probes are not requests of the run.
        assert_eq!(r["completed"], PROMPTS, "{out}");
        assert_eq!(r["failed"], 0);
        assert_eq!(r["requests_sent"], PROMPTS);
        let completed = r["probe_completed"].as_u64().unwrap();
        assert_eq!(r["probe_failed"], 0, "{r:#}");
        // One probe at a time, a 100 ms sleep after each answer: about duration * rate.
        let duration = r["duration"].as_f64().unwrap();
        let expected = duration * RATE;
        assert!(
            completed as f64 >= 0.5 * expected && completed as f64 <= expected + 2.0,
            "{completed} probes in {duration} s at {RATE}/s"
        );

        // The server's record: every probe, under its own id, beside the run's requests.
        let records = m.server.as_ref().unwrap().requests();
        let main = records.iter().filter(|t| t.id.starts_with("main-")).count();
        assert_eq!(main as u64, PROMPTS);
        let probes: Vec<f64> = records
            .iter()
            .filter(|t| t.id == PROBE_ID)
            .map(|t| (t.ttft_ms + t.itl_ms.iter().sum::<f64>()) / 1000.0)
            .collect();
        assert_eq!(probes.len() as u64, completed, "probes the server answered");
        // The keys are vLLM's statistics of the probes' latencies, which the server's
        // record bounds from below (the client's E2EL adds the loopback trip).
        let server = [
            (
                "probe_median_e2el_ms",
                np_percentile(&probes, 50.0) * 1000.0,
            ),
            ("probe_p99_e2el_ms", np_percentile(&probes, 99.0) * 1000.0),
            (
                "probe_max_e2el_ms",
                probes.iter().copied().fold(0.0, f64::max) * 1000.0,
            ),
        ];
        // Below the server's record is a mismeasurement; far above it, a busy machine
        // (reported once every other check has run).
        let mut late = Vec::new();
        for (key, server) in server {
            let client = r[key].as_f64().unwrap();
            assert!(
                client >= server - 0.5,
                "{key}: bench {client:.3} ms, below the server's {server:.3} ms"
            );
            if client > server + 3.0 + 0.1 * server {
                late.push(format!(
                    "{key}: bench {client:.3} ms, server {server:.3} ms"
                ));
            }
        }
        // vLLM's console block and start line.
        assert!(
            out.stdout.contains("Probe request rate: 10.0 req/s"),
            "{out}"
        );
        let block = out
            .stdout
            .split("Probe Requests")
            .nth(1)
            .expect("the block");
        assert!(
            block.contains(&format!(
                "{:<40} {:<10}\n",
                "Probe requests completed:", completed
            )),
            "{out}"
        );
        assert!(block.contains("Probe requests failed:                   0"));
        for label in [
            "Median probe E2EL (ms):",
            "P99 probe E2EL (ms):",
            "Max probe E2EL (ms):",
        ] {
            assert!(block.contains(label), "{label}: {out}");
        }
        if late.is_empty() {
            Ok(())
        } else {
            Err(late.join("; "))
        }
    });
}

#[test]
fn without_the_flag_no_probe_is_sent_and_no_probe_key_written() {
    let m = mock(Default::default());
    let out = Bench::against(&m.url)
        .backend("openai-chat")
        .random(8, 4)
        .prompts(5)
        .save_result()
        .run()
        .assert_success();
    let r = out.json();
    assert!(r.get("probe_completed").is_none(), "{r:#}");
    assert!(!out.stdout.contains("Probe"), "{out}");
    let records = m.server.as_ref().unwrap().requests();
    assert!(records.iter().all(|t| t.id != PROBE_ID));
}

#[test]
fn a_negative_probe_rate_is_refused_naming_the_flag() {
    let out = bench(&["serve", "--probe-request-rate", "-1", "--model", "m"]).assert_failure();
    assert!(out.stderr.contains("--probe-request-rate"), "{out}");
}

#[test]
fn profile_starts_the_servers_profiler_before_the_run_and_stops_it_after() {
    let m = mock(Default::default());
    let secret = "sk-profile-secret-123";
    let out = Bench::against(&m.url)
        .backend("openai")
        .random(8, 4)
        .prompts(6)
        .arg("--profile")
        .env("OPENAI_API_KEY", secret)
        .save_result()
        .run()
        .assert_success();
    assert_eq!(out.json()["completed"], 6);
    let calls = m.server.as_ref().unwrap().profile_calls();
    let seen: Vec<(&str, usize)> = calls
        .iter()
        .map(|c| (c.path, c.finished_requests))
        .collect();
    // Started before any request of the run was answered, stopped after all of them.
    assert_eq!(seen, [("/start_profile", 0), ("/stop_profile", 6)], "{out}");
    let bearer = format!("Bearer {secret}");
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some(bearer.as_str()))
    );
    // vLLM's lines, in its order around the result block.
    let at = |needle: &str| {
        out.stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing: {out}"))
    };
    assert!(at("Starting profiler...") < at("Profiler started"));
    assert!(at("Profiler started") < at("Serving Benchmark Result"));
    assert!(at("Serving Benchmark Result") < at("Stopping profiler..."));
    assert!(at("Stopping profiler...") < at("Profiler stopped"));
    assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));
}

#[test]
fn a_server_without_a_profiler_is_a_warning_not_a_failed_run() {
    // The mock answers the profiler's paths; a server that answers 404 to them is this
    // one, which serves the run's requests as a stream and nothing else.
    let server = CaptureServer::start();
    let out = Bench::new()
        .args([
            "--model",
            "m",
            "--tokenizer",
            &gpt2(),
            "--base-url",
            &server.url,
        ])
        .args([
            "--backend",
            "openai",
            "--random-input-len",
            "4",
            "--random-output-len",
            "1",
        ])
        .args(["--num-prompts", "2", "--disable-tqdm", "--profile"])
        .run()
        .assert_success();
    assert!(out.stdout.contains("Starting profiler..."), "{out}");
    assert!(!out.stdout.contains("Profiler started"), "{out}");
    assert!(
        out.stderr
            .contains("--profile: the server's profiler did not start")
            && out.stderr.contains("404"),
        "{out}"
    );
    assert!(
        out.stderr.contains("the server's profiler did not stop"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("Successful requests:                     2")
    );
}

#[test]
fn skip_tokenizer_init_runs_a_dataset_that_needs_no_tokenizer_on_the_servers_counts() {
    let bench::runtime::PluginRef::File(plugin) = fixtures::fixture("conversation") else {
        unreachable!("fixtures are files")
    };
    let m = mock(Default::default());
    // No --tokenizer, and a model name that is no tokenizer anywhere: nothing is loaded.
    let out = Bench::new()
        .args([
            "--model",
            "no/such-tokenizer",
            "--base-url",
            &m.url,
            "--disable-tqdm",
        ])
        .args(["--backend", "openai-chat", "--skip-tokenizer-init"])
        .arg("--dataset-name")
        .arg(&plugin)
        .args([
            "--dataset-option",
            "conversations=2",
            "--dataset-option",
            "turns=2",
        ])
        .args(["--dataset-option", "output-len=5", "--num-prompts", "2"])
        .save_detailed()
        .run()
        .assert_success();
    let r = out.json();
    assert_eq!(r["completed"], 4, "{out}");
    assert_eq!(r["tokenizer_id"], serde_json::Value::Null);
    // Output tokens are the server's usage (5 per turn); no tokenizer count to compare.
    assert_eq!(r["total_output_tokens"], 20, "{r:#}");
    assert_eq!(r["output_lens"], serde_json::json!([5, 5, 5, 5]));
    assert!(r.get("output_tokens_tokenizer_count").is_none(), "{r:#}");
    assert!(
        r.get("theoretical_prefix_cache_hit_rate").is_none(),
        "{r:#}"
    );
    // vLLM's console without a tokenizer: no token counts, throughputs or TTFT block.
    assert!(!out.stdout.contains("Total generated tokens:"), "{out}");
    assert!(!out.stdout.contains("Output token throughput"), "{out}");
    assert!(!out.stdout.contains("Time to First Token"), "{out}");
}

#[test]
fn skip_tokenizer_init_with_a_dataset_that_needs_one_says_so() {
    let m = mock(Default::default());
    let out = Bench::new()
        .args(["--model", "mock", "--base-url", &m.url, "--disable-tqdm"])
        .args(["--skip-tokenizer-init", "--dataset-name", "random"])
        .args(["--random-input-len", "8", "--num-prompts", "2"])
        .run()
        .assert_failure();
    assert!(
        out.stderr.contains("--skip-tokenizer-init") && out.stderr.contains("'random'"),
        "{out}"
    );
    assert!(out.stderr.contains("needs a tokenizer"), "{out}");
    assert!(m.server.as_ref().unwrap().requests().is_empty());
}

/// A server that answers every POST to `/v1/completions` with a one-token completions
/// stream and every other path with 404, closing each connection after its answer, and
/// keeps every request head it read.
struct CaptureServer {
    url: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl CaptureServer {
    fn start() -> CaptureServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads: Arc<Mutex<Vec<String>>> = Arc::default();
        let kept = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut buf = Vec::new();
                let mut byte = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = stream.read(&mut byte) else {
                        break None;
                    };
                    if n == 0 {
                        break None;
                    }
                    buf.extend_from_slice(&byte[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break Some(i + 4);
                    }
                };
                let Some(head_end) = head_end else { continue };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + length {
                    match stream.read(&mut byte) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&byte[..n]),
                    }
                }
                let completions = head.starts_with("POST /v1/completions ");
                kept.lock().unwrap().push(head);
                let answer = if completions {
                    let body = "data: {\"choices\":[{\"index\":0,\"text\":\"hi\"}]}\n\n\
                                data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\
                                \"completion_tokens\":1,\"total_tokens\":5}}\n\n\
                                data: [DONE]\n\n";
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                        .to_owned()
                };
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        CaptureServer { url, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

#[test]
fn openai_api_key_is_sent_as_a_bearer_token_and_written_nowhere() {
    let secret = "sk-bench-test-5ecret-e2e";
    let server = CaptureServer::start();
    let dir = tempfile::tempdir().unwrap();
    let out = Bench::new()
        .args([
            "--model",
            "m",
            "--tokenizer",
            &gpt2(),
            "--base-url",
            &server.url,
        ])
        .args([
            "--backend",
            "openai",
            "--random-input-len",
            "4",
            "--random-output-len",
            "1",
        ])
        .args([
            "--num-prompts",
            "3",
            "--disable-tqdm",
            "--save-result",
            "--save-detailed",
        ])
        .arg("--result-dir")
        .arg(dir.path())
        .env("OPENAI_API_KEY", secret)
        .env("BENCH_LOG", "debug")
        .run()
        .assert_success();
    let heads = server.heads();
    let requests: Vec<&String> = heads
        .iter()
        .filter(|h| h.starts_with("POST /v1/completions "))
        .collect();
    assert_eq!(requests.len(), 3, "{heads:?}");
    for head in requests {
        assert!(
            head.lines()
                .any(|l| l.eq_ignore_ascii_case(&format!("authorization: Bearer {secret}"))),
            "{head}"
        );
    }
    // Not in the console, the log, the result or the files written beside it.
    assert!(
        !out.stdout.contains(secret) && !out.stderr.contains(secret),
        "{out}"
    );
    let mut files = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(secret), "{}", path.display());
        files += 1;
    }
    assert!(files >= 2, "the result and its PyTorch records");
}
