//! `bench` as the tests run it: a small command builder ([`Bench`]), a finished run
//! ([`Run`]: exit status, output, time taken, the saved result) and a run in the background
//! ([`Running`]).
//!
//! Every run gets the same surroundings, whatever the shell that started the tests: no
//! inherited `BENCH_*` variable, `BENCH_LOG=warn`, a terminal [`COLUMNS`] wide (clap wraps
//! `--help` to it), no terminal on stdin, stdout or stderr, and no forced colours.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{BufRead, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tempfile::TempDir;
use wait_timeout::ChildExt as _;

use super::{gate, gpt2, result_json};

/// The longest one `bench` run of a test may take (the longest, a sweep or 10,000 streams,
/// take well under a minute on 2 cores): half of the 10 minutes a whole test may take
/// (`.config/nextest.toml`), so that a hung run fails its test naming the run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(300);

/// The terminal width every `bench` run sees.
pub const COLUMNS: &str = "100";

/// A `bench` command line being put together; [`Bench::run`] runs it to the end,
/// [`Bench::spawn`] starts it in the background.
#[must_use = "a command does nothing until it is run"]
pub struct Bench {
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
    /// The `--result-dir` of [`Bench::save_result`], kept with the finished run.
    results: Option<TempDir>,
    /// A private `BENCH_CACHE_DIR`, removed after the run.
    cache: Option<TempDir>,
    /// Run without `BENCH_LOG`: what a user sees by default.
    default_log: bool,
}

impl Bench {
    /// `bench` with no arguments yet.
    pub fn new() -> Bench {
        Bench {
            args: Vec::new(),
            envs: Vec::new(),
            results: None,
            cache: None,
            default_log: false,
        }
    }

    /// A benchmark run (`bench` with no subcommand: `serve`, the default) against the
    /// server at `url`, as [`Bench::with_server`] sets it up.
    pub fn against(url: &str) -> Bench {
        Bench::new().with_server(url)
    }

    /// Model `mock` at the server at `url`, the GPT-2 tokenizer and no progress bar.
    pub fn with_server(self, url: &str) -> Bench {
        self.args(["--model", "mock", "--tokenizer", &gpt2(), "--base-url", url])
            .arg("--disable-tqdm")
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Bench {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I>(mut self, args: I) -> Bench
    where
        I: IntoIterator,
        I::Item: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// `--backend NAME`.
    pub fn backend(self, name: &str) -> Bench {
        self.args(["--backend", name])
    }

    /// `--random-input-len INPUT --random-output-len OUTPUT` (the default dataset).
    pub fn random(self, input: u32, output: u32) -> Bench {
        self.arg("--random-input-len")
            .arg(input.to_string())
            .arg("--random-output-len")
            .arg(output.to_string())
    }

    /// `--num-prompts N`.
    pub fn prompts(self, n: u64) -> Bench {
        self.arg("--num-prompts").arg(n.to_string())
    }

    /// `--save-result` into a fresh directory, read back with [`Run::json`].
    pub fn save_result(mut self) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        self = self
            .arg("--save-result")
            .arg("--result-dir")
            .arg(dir.path());
        self.results = Some(dir);
        self
    }

    /// [`Bench::save_result`] with `--save-detailed` (the per-request lists).
    pub fn save_detailed(self) -> Bench {
        self.save_result().arg("--save-detailed")
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Bench {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// No `BENCH_LOG`: the run logs what a user sees by default.
    pub fn default_log(mut self) -> Bench {
        self.default_log = true;
        self
    }

    /// A private compiled-plugin cache (`BENCH_CACHE_DIR`), so the run compiles its
    /// plugins itself.
    pub fn private_cache(mut self) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        self = self.env("BENCH_CACHE_DIR", dir.path());
        self.cache = Some(dir);
        self
    }

    /// The command line as a shell would show it.
    fn shown(&self) -> String {
        let mut shown = String::from("bench");
        for arg in &self.args {
            shown.push(' ');
            shown.push_str(&arg.to_string_lossy());
        }
        shown
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_bench"));
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("BENCH_") {
                command.env_remove(key);
            }
        }
        if !self.default_log {
            command.env("BENCH_LOG", "warn");
        }
        command
            .env_remove("CLICOLOR_FORCE")
            .env("COLUMNS", COLUMNS)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .args(&self.args)
            .stdin(Stdio::null());
        command
    }

    /// Runs `bench` to its end (never panics on a non-zero exit), within [`RUN_TIMEOUT`]:
    /// a run still going then is killed and the test fails naming it, so that a hung run
    /// cannot hang the suite.
    pub fn run(self) -> Run {
        gate::enter();
        let started = Instant::now();
        let mut child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running bench");
        let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let stdout = read_all(Box::new(child.stdout.take().unwrap()));
        let stderr = read_all(Box::new(child.stderr.take().unwrap()));
        let Some(status) = child.wait_timeout(RUN_TIMEOUT).expect("waiting for bench") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bench still running after {RUN_TIMEOUT:?}, killed: {}\nstderr:\n{}",
                self.shown(),
                stderr.join().unwrap()
            );
        };
        Run {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
            took: started.elapsed(),
            command: self.shown(),
            results: self.results,
        }
    }

    /// Starts `bench` in the background, its output read by threads so that it never
    /// blocks on a full pipe; lines are also handed over as they arrive.
    pub fn spawn(self) -> Running {
        gate::enter();
        let started = Instant::now();
        let mut child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting bench");
        let (stdout_lines, stdout) = read_lines(child.stdout.take().unwrap());
        let (stderr_lines, stderr) = read_lines(child.stderr.take().unwrap());
        Running {
            child,
            started,
            command: self.shown(),
            results: self.results,
            stdout_lines,
            stderr_lines,
            stdout,
            stderr,
        }
    }
}

