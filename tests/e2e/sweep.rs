//! `bench sweep serve`, `serve_sla` and `serve_workload` with `bench mock-server` as the
//! server command (behind a one-line script that records each server's pid, so a test can
//! tell that no server outlived the sweep).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Bench, gate, gpt2};

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A sweep's files, its server script and its port.
struct Setup {
    dir: tempfile::TempDir,
    port: u16,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("server.sh"),
            format!(
                "echo $$ >> {}\nexec {} mock-server \"$@\"\n",
                dir.path().join("pids.txt").display(),
                env!("CARGO_BIN_EXE_bench")
            ),
        )
        .unwrap();
        Setup {
            dir,
            port: free_port(),
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The mock server on the port, with `flags`; the cache resets logged.
    fn serve_cmd(&self, flags: &str) -> String {
        format!(
            "sh {} --host 127.0.0.1 --port {} {flags}",
            self.path("server.sh").display(),
            self.port
        )
    }

    /// `bench serve` flags for `prompts` short random requests against the mock.
    fn bench_cmd(&self, prompts: u32) -> String {
        format!(
            "bench serve --model mock --tokenizer {} --base-url http://127.0.0.1:{} \
             --dataset-name random --random-input-len 8 --random-output-len 4 \
             --num-prompts {prompts} --disable-tqdm",
            gpt2(),
            self.port
        )
    }

    fn write(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, value.to_string()).unwrap();
        path
    }

    /// `bench sweep SUBCOMMAND` with the server's tracing on (its resets are logged),
    /// results in `out/exp`.
    fn sweep(&self, subcommand: &str) -> Bench {
        Bench::new()
            .env("BENCH_LOG", "warn,bench_mock=info")
            .args(["sweep", subcommand, "-e", "exp", "-o"])
            .arg(self.path("out"))
            .args(["--server-stop-grace", "5"])
    }

    fn exp(&self) -> PathBuf {
        self.path("out/exp")
    }

    /// The pids of every server started so far.
    fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.path("pids.txt"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }

    #[track_caller]
    fn assert_servers_gone(&self) {
        let pids = self.pids();
        assert!(!pids.is_empty(), "no server was started");
        for pid in pids {
            assert!(!alive(pid), "server {pid} still runs after the sweep");
        }
    }
}

/// Whether `pid` still runs (a zombie does not count).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.chars().next());
            !matches!(state, Some('Z' | 'X'))
        })
        .unwrap_or(false)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

#[test]
fn sweep_serve_runs_the_product_with_one_server_per_serve_combination() {
    let s = Setup::new();
    let serve = s.write("serve.json", &json!([{"ttft_ms": 5}, {"ttft_ms": 30}]));
    let bench = s.write(
        "bench.json",
        &json!([{"random_output_len": 2}, {"_benchmark_name": "long", "random_output_len": 6}]),
    );
    let run = s
        .sweep("serve")
        .args(["--serve-cmd", &s.serve_cmd("")])
        .args(["--bench-cmd", &s.bench_cmd(3)])
        .arg("--serve-params")
        .arg(&serve)
        .arg("--bench-params")
        .arg(&bench)
        .args(["--num-runs", "2"])
        .run()
        .assert_success();

    // One server per serve combination, each stopped.
    assert_eq!(s.pids().len(), 2, "{run}");
    s.assert_servers_gone();
    let exp = s.exp();
    for (serve, ttft) in [("ttft_ms=5", 5.0), ("ttft_ms=30", 30.0)] {
        let log = std::fs::read_to_string(exp.join(format!("SERVE--{serve}-server.log"))).unwrap();
        assert!(log.contains("bench mock-server listening"), "{log}");
        // Reset after each of the combination's four runs.
        assert_eq!(
            log.matches("/reset_prefix_cache: reset").count(),
            4,
            "{log}"
        );
        assert_eq!(log.matches("/reset_mm_cache: reset").count(), 4, "{log}");
        for (bench, output_len) in [("random_output_len=2", 2), ("long", 6)] {
            let dir = exp.join(format!("SERVE--{serve}-BENCH--{bench}"));
            for n in 0..2 {
                let doc = read_json(&dir.join(format!("run={n}.json")));
                assert_eq!(doc["run_number"], json!(n));
                assert_eq!(doc["ttft_ms"], json!(ttft as u64));
                assert_eq!(doc["random_output_len"], json!(output_len));
                assert_eq!(doc["completed"], json!(3), "{doc}");
                assert_eq!(doc["total_output_tokens"], json!(3 * output_len));
                // The server's parameter reached it: its TTFT is at least that.
                assert!(doc["mean_ttft_ms"].as_f64().unwrap() >= ttft, "{doc}");
                // vLLM's percentile metrics, e2el included (what the SLA search reads).
                assert!(doc.get("p99_e2el_ms").is_some());
            }
            assert_eq!(
                read_json(&dir.join("summary.json"))
                    .as_array()
                    .unwrap()
                    .len(),
                2
            );
        }
    }
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 8, "{csv}");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for column in ["run_number", "ttft_ms", "random_output_len", "mean_ttft_ms"] {
        assert!(header.contains(&column), "{column} missing: {header:?}");
    }
    assert!(run.stdout.contains("Experiment has been saved at"), "{run}");
}

