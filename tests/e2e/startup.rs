//! `bench startup` and `bench sweep startup`: start times of a server command (the test's
//! own `bench mock-server` behind a small shell script whose start is slow until its cache
//! holds a marker, as a compiling server's is) and of the native engine.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Bench, data};

/// How long the scripted server takes to start while its cache is empty.
const COLD_DELAY: f64 = 0.4;

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server script in `dir`: it records its pid and what its cache (`MOCK_CACHE`, a
/// variable bench was asked to make fresh) and vLLM's (`VLLM_CACHE_ROOT`, a default one)
/// held when it started, sleeps [`COLD_DELAY`] and leaves a marker when its cache has
/// none, then becomes the mock server with the script's arguments.
fn server_script(dir: &Path) -> PathBuf {
    let script = dir.join("server.sh");
    let starts = dir.join("starts.txt");
    let pids = dir.join("pids.txt");
    std::fs::write(
        &script,
        format!(
            r#"echo $$ >> {pids}
echo "$MOCK_CACHE $(ls -A "$MOCK_CACHE" | wc -l) $VLLM_CACHE_ROOT $(ls -A "$VLLM_CACHE_ROOT" | wc -l)" >> {starts}
if [ ! -e "$MOCK_CACHE/compiled" ]; then sleep {COLD_DELAY}; touch "$MOCK_CACHE/compiled"; fi
exec {bench} mock-server "$@"
"#,
            pids = pids.display(),
            starts = starts.display(),
            bench = env!("CARGO_BIN_EXE_bench"),
        ),
    )
    .unwrap();
    script
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

/// Every pid the script recorded is gone.
#[track_caller]
fn assert_servers_gone(dir: &Path) {
    let pids = std::fs::read_to_string(dir.join("pids.txt")).unwrap();
    for pid in pids.lines() {
        let pid: i32 = pid.trim().parse().unwrap();
        assert!(!alive(pid), "server {pid} still runs after bench exited");
    }
}

fn times(doc: &Value, key: &str) -> Vec<f64> {
    doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} missing: {doc}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
        .unwrap()
}

#[test]
fn cold_starts_get_fresh_caches_and_warm_starts_reuse_the_one_the_warmup_filled() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let script = server_script(dir.path());
    let out = dir.path().join("startup.json");
    let work = dir.path().join("work");
    let run = Bench::new()
        .args(["startup", "--serve-cmd"])
        .arg(format!("sh {} --port {port}", script.display()))
        .args([
            "--cache-env",
            "MOCK_CACHE",
            "--ready-check-timeout-sec",
            "60",
        ])
        .args(["--num-iters-cold", "3", "--num-iters-warmup", "1"])
        .args(["--num-iters-warm", "2", "--ready-check-interval-ms", "10"])
        .arg("--output-json")
        .arg(&out)
        .arg("--work-dir")
        .arg(&work)
        .run()
        .assert_success();

    // The port came from the command line: vLLM's address rule, /health.
    let doc = read_json(&out);
    assert_eq!(
        doc["ready_url"],
        json!(format!("http://localhost:{port}/health"))
    );
    for key in [
        "avg_cold_startup_time",
        "cold_startup_times",
        "cold_startup_percentiles",
        "avg_warm_startup_time",
        "warm_startup_times",
        "warm_startup_percentiles",
    ] {
        assert!(doc.get(key).is_some(), "{key} missing: {doc}");
    }
    let percentiles: Vec<&str> = doc["cold_startup_percentiles"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(percentiles, ["10", "25", "50", "75", "90", "99"]);

    // Every cold start found its cache empty and paid the delay; the warm-up paid it and
    // filled the cache; the warm starts found the marker.
    let cold = times(&doc, "cold_startup_times");
    let warmup = times(&doc, "warmup_startup_times");
    let warm = times(&doc, "warm_startup_times");
    assert_eq!((cold.len(), warmup.len(), warm.len()), (3, 1, 2), "{doc}");
    for t in cold.iter().chain(&warmup) {
        assert!(
            *t >= COLD_DELAY,
            "a start with an empty cache took {t} s: {doc}"
        );
    }
    for t in &warm {
        assert!(*t < COLD_DELAY, "a warm start took {t} s: {doc}");
    }
    let avg = doc["avg_cold_startup_time"].as_f64().unwrap();
    assert!((avg - cold.iter().sum::<f64>() / 3.0).abs() < 1e-9);

    // What each start saw: fresh, empty, distinct directories for both variables on cold
    // starts; one shared directory, holding the marker, on warm ones.
    let starts = std::fs::read_to_string(dir.path().join("starts.txt")).unwrap();
    let starts: Vec<Vec<&str>> = starts
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(starts.len(), 6, "{starts:?}");
    for s in &starts[..4] {
        assert_eq!(
            (s[1], s[3]),
            ("0", "0"),
            "a cold or warm-up start's caches: {s:?}"
        );
    }
    let mut cold_dirs: Vec<&str> = starts[..3].iter().map(|s| s[0]).collect();
    cold_dirs.sort();
    cold_dirs.dedup();
    assert_eq!(cold_dirs.len(), 3, "cold starts shared a cache: {starts:?}");
    for s in &starts[4..] {
        assert_eq!(s[0], starts[3][0], "warm starts use the warm-up's cache");
        assert_eq!(
            s[1], "1",
            "the warm cache holds the warm-up's marker: {s:?}"
        );
    }
    // Logs stay, the caches go.
    for name in ["cold-1", "cold-3", "warmup-1", "warm-2"] {
        assert!(work.join(name).join("server.log").is_file(), "{name}");
    }
    assert!(!work.join("cold-1/cache").exists());
    assert!(!work.join("warm-cache").exists());
    assert!(
        run.stdout.contains("STARTUP TIME BENCHMARK RESULTS"),
        "{run}"
    );
    assert!(run.stdout.contains("Avg startup time:"), "{run}");
    assert_servers_gone(dir.path());
}

#[test]
fn a_server_that_exits_early_is_an_error_naming_the_command_and_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let run = Bench::new()
        .args([
            "startup",
            "--serve-cmd",
            "sh -c 'echo no model here >&2; exit 3'",
        ])
        .args(["--ready-url", "http://127.0.0.1:9/health"])
        .arg("--work-dir")
        .arg(&work)
        .run()
        .assert_failure();
    let log = work.join("cold-1/server.log");
    assert!(run.stderr.contains("cold start 1 of 3"), "{run}");
    assert!(
        run.stderr
            .contains("the server command `sh -c 'echo no model here >&2; exit 3'` exited"),
        "{run}"
    );
    assert!(run.stderr.contains(&log.display().to_string()), "{run}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "no model here\n");
}

#[test]
fn a_server_that_never_gets_ready_times_out_and_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids.txt");
    let run = Bench::new()
        .args(["startup", "--serve-cmd"])
        .arg(format!(
            "sh -c 'echo $$ > {}; exec sleep 30'",
            pids.display()
        ))
        .args(["--ready-url", "http://127.0.0.1:9/health"])
        .args(["--ready-check-timeout-sec", "0.3"])
        .run()
        .assert_failure();
    assert!(run.stderr.contains("was not ready after 0.3 s"), "{run}");
    assert!(run.stderr.contains("127.0.0.1:9/health"), "{run}");
    assert!(run.took < Duration::from_secs(10), "{run}");
    // The temporary work directory is kept, and named, after a failure.
    assert!(run.stderr.contains("server logs: "), "{run}");
    assert_servers_gone(dir.path());
}

