//! Shards of one run (`--shard I/N`, `--workers N`) and `bench merge`, on loopback against
//! the mock server: the merged request set is the single process's, exactly, and the
//! metrics agree with a single process's within the timing noise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common::mock;
use crate::common::{Bench, Run, within_bounds};

/// The workload every run here shares: a fixed seed, fixed request ids and a Poisson
/// schedule, so that the single run and the shards draw the same requests and times.
fn workload(url: &str) -> Bench {
    seeded(url, 11)
}

fn seeded(url: &str, seed: u64) -> Bench {
    Bench::against(url)
        .random(32, 16)
        .prompts(60)
        .args(["--request-rate", "100", "--seed", &seed.to_string()])
        .args(["--request-id-prefix", "s-"])
}

/// A mock server whose delays dominate the timings, so that runs can be compared.
fn server() -> crate::common::Mock {
    mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        ..Default::default()
    })
}

/// `@UNIX_SECONDS`, `ahead` from now.
fn start_in(ahead: Duration) -> String {
    let at = SystemTime::now() + ahead;
    format!(
        "@{:.6}",
        at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    )
}

/// Runs the `count` shards of the command `run` makes as separate processes started
/// together at a shared `--start-at`, each writing its records to `dir`.
pub(crate) fn run_shards(run: impl Fn() -> Bench, count: usize, dir: &Path) -> Vec<PathBuf> {
    let at = start_in(Duration::from_secs(6));
    let running: Vec<_> = (0..count)
        .map(|i| {
            let out = dir.join(format!("shard-{i}.json"));
            let run = run()
                .args(["--shard", &format!("{i}/{count}"), "--start-at", &at])
                .arg("--shard-output")
                .arg(&out)
                .spawn();
            (out, run)
        })
        .collect();
    running
        .into_iter()
        .map(|(out, run)| {
            run.wait(Duration::from_secs(120)).assert_success();
            out
        })
        .collect()
}

/// `bench merge` of the shard documents `inputs` into `output`, with the per-request lists.
pub(crate) fn merge(inputs: &[PathBuf], output: &Path) -> Run {
    Bench::new()
        .arg("merge")
        .args(inputs)
        .arg("-o")
        .arg(output)
        .arg("--save-detailed")
        .run()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What identifies each request of a set of shard documents: its id, lengths and
/// scheduled send time, by global index.
fn request_set(docs: &[Value]) -> BTreeMap<u64, (String, u64, u64, f64)> {
    let mut set = BTreeMap::new();
    for doc in docs {
        for r in doc["records"].as_array().unwrap() {
            let entry = (
                r["request_id"].as_str().unwrap().to_owned(),
                r["prompt_len"].as_u64().unwrap(),
                r["expected_output_len"].as_u64().unwrap(),
                r["intended_start_time"].as_f64().unwrap(),
            );
            assert!(
                set.insert(r["index"].as_u64().unwrap(), entry).is_none(),
                "request {} is in two shards",
                r["index"]
            );
        }
    }
    set
}

/// The merged result has a single run's keys and figures: the same requests and token
/// counts exactly (a panic otherwise), the timings within the noise of two runs on a
/// shared machine (`Err` otherwise: a busy machine can break them, see `within_bounds`).
fn agrees(single: &Value, merged: &Value, what: &str) -> Result<(), String> {
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "shards")
            .cloned()
            .collect()
    };
    let (mut a, mut b) = (keys(single), keys(merged));
    a.sort();
    b.sort();
    assert_eq!(
        a, b,
        "{what}: the merged result's keys differ from a single run's"
    );
    for key in [
        "completed",
        "failed",
        "num_prompts",
        "total_input_tokens",
        "total_output_tokens",
        "input_lens",
        "output_lens",
        "request_rate",
    ] {
        assert_eq!(single[key], merged[key], "{what}: {key}");
    }
    // Schedule 0.6 s long, each response about 50 ms.
    for (key, tolerance) in [
        ("duration", 0.15),
        ("mean_ttft_ms", 10.0),
        ("median_tpot_ms", 3.0),
        ("mean_itl_ms", 3.0),
        ("request_throughput", 25.0),
    ] {
        let (x, y) = (single[key].as_f64().unwrap(), merged[key].as_f64().unwrap());
        if (x - y).abs() > tolerance {
            return Err(format!(
                "{what}: {key} {y} is not within {tolerance} of the single run's {x}"
            ));
        }
    }
    Ok(())
}