/// `--after-bench-cmd` runs after every benchmark instead of the cache resets (vLLM's
/// rule), its output shown with `--show-stdout`; one that fails ends the sweep, naming it.
#[test]
fn after_bench_cmd_replaces_the_resets_after_every_run() {
    let s = Setup::new();
    let marks = s.path("after.txt");
    let after = format!(
        "sh -c 'echo after-bench-ran; echo x >> {}'",
        marks.display()
    );
    let run = s
        .sweep("serve")
        .args(["--serve-cmd", &s.serve_cmd("")])
        .args(["--bench-cmd", &s.bench_cmd(2)])
        .args([
            "--num-runs",
            "3",
            "--after-bench-cmd",
            &after,
            "--show-stdout",
        ])
        .run()
        .assert_success();
    let ran = std::fs::read_to_string(&marks).unwrap_or_default();
    assert_eq!(ran.lines().count(), 3, "{run}");
    assert_eq!(run.stdout.matches("after-bench-ran").count(), 3, "{run}");
    let log = std::fs::read_dir(s.exp())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("server.log"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the server's log");
    assert!(log.contains("bench mock-server listening"), "{log}");
    assert!(!log.contains("/reset_prefix_cache"), "{log}");
    s.assert_servers_gone();

    let failing = Setup::new();
    let run = failing
        .sweep("serve")
        .args(["--serve-cmd", &failing.serve_cmd("")])
        .args(["--bench-cmd", &failing.bench_cmd(2)])
        .args(["--num-runs", "1", "--after-bench-cmd", "false"])
        .run()
        .assert_failure();
    assert!(
        run.stderr.contains("--after-bench-cmd `false` failed"),
        "{run}"
    );
    failing.assert_servers_gone();
}

/// A bench command that names no server (`--base-url`, `--host`, `--port`) is sent to the
/// serve command's, as the ready check finds it; one that names its own keeps it.
#[test]
fn a_bench_command_without_an_address_goes_to_the_managed_server() {
    let s = Setup::new();
    let bench_cmd = format!(
        "--model mock --tokenizer {} --dataset-name random --random-input-len 8 \
         --random-output-len 2 --num-prompts 2 --disable-tqdm",
        gpt2()
    );
    let sweep = |bench_cmd: &str, extra: &[&str]| {
        s.sweep("serve")
            .args(["--serve-cmd", &s.serve_cmd("")])
            .args(["--bench-cmd", bench_cmd])
            .args(["--num-runs", "1"])
            .args(extra)
            .run()
    };
    let dry = sweep(&bench_cmd, &["--dry-run"]).assert_success();
    let address = format!("--base-url http://127.0.0.1:{}", s.port);
    assert!(dry.stdout.contains(&address), "{dry}");
    // A command's own address wins.
    let own = format!("{bench_cmd} --port 9");
    let dry = sweep(&own, &["--dry-run"]).assert_success();
    assert!(!dry.stdout.contains("--base-url"), "{dry}");
    assert!(dry.stdout.contains("--port 9"), "{dry}");
    let run = sweep(&bench_cmd, &[]).assert_success();
    assert!(run.stdout.contains(&address), "{run}");
    assert_eq!(
        read_json(&s.exp().join("run=0.json"))["completed"],
        json!(2)
    );
    s.assert_servers_gone();
}

#[test]
fn dry_run_prints_the_commands_and_runs_nothing() {
    let s = Setup::new();
    let serve = s.write("serve.json", &json!([{"ttft_ms": 5}, {"ttft_ms": 30}]));
    let run = s
        .sweep("serve")
        .args(["--serve-cmd", &s.serve_cmd("")])
        .args(["--bench-cmd", &s.bench_cmd(3)])
        .arg("--serve-params")
        .arg(&serve)
        .args(["--num-runs", "2", "--dry-run"])
        .run()
        .assert_success();
    assert!(
        run.stdout.contains(&format!(
            "Server command: {} --ttft-ms 30",
            s.serve_cmd("").trim()
        )),
        "{run}"
    );
    assert_eq!(
        run.stdout.matches("Benchmark command: bench serve").count(),
        4,
        "{run}"
    );
    assert!(
        run.stdout.contains("--result-filename 'run=1.json'"),
        "{run}"
    );
    assert!(run.stdout.contains("Experiment will be saved at"), "{run}");
    assert!(s.pids().is_empty(), "a server was started");
    assert!(!s.exp().exists(), "a dry run wrote files");
}

#[test]
fn resume_runs_only_what_a_failed_sweep_left_and_the_server_is_stopped() {
    let s = Setup::new();
    // The second combination's requests go to a port nothing listens on: it fails.
    let bench = s.write(
        "bench.json",
        &json!({"good": {"random_output_len": 2}, "bad": {"base_url": "http://127.0.0.1:9"}}),
    );
    let sweep = |extra: &[&str]| {
        s.sweep("serve")
            .args(["--serve-cmd", &s.serve_cmd("")])
            .args(["--bench-cmd", &s.bench_cmd(2)])
            .arg("--bench-params")
            .arg(&bench)
            .args(["--num-runs", "2"])
            .args(extra)
            .run()
    };
    let failed = sweep(&[]).assert_failure();
    assert!(failed.stderr.contains("--resume"), "{failed}");
    s.assert_servers_gone();
    let exp = s.exp();
    assert!(exp.join("BENCH--good/summary.json").is_file());
    assert!(
        !exp.join("BENCH--bad/run=0.json").exists(),
        "a failed run left a result"
    );

    // Without --resume the experiment is not overwritten.
    let refused = sweep(&[]).assert_failure();
    assert!(refused.stderr.contains("--resume"), "{refused}");

    s.write(
        "bench.json",
        &json!({"good": {"random_output_len": 2}, "bad": {"random_output_len": 3}}),
    );
    let resumed = sweep(&["--resume"]).assert_success();
    assert_eq!(
        resumed.stdout.matches("[SKIPPED BENCHMARK]").count(),
        2,
        "{resumed}"
    );
    assert_eq!(
        read_json(&exp.join("BENCH--bad/run=1.json"))["completed"],
        json!(2)
    );
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
    s.assert_servers_gone();
}

#[test]
fn sigint_stops_the_sweep_and_its_server() {
    let s = Setup::new();
    let running = s
        .sweep("serve")
        .args(["--serve-cmd", &s.serve_cmd("--ttft-ms 1000")])
        .args(["--bench-cmd", &s.bench_cmd(2)])
        .args(["--num-runs", "1"])
        .spawn();
    // Into the measured run, whose requests wait a second for their first token.
    running.wait_for_line("Starting main benchmark run", Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.pids().len(), 1);
    assert!(alive(s.pids()[0]));
    running.signal(libc::SIGINT);
    let run = running.wait(Duration::from_secs(20)).assert_failure();
    assert!(run.stderr.contains("interrupted"), "{run}");
    assert!(run.stderr.contains("--resume"), "{run}");
    s.assert_servers_gone();
    for kept in ["run=0.json", "run=0.pytorch.json"] {
        assert!(
            !s.exp().join(kept).exists(),
            "the interrupted run's {kept} was kept"
        );
    }
    assert!(s.exp().join("server.log").is_file());
}

#[test]
fn serve_sla_finds_the_known_capacity_and_shares_runs_between_slas() {
    // The answer rests on measured TTFTs (30 ms from each bound): no other test loads the
    // machine meanwhile.
    let _alone = gate::exclusive();
    let s = Setup::new();
    // TTFT is 20 ms plus 60 ms per request already running: at concurrency c the later
    // requests wait 20 + 60 (c - 1) ms. p99 TTFT <= 290 holds up to c = 5 (260 ms, 320 at
    // 6); <= 170 up to c = 3 (140 ms, 200 at 4).
    let slas = s.write(
        "sla.json",
        &json!([{"p99_ttft_ms": "<=290"}, {"p99_ttft_ms": "<=170"}]),
    );
    let run = s
        .sweep("serve_sla")
        .args([
            "--serve-cmd",
            &s.serve_cmd("--ttft-ms 20 --ttft-per-running-ms 60"),
        ])
        .args(["--bench-cmd", &s.bench_cmd(12)])
        .arg("--sla-params")
        .arg(&slas)
        .args(["--sla-variable", "max_concurrency", "--num-runs", "1"])
        .run()
        .assert_success();
    let results = read_json(&s.exp().join("sla_results.json"));
    assert_eq!(results[0]["value"], json!(5), "{results:#}\n{run}");
    assert_eq!(results[1]["value"], json!(3), "{results:#}\n{run}");
    assert!(s.exp().join("SLA--p99_ttft_ms<=290.00.json").is_file());
    // Few runs: one at "infinity", a doubling and a bisection; the second SLA reads the
    // first's values back and measures only what is new.
    let measured: Vec<u64> = s
        .exp()
        .read_dir()
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_prefix("max_concurrency=")
                .map(|v| v.parse().unwrap())
        })
        .collect();
    assert!(measured.len() <= 8, "{measured:?}");
    let runs = run.stdout.matches("[BEGIN BENCHMARK]").count();
    let skipped = run.stdout.matches("[SKIPPED BENCHMARK]").count();
    assert_eq!(runs - skipped, measured.len(), "{run}");
    assert!(skipped >= 2, "the second SLA measured again: {run}");
    assert_eq!(s.pids().len(), 1);
    s.assert_servers_gone();
}

