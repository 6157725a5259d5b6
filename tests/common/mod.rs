//! Helpers shared by the end-to-end tests: the real `bench` binary ([`Bench`]), a mock
//! server with known delays in this process, the test data shipped in `tests/data`, the
//! gate that lets timing tests run alone ([`gate`]) and time bounds that tell a busy
//! machine from a slow bench ([`timing`]).

use std::path::{Path, PathBuf};

mod command;
pub mod fixtures;
pub mod gate;
pub mod plugin_tools;
pub mod plugins;
pub mod skip;
pub mod timing;

pub use command::{Bench, COLUMNS, Run, Running};
pub use fixtures::repo;
pub use timing::within_bounds;

pub fn data(rel: &str) -> PathBuf {
    repo().join("tests/data").join(rel)
}

/// The `meta` object and the requests of a reference request set in
/// `tests/data/datasets/vllm-requests` (made by vLLM's own dataset code: the first line is
/// `{"meta": {...}}`, then one request per line).
pub fn vllm_reference(name: &str) -> (serde_json::Value, Vec<serde_json::Value>) {
    let path = data(&format!("datasets/vllm-requests/{name}.jsonl"));
    let content =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = content.lines();
    let first: serde_json::Value =
        serde_json::from_str(lines.next().expect("a meta line")).unwrap();
    let requests = lines
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {l:?}: {e}")))
        .collect();
    (first["meta"].clone(), requests)
}

/// A reference's `meta` value as a command-line value (strings as they are, numbers and
/// the rest as JSON).
pub fn flag_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn gpt2() -> String {
    data("tokenizers/gpt2").display().to_string()
}

pub fn sharegpt() -> String {
    data("datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json")
        .display()
        .to_string()
}

/// Runs `bench` with `args` to its end (never panics on a non-zero exit).
pub fn bench<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    Bench::new().args(args).run()
}

/// A tokio runtime running a mock server with the given delays; dropped with the test.
pub struct Mock {
    pub rt: tokio::runtime::Runtime,
    pub server: Option<bench::mock::MockServer>,
    pub url: String,
}

pub fn mock(config: bench::mock::MockConfig) -> Mock {
    gate::enter();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(bench::mock::spawn(config))
        .expect("mock server");
    let url = server.base_url();
    Mock {
        rt,
        server: Some(server),
        url,
    }
}

impl Mock {
    /// The ids of the requests the mock received (a set: the ready check reuses request
    /// 0's id).
    pub fn received_ids(&self) -> std::collections::BTreeSet<String> {
        self.server
            .as_ref()
            .unwrap()
            .requests()
            .into_iter()
            .map(|r| r.id)
            .collect()
    }

    /// The ids of the requests whose client went away (the mock's record), once `want` of
    /// them have reached it or 5 s have passed.
    pub fn aborted_ids(&self, want: usize) -> Vec<String> {
        let server = self.server.as_ref().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while server.aborted().len() < want && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        server.aborted()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = self.rt.block_on(s.shutdown());
        }
    }
}

/// Reads the single result file in `dir`.
pub fn result_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(result_file(dir)).unwrap()).unwrap()
}

/// The single result file in `dir` (not its `.pytorch.json` twin).
pub fn result_file(dir: &Path) -> PathBuf {
    let files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.to_string_lossy().ends_with(".pytorch.json")
        })
        .collect();
    assert_eq!(
        files.len(),
        1,
        "expected one result file in {}: {files:?}",
        dir.display()
    );
    files[0].clone()
}

/// Every key of vLLM's result file for a generation benchmark with the default
/// percentile metrics (ttft, tpot, itl) and --metric-percentiles 99, plus e2el when asked.
pub const VLLM_RESULT_KEYS: &[&str] = &[
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p99_itl_ms",
];

/// The per-request lists `--save-detailed` adds.
pub const DETAILED_KEYS: &[&str] = &[
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "generated_texts",
    "errors",
];

/// Raises this process's open-file limit to its hard limit (servers in the test process
/// hold one descriptor per connection) and returns the new soft limit.
pub fn raise_open_file_limit() -> u64 {
    bench::cli::limits::raise_open_file_limit()
        .expect("reading the open-file limit")
        .soft
}

/// Wilson's 95% score interval for `k` successes of `n`, written out here independently
/// of bench's (the structured-output and accuracy tests check bench's intervals with it).
pub fn wilson(k: f64, n: f64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z / d * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}