#[test]
fn shards_started_together_merge_into_the_single_runs_requests_and_metrics() {
    let m = server();
    within_bounds("merged shards' timings against one process's", || {
        let single = workload(&m.url).save_detailed().run().assert_success();
        let single = single.json();
        let dir = tempfile::tempdir().unwrap();
        let mut sets = Vec::new();
        // Time bounds missed: reported after every exact check of every split has run.
        let mut missed = Vec::new();
        for count in [1, 2, 4] {
            let shard_dir = dir.path().join(format!("n{count}"));
            std::fs::create_dir(&shard_dir).unwrap();
            let files = run_shards(|| workload(&m.url), count, &shard_dir);
            let docs: Vec<Value> = files.iter().map(|f| read(f)).collect();
            for (i, doc) in docs.iter().enumerate() {
                let records = doc["records"].as_array().unwrap();
                assert!(
                    records
                        .iter()
                        .all(|r| r["index"].as_u64().unwrap() % count as u64 == i as u64),
                    "shard {i}/{count} holds another shard's request"
                );
                let lag = doc["diagnostics"]["started_late_s"].as_f64().unwrap();
                if lag >= 1.0 {
                    missed.push(format!("shard {i}/{count} started {lag} s late"));
                }
            }
            sets.push(request_set(&docs));
            let output = shard_dir.join("merged.json");
            let merged = merge(&files, &output).assert_success();
            assert!(
                merged.stdout.contains(&format!(" {count} shards ")),
                "{merged}"
            );
            let merged = read(&output);
            assert_eq!(merged["shards"].as_array().unwrap().len(), count);
            missed.extend(agrees(&single, &merged, &format!("{count} shards")).err());
        }
        // The request set (ids, lengths, scheduled times) is one and the same, however
        // split.
        assert_eq!(sets[0].len(), 60);
        assert_eq!(sets[0], sets[1], "2 shards");
        assert_eq!(sets[0], sets[2], "4 shards");
        if missed.is_empty() {
            Ok(())
        } else {
            Err(missed.join("; "))
        }
    });
}

#[test]
fn workers_on_one_machine_run_the_shards_and_merge_them() {
    let m = server();
    let cores = std::thread::available_parallelism().unwrap().get();
    within_bounds("--workers timings against one process's", || {
        let single = workload(&m.url).save_detailed().run().assert_success();
        let single = single.json();
        let mut missed = Vec::new();
        for workers in [2, 4] {
            let run = workload(&m.url)
                .args(["--workers", &workers.to_string()])
                .save_detailed()
                .run()
                .assert_success();
            let merged = run.json();
            let shards = merged["shards"].as_array().unwrap();
            assert_eq!(shards.len(), workers, "{run}");
            for (i, s) in shards.iter().enumerate() {
                assert_eq!(s["shard"]["index"], i);
                // Each process may use every core of the machine (not pinned).
                assert_eq!(s["cores"].as_u64().unwrap() as usize, cores, "{s}");
                assert_eq!(
                    s["sent"].as_u64().unwrap(),
                    (60 + workers as u64 - 1 - i as u64) / workers as u64
                );
                let late = s["started_late_s"].as_f64().unwrap();
                if late >= 0.05 {
                    missed.push(format!(
                        "--workers {workers}: shard {i} started {late} s late"
                    ));
                }
            }
            missed.extend(agrees(&single, &merged, &format!("--workers {workers}")).err());
        }
        if missed.is_empty() {
            Ok(())
        } else {
            Err(missed.join("; "))
        }
    });
}

/// The client processes write their records for the parent, never a result of their own:
/// appended to one file, the run is one entry however the processes' clocks fall (with a
/// default file name, a process finishing in another second than the parent wrote a
/// second file).
#[test]
fn workers_save_one_result_for_the_run() {
    let m = server();
    let dir = tempfile::tempdir().unwrap();
    let run = workload(&m.url)
        .args([
            "--workers",
            "2",
            "--append-result",
            "--result-filename",
            "run.json",
        ])
        .arg("--result-dir")
        .arg(dir.path())
        .run()
        .assert_success();
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.ends_with(".pytorch.json") && !n.starts_with('.'))
        .collect();
    assert_eq!(names, ["run.json"], "{run}");
    let text = std::fs::read_to_string(dir.path().join("run.json")).unwrap();
    let entries: Vec<serde_json::Value> = serde_json::Deserializer::from_str(&text)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(entries.len(), 1, "{text}");
    assert_eq!(entries[0]["completed"], 60);
    assert_eq!(entries[0]["shards"].as_array().unwrap().len(), 2);
}

