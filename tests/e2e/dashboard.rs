//! `--ui dashboard`: the live view of a run, drawn in a real terminal (a tmux pane of
//! 120x40) and read back as a user sees it (`tmux capture-pane`); then the normal result
//! block on the main screen, with the terminal restored.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use bench::mock::MockConfig;

use crate::common::*;

/// A tmux server of this test's own (`-L`, no user configuration), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("running tmux")
    }

    /// The pane's screen and the lines above it, as text.
    fn screen(&self) -> String {
        let out = self.run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "bench"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One of tmux's formats for the pane (`#{alternate_on}`).
    fn format(&self, format: &str) -> String {
        let out = self.run(&["display-message", "-p", "-t", "bench", format]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Tmux {
    /// A 120x40 pane running `command` in a session of its own; `None`, and a skip said
    /// where CI shows it, without tmux.
    fn start(command: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            skip::skipped(format_args!(
                "tmux is not on PATH: the dashboard is not drawn in a real terminal"
            ));
            return None;
        }
        static SESSIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let tmux = Tmux {
            socket: format!(
                "bench-dashboard-{}-{}",
                std::process::id(),
                SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ),
        };
        let started = tmux.run(&[
            "new-session",
            "-d",
            "-x",
            "120",
            "-y",
            "40",
            "-s",
            "bench",
            command,
        ]);
        assert!(started.status.success(), "{started:?}");
        Some(tmux)
    }
}

/// `bench` with `args` as a shell command for the pane, without the test run's `BENCH_*`
/// settings; the pane stays open after it (tmux shows a dead pane's cursor hidden, whatever
/// bench left), saying how bench exited (`bench-exit=N`).
fn bench_in_pane(args: &[&str]) -> String {
    let mut command = String::from("env");
    for (key, _) in std::env::vars() {
        if key.starts_with("BENCH_") {
            command.push_str(&format!(" -u {key}"));
        }
    }
    command.push_str(" BENCH_LOG=warn ");
    command.push_str(&quoted(env!("CARGO_BIN_EXE_bench")));
    for arg in args {
        command.push(' ');
        command.push_str(&quoted(arg));
    }
    command.push_str("; echo bench-exit=$?; sleep 60");
    command
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// A shell word, quoted.
fn quoted(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// The number after `label` on the screen.
fn number_after(screen: &str, label: &str) -> Option<u64> {
    let (_, rest) = screen.split_once(label)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The numbers of the latency table's row of `metric` (count, mean, p50, p90, p99).
fn row(screen: &str, metric: &str) -> Option<Vec<f64>> {
    let line = screen
        .lines()
        .find(|l| l.trim_start_matches(['│', ' ']).starts_with(metric))?;
    let numbers: Vec<f64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    (numbers.len() == 5).then_some(numbers)
}

#[test]
fn the_dashboard_shows_the_run_live_then_the_result() {
    // TTFT uniform on [50 ms, 150 ms), then 7 gaps of 20 ms: about 0.24 s a request,
    // 100 requests 8 at a time, about 3 s.
    let m = mock(MockConfig {
        ttft: Duration::from_millis(50),
        ttft_spread: Duration::from_millis(100),
        output_len: 8,
        itl: Duration::from_millis(20),
        // vLLM's /metrics, whose gauges follow the load: read during the run.
        server_metrics: bench::mock::ServerMetrics {
            family: Some(bench::mock::ServerFamily::Vllm),
            ..Default::default()
        },
        ..MockConfig::default()
    });
    let results = tempfile::tempdir().unwrap();
    let (prompts, cap) = (100u64, 8u64);
    let command = bench_in_pane(&[
        "serve",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--num-prompts",
        &prompts.to_string(),
        "--max-concurrency",
        &cap.to_string(),
        "--save-result",
        "--result-dir",
        results.path().to_str().unwrap(),
        "--server-metrics-interval",
        "0.2",
        "--ui",
        "dashboard",
    ]);
    let Some(tmux) = Tmux::start(&command) else {
        return;
    };

    // The dashboard, once a request has completed and the server's /metrics was read.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (screen, ttft) = loop {
        let screen = tmux.screen();
        if let Some(ttft) = row(&screen, "TTFT").filter(|r| r[0] > 0.0)
            && screen.contains("vllm:num_requests_running:")
        {
            break (screen, ttft);
        }
        assert!(
            Instant::now() < deadline && !screen.contains("bench-exit="),
            "no dashboard with a TTFT row:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(screen.contains("bench serve: live dashboard"), "{screen}");
    assert_eq!(
        tmux.format("#{alternate_on}"),
        "1",
        "drawn on the alternate screen"
    );
    let completed = number_after(&screen, "Completed:").expect("a completed count");
    let in_flight = number_after(&screen, "In flight:").expect("an in-flight count");
    assert!((1..=prompts).contains(&completed), "{completed}:\n{screen}");
    // In flight until recorded: the cap's requests, and answers that have ended but wait
    // for the decode thread (as on --metrics-port).
    assert!(in_flight <= 2 * cap, "{in_flight} in flight:\n{screen}");
    // Milliseconds: p50 <= p90 <= p99 within the mock's TTFT (and some slack).
    let (p50, p90, p99) = (ttft[2], ttft[3], ttft[4]);
    assert!(p50 <= p90 && p90 <= p99, "{ttft:?}");
    assert!((40.0..400.0).contains(&p50), "p50 TTFT {p50} ms:\n{screen}");
    assert!(row(&screen, "E2EL").is_some(), "{screen}");
    // The server's own count of requests running, within the client's cap.
    let running = number_after(&screen, "vllm:num_requests_running:").expect("a gauge");
    assert!(running <= cap, "{running} running:\n{screen}");
    assert!(screen.contains("Schedule lag (ms):"), "{screen}");

    // The run ends: the main screen back, its cursor shown, and the result block on it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tmux.screen().contains("bench-exit=") {
        assert!(
            Instant::now() < deadline,
            "still running:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let screen = tmux.screen();
    assert!(screen.contains("bench-exit=0"), "{screen}");
    assert_eq!(tmux.format("#{alternate_on}"), "0", "{screen}");
    assert_eq!(tmux.format("#{cursor_flag}"), "1", "the cursor is shown");
    assert!(screen.contains("Serving Benchmark Result"), "{screen}");
    assert!(!screen.contains("live dashboard"), "{screen}");
    let result = result_json(results.path());
    assert_eq!(result["completed"].as_u64(), Some(prompts));
}

/// Without `--ui`, in a terminal: vLLM's progress bar, with the requests in flight and
/// failed (by kind) after its rate while the run goes on.
#[test]
fn the_progress_bar_says_what_is_in_flight_and_what_failed() {
    // 7 gaps of 20 ms: about 0.14 s a request, 120 requests 4 at a time, about 4 s; a
    // quarter of them answered with HTTP 500 at once.
    let m = mock(MockConfig {
        output_len: 8,
        itl: Duration::from_millis(20),
        fail_rate: 0.25,
        ..MockConfig::default()
    });
    let results = tempfile::tempdir().unwrap();
    let (prompts, cap) = (120u64, 4u64);
    let command = bench_in_pane(&[
        "serve",
        "--model",
        "mock",
        "--tokenizer",
        &gpt2(),
        "--base-url",
        &m.url,
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--num-prompts",
        &prompts.to_string(),
        "--max-concurrency",
        &cap.to_string(),
        "--save-result",
        "--result-dir",
        results.path().to_str().unwrap(),
    ]);
    let Some(tmux) = Tmux::start(&command) else {
        return;
    };
    // The bar, once a request has failed: "..., 12.3it/s, 4 in flight, 2 failed (http-500 2)]".
    let deadline = Instant::now() + Duration::from_secs(60);
    let line = loop {
        let screen = tmux.screen();
        if let Some(line) = screen
            .lines()
            .find(|l| l.contains(" in flight, ") && l.contains(" failed ("))
        {
            break line.to_owned();
        }
        assert!(
            Instant::now() < deadline && !screen.contains("bench-exit="),
            "no progress bar with requests in flight and failed:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let in_flight = line
        .split(", ")
        .find_map(|part| part.strip_suffix(" in flight"))
        .and_then(|n| n.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no in-flight count: {line}"));
    // The cap's requests, and answers that have ended but wait for the decode thread.
    assert!(in_flight <= 2 * cap, "{in_flight} in flight: {line}");
    let (_, failures) = line.split_once(" in flight, ").unwrap();
    let (failed, kinds) = failures.split_once(" failed (").unwrap();
    let failed: u64 = failed.parse().unwrap_or_else(|_| panic!("{line}"));
    let by_kind: u64 = kinds
        .trim_end_matches([')', ']', ' '])
        .split(", ")
        .map(|kind| kind.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(failed >= 1 && by_kind == failed, "{line}");
    assert!(line.contains("/120 ["), "{line}");

    // The run ends: the bar gives way to the result, whose failures include those shown.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tmux.screen().contains("bench-exit=") {
        assert!(
            Instant::now() < deadline,
            "still running:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let screen = tmux.screen();
    assert!(screen.contains("bench-exit=0"), "{screen}");
    assert!(screen.contains("Serving Benchmark Result"), "{screen}");
    let result = result_json(results.path());
    assert_eq!(
        result["completed"].as_u64().unwrap() + result["failed"].as_u64().unwrap(),
        prompts
    );
    assert!(result["failed"].as_u64().unwrap() >= failed, "{line}");
}

#[test]
fn the_dashboard_without_a_terminal_is_the_console_with_a_warning() {
    let m = mock(MockConfig::default());
    let out = Bench::against(&m.url)
        .random(16, 4)
        .prompts(5)
        .args(["--ui", "dashboard"])
        .run()
        .assert_success();
    assert!(
        out.stderr.contains(
            "WARNING: --ui dashboard needs standard output and standard error to be a terminal; \
             showing the console instead"
        ),
        "{out}"
    );
    assert!(out.stdout.contains("Serving Benchmark Result"), "{out}");
    // Nothing of the dashboard's screen in the output.
    assert!(!out.stdout.contains("\x1b[?1049h"), "{out}");
}

/// `--ui dashboard` in a sweep's `--bench-cmd`: each run of the sweep is drawn on the
/// dashboard, which gives way to that run's result block before the next run starts.
#[test]
fn each_run_of_a_sweep_is_on_the_dashboard() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bench_bin = env!("CARGO_BIN_EXE_bench");
    // 40 requests of 8 chunks (TTFT 50 ms, gaps 20 ms), 4 at a time: about 2 s a run.
    let serve_cmd = format!(
        "{bench_bin} mock-server --host 127.0.0.1 --port {port} --ttft-ms 50 --itl-ms 20 \
         --output-len 8"
    );
    let bench_cmd = format!(
        "bench serve --model mock --tokenizer {} --base-url http://127.0.0.1:{port} \
         --dataset-name random --random-input-len 8 --random-output-len 8 \
         --num-prompts 40 --ui dashboard",
        gpt2()
    );
    let params = dir.path().join("params.json");
    std::fs::write(
        &params,
        r#"[{"max_concurrency": 2}, {"max_concurrency": 4}]"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let command = bench_in_pane(&[
        "sweep",
        "serve",
        "-e",
        "exp",
        "-o",
        out.to_str().unwrap(),
        "--serve-cmd",
        &serve_cmd,
        "--bench-cmd",
        &bench_cmd,
        "--bench-params",
        params.to_str().unwrap(),
        "--num-runs",
        "1",
        "--after-bench-cmd",
        "true",
    ]);
    let Some(tmux) = Tmux::start(&command) else {
        return;
    };
    // Count the dashboard's appearances: drawn, gone, drawn again.
    let (mut shown, mut drawn) = (0, false);
    let deadline = Instant::now() + Duration::from_secs(120);
    let screen = loop {
        let screen = tmux.screen();
        let now = screen.contains("bench serve: live dashboard");
        if now && !drawn {
            shown += 1;
        }
        drawn = now;
        if screen.contains("bench-exit=") {
            break screen;
        }
        assert!(Instant::now() < deadline, "still running:\n{screen}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(screen.contains("bench-exit=0"), "{screen}");
    assert_eq!(shown, 2, "one dashboard per run of the sweep:\n{screen}");
    assert_eq!(tmux.format("#{alternate_on}"), "0", "{screen}");
    assert_eq!(
        screen.matches("Serving Benchmark Result").count(),
        2,
        "each run's result block:\n{screen}"
    );
}