#[test]
fn the_native_engine_start_is_timed_to_its_first_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("native.json");
    let model = data("models/llama-2-tiny-random-gguf/llama-2-tiny-random.gguf");
    Bench::new()
        .args(["startup", "--model"])
        .arg(&model)
        .args(["--num-iters-cold", "2", "--num-iters-warmup", "1"])
        .args(["--num-iters-warm", "2", "--threads", "1"])
        .arg("--output-json")
        .arg(&out)
        .run()
        .assert_success();
    let doc = read_json(&out);
    for phase in ["cold", "warm"] {
        let startup = times(&doc, &format!("{phase}_startup_times"));
        let load = times(&doc, &format!("{phase}_load_times"));
        let first = times(&doc, &format!("{phase}_first_token_times"));
        assert_eq!(startup.len(), 2, "{doc}");
        for i in 0..2 {
            assert!(load[i] > 0.0 && first[i] > 0.0, "{doc}");
            // The start is the load plus the first token (each rounded apart).
            assert!((startup[i] - load[i] - first[i]).abs() < 1e-6, "{doc}");
        }
    }
    assert_eq!(doc["model"], json!(model.display().to_string()));
    assert_eq!(doc["engine_device"], json!("cpu"));
    assert_eq!(doc["num_iters_warmup"], json!(1));
}

/// A sweep's server command: `--delay S` (the script's first two arguments) is how long
/// it takes to start; the rest (`--port`) goes to the mock server.
fn delayed_server(dir: &Path, port: u16) -> String {
    let script = dir.join("delayed.sh");
    std::fs::write(
        &script,
        format!(
            "sleep $2; shift 2; exec {} mock-server \"$@\"\n",
            env!("CARGO_BIN_EXE_bench")
        ),
    )
    .unwrap();
    format!("sh {} --delay 0 --port {port}", script.display())
}

