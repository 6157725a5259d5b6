//! Helpers shared by the end-to-end tests: the real `bench` binary, a mock server with
//! known delays in this process, and the test data shipped in `tests/data`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod fixtures;

pub use fixtures::repo;

pub fn data(rel: &str) -> PathBuf {
    repo().join("tests/data").join(rel)
}

pub fn gpt2() -> String {
    data("tokenizers/gpt2").display().to_string()
}

pub fn sharegpt() -> String {
    data("datasets/sharegpt/ShareGPT_V3_unfiltered_cleaned_split.first2000.json")
        .display()
        .to_string()
}

/// Runs `bench` with `args`, returning its output (never panics on a non-zero exit).
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .env("BENCH_LOG", "warn")
        .output()
        .expect("running bench")
}

pub fn text(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A tokio runtime running a mock server with the given delays; dropped with the test.
pub struct Mock {
    pub rt: tokio::runtime::Runtime,
    pub server: Option<bench::mock::MockServer>,
    pub url: String,
}

pub fn mock(config: bench::mock::MockConfig) -> Mock {
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

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let _ = self.rt.block_on(s.shutdown());
        }
    }
}

/// Reads the single result file in `dir`.
pub fn result_json(dir: &Path) -> serde_json::Value {
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
    serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap()
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

/// A `bench` process started in the background, with its output read by threads so it
/// never blocks on a full pipe; stdout lines are also handed over as they arrive.
pub struct Running {
    pub child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

/// Starts `bench` with `args` in the background.
pub fn spawn_bench(args: &[&str]) -> Running {
    use std::io::{BufRead, Read};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(args)
        .env("BENCH_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bench");
    let (tx, lines) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(out).lines() {
            let line = line.unwrap_or_default();
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let mut err = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = err.read_to_string(&mut all);
        all
    });
    Running {
        child,
        lines,
        stdout,
        stderr,
    }
}

impl Running {
    /// Blocks until a stdout line contains `needle` (panics after `timeout`).
    pub fn wait_for_line(&self, needle: &str, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(e) => panic!("no line with {needle:?} from bench: {e}"),
            }
        }
    }

    /// Sends `signal` (e.g. `libc::SIGINT`) to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child we started and have not reaped.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the process to end (panics after `timeout`, killing it).
    pub fn wait(mut self, timeout: std::time::Duration) -> Output {
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "bench still running after {timeout:?}\nstderr:\n{}",
                    self.stderr.join().unwrap()
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        Output {
            status,
            stdout: self.stdout.join().unwrap().into_bytes(),
            stderr: self.stderr.join().unwrap().into_bytes(),
        }
    }
}

/// Raises this process's open-file limit to its hard limit (servers in the test process
/// hold one descriptor per connection) and returns the new soft limit.
pub fn raise_open_file_limit() -> u64 {
    bench::cli::limits::raise_open_file_limit()
        .expect("reading the open-file limit")
        .soft
}