impl Default for Bench {
    fn default() -> Bench {
        Bench::new()
    }
}

/// Reads `pipe` on a thread: each line is sent as it arrives, and the thread returns
/// the whole text.
fn read_lines(pipe: impl std::io::Read + Send + 'static) -> (Receiver<String>, JoinHandle<String>) {
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(pipe).lines() {
            let line = line.unwrap_or_default();
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    (rx, reader)
}

/// A finished `bench` run. Shown with `{}`, it is the command line, the exit status and
/// both outputs: what a failed assertion should print.
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    /// From the start of the process to its exit.
    pub took: Duration,
    command: String,
    results: Option<TempDir>,
}

impl Run {
    pub fn success(&self) -> bool {
        self.status.success()
    }

    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Panics, showing the whole run, unless `bench` exited with status 0.
    #[track_caller]
    pub fn assert_success(self) -> Run {
        assert!(self.success(), "bench failed:\n{self}");
        self
    }

    /// Panics, showing the whole run, if `bench` exited with status 0.
    #[track_caller]
    pub fn assert_failure(self) -> Run {
        assert!(!self.success(), "bench should have failed:\n{self}");
        self
    }

    /// The result file that [`Bench::save_result`] asked for.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        result_json(self.result_dir())
    }

    /// The `--result-dir` of [`Bench::save_result`].
    #[track_caller]
    pub fn result_dir(&self) -> &Path {
        self.results
            .as_ref()
            .expect("the run was built without save_result()")
            .path()
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "$ {}\nstatus: {} after {:?}\nstdout:\n{}\nstderr:\n{}",
            self.command, self.status, self.took, self.stdout, self.stderr
        )
    }
}

/// A `bench` process started by [`Bench::spawn`].
pub struct Running {
    child: Child,
    started: Instant,
    command: String,
    results: Option<TempDir>,
    stdout_lines: Receiver<String>,
    stderr_lines: Receiver<String>,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Running {
    /// Blocks until a stdout line contains `needle` (panics after `timeout`).
    #[track_caller]
    pub fn wait_for_line(&self, needle: &str, timeout: Duration) {
        wait_for(&self.stdout_lines, "stdout", needle, timeout);
    }

    /// Blocks until a stderr line contains `needle` (panics after `timeout`).
    #[track_caller]
    pub fn wait_for_stderr_line(&self, needle: &str, timeout: Duration) {
        wait_for(&self.stderr_lines, "stderr", needle, timeout);
    }

    /// Sends `signal` (e.g. `libc::SIGINT`) to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on the pid of a child we started and have not reaped.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the process to end (panics after `timeout`, killing it).
    pub fn wait(mut self, timeout: Duration) -> Run {
        let Some(status) = self.child.wait_timeout(timeout).unwrap() else {
            let _ = self.child.kill();
            let _ = self.child.wait();
            panic!(
                "bench still running after {timeout:?}: {}\nstderr:\n{}",
                self.command,
                self.stderr.join().unwrap()
            );
        };
        Run {
            status,
            took: self.started.elapsed(),
            stdout: self.stdout.join().unwrap(),
            stderr: self.stderr.join().unwrap(),
            command: self.command,
            results: self.results,
        }
    }
}

#[track_caller]
fn wait_for(lines: &Receiver<String>, stream: &str, needle: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return,
            Ok(line) => seen.push(line),
            Err(e) => panic!(
                "no {stream} line with {needle:?} from bench ({e}); {stream} so far:\n{}",
                seen.join("\n")
            ),
        }
    }
}