#[test]
fn serve_workload_scans_evenly_between_serial_and_batch() {
    let s = Setup::new();
    let run = s
        .sweep("serve_workload")
        .args(["--serve-cmd", &s.serve_cmd("--ttft-ms 10")])
        .args(["--bench-cmd", &s.bench_cmd(8)])
        .args(["--workload-var", "max_concurrency", "--sla-iters", "4"])
        .args(["--num-runs", "1"])
        .run()
        .assert_success();
    // The levels run, from the folders' names.
    let mut values: Vec<u64> = s
        .exp()
        .read_dir()
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.rsplit_once("WL--max_concurrency=")
                .map(|(_, v)| v.parse().unwrap())
        })
        .collect();
    values.sort_unstable();
    // Serial (1) and batch (all 8 at once), and up to two levels between.
    assert_eq!(values.first(), Some(&1), "{values:?}\n{run}");
    assert_eq!(values.last(), Some(&8), "{values:?}");
    assert!((3..=4).contains(&values.len()), "{values:?}");
    let csv = std::fs::read_to_string(s.exp().join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + values.len(), "{csv}");
    assert!(
        s.exp()
            .join("BENCH--max_concurrency=1-WL--max_concurrency=1/run=0.json")
            .is_file()
    );
    s.assert_servers_gone();
}