#[test]
fn shard_results_are_read_from_logs_and_a_bad_set_of_shards_is_refused() {
    let m = server();
    let dir = tempfile::tempdir().unwrap();
    // Streamed to stdout as `kubectl logs` would collect them, with the report around.
    let at = start_in(Duration::from_secs(3));
    let logs: Vec<PathBuf> = (0..2)
        .map(|i| {
            let run = workload(&m.url)
                .args([
                    "--shard",
                    &format!("{i}/2"),
                    "--start-at",
                    &at,
                    "--shard-output",
                    "-",
                ])
                .spawn();
            (i, run)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|(i, run)| {
            let run = run.wait(Duration::from_secs(120)).assert_success();
            assert!(run.stdout.contains("Serving Benchmark Result"), "{run}");
            let log = dir.path().join(format!("pod-{i}.log"));
            std::fs::write(&log, &run.stdout).unwrap();
            log
        })
        .collect();
    let merged = merge(&logs, &dir.path().join("merged.json")).assert_success();
    assert_eq!(
        read(&dir.path().join("merged.json"))["completed"],
        60,
        "{merged}"
    );

    // One shard missing, one given twice, a shard of another workload.
    let missing = merge(&logs[..1], &dir.path().join("x.json")).assert_failure();
    assert!(missing.stderr.contains("shard 1/2 missing"), "{missing}");
    let twice = merge(
        &[logs[0].clone(), logs[0].clone()],
        &dir.path().join("x.json"),
    )
    .assert_failure();
    assert!(twice.stderr.contains("shard 0/2 is given twice"), "{twice}");
    let other = dir.path().join("other.json");
    seeded(&m.url, 12)
        .args(["--shard", "1/2", "--shard-output"])
        .arg(&other)
        .run()
        .assert_success();
    let mixed = merge(
        &[logs[0].clone(), other.clone()],
        &dir.path().join("x.json"),
    )
    .assert_failure();
    assert!(
        mixed.stderr.contains("not shards of one run") && mixed.stderr.contains("workloads"),
        "{mixed}"
    );
    // Not a shard result at all: named.
    let result = dir.path().join("merged.json");
    let wrong = merge(std::slice::from_ref(&result), &dir.path().join("x.json")).assert_failure();
    assert!(
        wrong.stderr.contains("merged.json") && wrong.stderr.contains("not a shard result"),
        "{wrong}"
    );
}

#[test]
fn a_shard_ready_after_the_shared_start_catches_up_and_says_so() {
    let m = server();
    let dir = tempfile::tempdir().unwrap();
    let late = start_in(Duration::ZERO)
        .trim_start_matches('@')
        .parse::<f64>()
        .map(|t| format!("@{:.6}", t - 2.0))
        .unwrap();
    let out = dir.path().join("late.json");
    let run = workload(&m.url)
        .args(["--shard", "0/1", "--start-at", &late, "--shard-output"])
        .arg(&out)
        .run()
        .assert_success();
    let doc = read(&out);
    let late_s = doc["diagnostics"]["started_late_s"].as_f64().unwrap();
    assert!(late_s >= 2.0, "{late_s} {run}");
    // Its overdue requests went at once: the lag shows it.
    assert!(
        doc["diagnostics"]["schedule_lag_ms"]["max"]
            .as_f64()
            .unwrap()
            >= 1500.0
    );
    let merged = merge(&[out], &dir.path().join("merged.json")).assert_success();
    assert!(merged.stderr.contains("after the shared start"), "{merged}");
}

#[test]
fn shard_flags_are_checked() {
    let m = server();
    let refused: [(&[&str], &str); 5] = [
        (&["--shard", "2/2"], "below 2"),
        (&["--shard", "0/2", "--save-result"], "bench merge"),
        (
            &["--workers", "4", "--max-concurrency", "2"],
            "--max-concurrency 2",
        ),
        (&["--workers", "2", "--shard", "0/2"], "cannot be used with"),
        (&["--shard", "0/2", "--start-at", "soon"], "RFC 3339"),
    ];
    for (args, says) in refused {
        let run = workload(&m.url).args(args).run().assert_failure();
        assert!(run.stderr.contains(says), "{run}");
    }
}

#[test]
fn shards_left_to_the_default_request_ids_are_still_one_run() {
    let m = server();
    let dir = tempfile::tempdir().unwrap();
    let plain = || Bench::against(&m.url).random(16, 4).prompts(10);
    let files = run_shards(plain, 2, dir.path());
    let ids: Vec<String> = files
        .iter()
        .flat_map(|f| {
            read(f)["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["request_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let prefix = ids[0].rsplit_once('-').unwrap().0;
    assert!(ids.iter().all(|id| id.starts_with(prefix)), "{ids:?}");
    merge(&files, &dir.path().join("merged.json")).assert_success();
    let workers = plain()
        .args(["--workers", "2"])
        .save_result()
        .run()
        .assert_success();
    assert_eq!(workers.json()["completed"], 10, "{workers}");
}