#[test]
fn sweep_startup_runs_every_serve_combination_and_writes_one_result_each() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let serve_cmd = delayed_server(dir.path(), port);
    let serve_params = dir.path().join("serve.json");
    std::fs::write(&serve_params, r#"[{"delay": 0.05}, {"delay": 0.5}]"#).unwrap();
    let startup_params = dir.path().join("startup.json");
    std::fs::write(
        &startup_params,
        r#"[{"num_iters_cold": 1, "tensor_parallel_size": 2}]"#,
    )
    .unwrap();
    let out = dir.path().join("results");
    let sweep = |extra: &[&str]| {
        Bench::new()
            .args(["sweep", "startup", "--serve-cmd", &serve_cmd])
            .arg("--serve-params")
            .arg(&serve_params)
            .arg("--startup-params")
            .arg(&startup_params)
            .args(["--num-iters-cold", "3", "--num-iters-warmup", "0"])
            .args(["--num-iters-warm", "1", "--ready-check-interval-ms", "10"])
            .args(["--ready-check-timeout-sec", "60"])
            .arg("-o")
            .arg(&out)
            .args(["-e", "exp"])
            .args(extra)
            .run()
    };

    // The dry run lists both server commands and writes nothing.
    let dry = sweep(&["--dry-run"]).assert_success();
    for delay in ["0.05", "0.5"] {
        let command = format!("delayed.sh --delay {delay} --port {port}\n");
        assert!(dry.stdout.contains(&command), "{dry}");
    }
    assert!(
        dry.stdout
            .contains(&format!("--ready-url http://localhost:{port}/health")),
        "{dry}"
    );
    assert!(
        dry.stderr
            .contains("ignoring unsupported startup params for num_iters_cold=1-tensor_parallel_size=2: tensor_parallel_size"),
        "{dry}"
    );
    assert!(!out.exists(), "a dry run wrote {out:?}");

    let run = sweep(&[]).assert_success();
    // Without a warm-up, the first warm start is not warm: said once per combination.
    assert_eq!(
        run.stderr
            .matches("note: --num-iters-warmup 0: the first warm start finds")
            .count(),
        2,
        "{run}"
    );
    let exp = out.join("exp");
    let mut cold = Vec::new();
    for (delay, name) in [(0.05, "0.05"), (0.5, "0.5")] {
        let comb = exp.join(format!(
            "SERVE--delay={name}-STARTUP--num_iters_cold=1-tensor_parallel_size=2"
        ));
        let doc = read_json(&comb.join("run=0.json"));
        assert_eq!(doc["delay"], json!(delay), "{doc}");
        assert_eq!(doc["run_number"], json!(0));
        assert_eq!(
            doc["num_iters_cold"],
            json!(1),
            "the startup params won: {doc}"
        );
        let t = times(&doc, "cold_startup_times");
        assert_eq!(t.len(), 1);
        cold.push(t[0]);
        let summary = read_json(&comb.join("summary.json"));
        assert_eq!(summary.as_array().unwrap().len(), 1);
        assert!(comb.join("run=0/cold-1/server.log").is_file());
    }
    // The delay reached each server command.
    assert!(cold[0] < 0.5 && cold[1] >= 0.5, "{cold:?}\n{run}");
    let csv = std::fs::read_to_string(exp.join("summary.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .starts_with(",avg_cold_startup_time,")
    );

    // The experiment exists now: running it again is refused, resuming it runs nothing.
    let again = sweep(&[]).assert_failure();
    assert!(again.stderr.contains("--resume"), "{again}");
    let resumed = sweep(&["--resume"]).assert_success();
    assert_eq!(resumed.stdout.matches("Found existing results").count(), 2);
    assert!(!resumed.stdout.contains("[BEGIN BENCHMARK]"), "{resumed}");
}

#[test]
fn ctrl_c_stops_the_starting_server_and_ends_the_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids.txt");
    let running = Bench::new()
        .args(["startup", "--serve-cmd"])
        .arg(format!(
            "sh -c 'echo $$ > {}; exec sleep 30'",
            pids.display()
        ))
        .args(["--ready-url", "http://127.0.0.1:9/health"])
        .spawn();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&pids).is_ok_and(|p| p.ends_with('\n')) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    running.signal(libc::SIGINT);
    let run = running.wait(Duration::from_secs(20)).assert_failure();
    assert!(
        run.stderr.contains("SIGINT received: stopping the server"),
        "{run}"
    );
    assert!(run.stderr.contains("interrupted"), "{run}");
    assert_servers_gone(dir.path());
}