#[test]
fn continue_on_error_records_a_failed_combination_and_finishes_the_sweep() {
    let s = Setup::new();
    let bench = s.write(
        "bench.json",
        &json!({"bad": {"base_url": "http://127.0.0.1:9"}, "good": {"random_output_len": 2}}),
    );
    let run = s
        .sweep("serve")
        .args(["--serve-cmd", &s.serve_cmd("")])
        .args(["--bench-cmd", &s.bench_cmd(2)])
        .arg("--bench-params")
        .arg(&bench)
        .args(["--num-runs", "1", "--warmup-num-prompts", "1"])
        .arg("--continue-on-error")
        .run()
        .assert_success();
    let exp = s.exp();
    let failure = read_json(&exp.join("BENCH--bad/run=0.failure.json"));
    assert_eq!(
        failure["bench_overrides"]["base_url"],
        json!("http://127.0.0.1:9")
    );
    assert!(
        run.stdout.contains("[NO SUCCESSFUL MEASURED RUNS]"),
        "{run}"
    );
    assert!(!exp.join("BENCH--bad/summary.json").exists());
    // The good combination ran after the failure, its warm-up outside the summary.
    assert_eq!(
        read_json(&exp.join("BENCH--good/warmup.json"))["completed"],
        json!(1)
    );
    let summary = read_json(&exp.join("BENCH--good/summary.json"));
    assert_eq!(summary.as_array().unwrap().len(), 1);
    assert_eq!(summary[0]["run_number"], json!(0));
    s.assert_servers_gone();
}

/// Accuracy against load: `bench sweep serve` over two servers (every answer right, half of
/// them wrong) and two concurrencies of the `gsm8k` dataset, then `bench sweep plot` with
/// `--var-y accuracy`: each run's accuracy is the one its server was told to give, and the
/// figure has a curve per server with a point per concurrency.
#[test]
fn sweep_plots_accuracy_against_load() {
    let s = Setup::new();
    let key = crate::common::data("datasets/gsm8k/test.jsonl");
    let serve = s.write(
        "serve.json",
        &json!([{"wrong_answer_rate": 0}, {"wrong_answer_rate": 0.5}]),
    );
    let bench = s.write(
        "bench.json",
        &json!([{"max_concurrency": 1}, {"max_concurrency": 4}]),
    );
    let bench_cmd = format!(
        "bench serve --model mock --tokenizer {} --base-url http://127.0.0.1:{} \
         --dataset-name gsm8k --dataset-path {} --num-prompts 8 --disable-tqdm \
         --ready-check-timeout-sec 0",
        gpt2(),
        s.port,
        key.display()
    );
    let run = s
        .sweep("serve")
        .args([
            "--serve-cmd",
            &s.serve_cmd(&format!("--answer-key {}", key.display())),
        ])
        .args(["--bench-cmd", &bench_cmd])
        .arg("--serve-params")
        .arg(&serve)
        .arg("--bench-params")
        .arg(&bench)
        .run()
        .assert_success();
    s.assert_servers_gone();
    let mut measured = Vec::new();
    for entry in std::fs::read_dir(s.exp()).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("run=0.json").exists() {
            let doc = read_json(&dir.join("run=0.json"));
            assert_eq!(doc["graded_requests"], json!(8), "{doc}");
            measured.push((
                doc["wrong_answer_rate"].as_f64().unwrap(),
                doc["max_concurrency"].as_u64().unwrap(),
                doc["accuracy"].as_f64().unwrap(),
            ));
        }
    }
    measured.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(
        measured,
        [(0.0, 1, 1.0), (0.0, 4, 1.0), (0.5, 1, 0.5), (0.5, 4, 0.5)],
        "{run}"
    );

    let plot = Bench::new()
        .args(["sweep", "plot"])
        .arg(s.exp())
        .args(["--var-x", "max_concurrency", "--var-y", "accuracy"])
        .args(["--curve-by", "wrong_answer_rate"])
        .args(["--fig-format", "svg", "--fig-name", "accuracy"])
        .run()
        .assert_success();
    assert!(
        plot.stdout.contains("accuracy vs max_concurrency"),
        "{plot}"
    );
    let svg = std::fs::read_to_string(s.exp().join("accuracy.svg")).unwrap();
    assert!(
        svg.contains("wrong_answer_rate=0.5"),
        "the legend names the curves"
    );
    assert_eq!(svg.matches("<circle").count(), 4, "a point per run: {svg}");
}
