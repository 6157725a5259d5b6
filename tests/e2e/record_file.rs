//! `--record-file PATH`: each finished request written to disk as the run goes. A run that
//! ends leaves a file that `bench merge` makes into the run's own result; a run killed with
//! SIGKILL leaves a file that `bench merge` makes into the result of every request it had
//! finished, marked interrupted, checked against the mock's own record of the requests.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// The records of the record file at `path` (its lines between the head and the end).
fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let head: Value = serde_json::from_str(lines.next().expect("a head line")).unwrap();
    assert_eq!(head["bench_record_file"], 1, "{head}");
    lines
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v.get("record").cloned())
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `bench merge FILE -o OUT --save-detailed`.
fn merge(file: &Path, out: &Path) -> Run {
    Bench::new()
        .arg("merge")
        .arg(file)
        .arg("-o")
        .arg(out)
        .arg("--save-detailed")
        .run()
}

/// Runs 200 req/s with `--record-file` and `extra`, then merges the file: the run's own
/// result and the merge's must be equal on every key but the dates and the merge's
/// `shards`. Returns the run's result.
fn merged_equals_the_run(extra: &[&str]) -> Value {
    let m = mock(bench::mock::MockConfig {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("records.jsonl");
    let out = Bench::against(&m.url)
        .random(24, 8)
        .args(["--request-rate", "200", "--seed", "3"])
        .args(extra)
        .arg("--record-file")
        .arg(&file)
        .args(["--result-filename", "run.json"])
        .save_detailed()
        .run()
        .assert_success();
    assert!(
        out.stderr
            .contains("note: --record-file: every request's record in"),
        "{out}"
    );
    let run = out.json();
    assert_eq!(
        records(&file).len() as u64,
        run["num_prompts"].as_u64().unwrap()
    );

    let merged_path = dir.path().join("merged.json");
    merge(&file, &merged_path).assert_success();
    let merged = read(&merged_path);
    // The same figures, exactly: the merge computes them from the same records, with the
    // run's own clock, duration and settings from the file's end line.
    let keys = |v: &Value| -> BTreeSet<String> {
        v.as_object()
            .unwrap()
            .keys()
            .filter(|k| !["shards", "date", "started_at"].contains(&k.as_str()))
            .cloned()
            .collect()
    };
    assert_eq!(keys(&run), keys(&merged), "the merged result's keys");
    let mut differ = Vec::new();
    for key in keys(&run) {
        if run[&key] != merged[&key] {
            differ.push(format!("{key}: run {} merged {}", run[&key], merged[&key]));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    run
}

#[test]
fn a_finished_runs_record_file_merges_into_the_runs_own_result() {
    let run = merged_equals_the_run(&["--num-prompts", "50"]);
    assert_eq!(run["num_prompts"], 50);
    // A run bounded by time too, whose records go past the workload's indices (the
    // workload of 10 sent again in rounds for a second).
    let run = merged_equals_the_run(&["--num-prompts", "10", "--duration", "1"]);
    assert!(run["num_prompts"].as_u64().unwrap() > 100, "{run}");
    assert_eq!(run["duration_limit_s"], 1.0);
}

#[test]
fn a_run_killed_midway_is_recovered_from_its_record_file() {
    // 10 tokens 20 ms apart: each request takes about 200 ms; 4 at a time, 1000 of them
    // would take 50 s.
    let m = mock(bench::mock::MockConfig {
        itl: Duration::from_millis(20),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("records.jsonl");
    let run = Bench::against(&m.url)
        .backend("openai-chat")
        .random(8, 10)
        .prompts(1000)
        .args(["--max-concurrency", "4", "--request-id-prefix", "k-"])
        .arg("--record-file")
        .arg(&file)
        .save_detailed()
        .spawn();
    run.wait_for_line("Starting main benchmark run", Duration::from_secs(120));
    // Until at least 40 requests have finished at the server.
    let server = m.server.as_ref().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.requests().len() < 40 {
        assert!(Instant::now() < deadline, "40 requests never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    run.signal(libc::SIGKILL);
    let killed = run.wait(Duration::from_secs(30));
    assert_eq!(killed.code(), None, "killed by a signal: {killed}");

    // What the server answered in full (10 tokens, 9 gaps), by request id. The ready
    // check reuses request 0's id, so the ids form a set.
    let answered: BTreeSet<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.itl_ms.len() == 9)
        .map(|r| r.id)
        .collect();
    let records = records(&file);
    let recovered: BTreeSet<String> = records
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(recovered.len(), records.len(), "a request recorded twice");
    assert!(
        recovered.is_subset(&answered),
        "recorded but never answered in full: {:?}",
        recovered.difference(&answered).collect::<Vec<_>>()
    );
    // Lost: at most what was in flight and what the writer had not yet flushed.
    let lost = answered.len() - recovered.len();
    assert!(
        lost <= 8,
        "{lost} answered requests are not in the file ({} recovered)",
        recovered.len()
    );

    let merged_path = dir.path().join("recovered.json");
    // The result is saved, and the exit status says that the run was stopped early, as
    // for a merge of shards one of which was interrupted.
    let out = merge(&file, &merged_path).assert_failure();
    assert_eq!(out.code(), Some(1), "{out}");
    assert!(
        out.stderr
            .contains("error: the benchmark was stopped early: shard 0/1: the run ended"),
        "{out}"
    );
    assert!(out.stdout.contains("(marked as interrupted)"), "{out}");
    let r = read(&merged_path);
    assert_eq!(r["interrupted"], true, "{out}");
    let reason = r["interrupt_reason"].as_str().unwrap();
    assert!(reason.contains("killed?"), "{reason}");
    assert!(reason.contains("records.jsonl"), "{reason}");
    assert!(reason.contains("last written at 20"), "{reason}");
    assert_eq!(r["completed"].as_u64().unwrap() as usize, records.len());
    assert_eq!(r["failed"], 0);
    assert_eq!(
        r["requests_not_sent"].as_u64().unwrap() as usize,
        1000 - records.len()
    );
    assert_eq!(r["output_lens"].as_array().unwrap().len(), records.len());
    assert!(
        r["output_lens"].as_array().unwrap().iter().all(|n| n == 10),
        "{}",
        r["output_lens"]
    );
    // `bench report` reads the record file as the same result, its lists included.
    let page = dir.path().join("report.html");
    let out = Bench::new()
        .arg("report")
        .arg(&file)
        .arg("-o")
        .arg(&page)
        .run()
        .assert_success();
    let html = std::fs::read_to_string(&page).unwrap();
    let completed = format!(
        ">Successful requests</th><td class=\"run-0\">{}</td>",
        records.len()
    );
    assert!(html.contains(&completed), "{out}");
    assert!(!html.contains("id=\"not-detailed\""), "{out}");
    // The duration runs to the last recorded request's end.
    let last_end = records
        .iter()
        .map(|x| x["start_time"].as_f64().unwrap() + x["latency"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(
        (r["duration"].as_f64().unwrap() - last_end).abs() < 1e-9,
        "{} vs {last_end}",
        r["duration"]
    );
}

#[test]
fn record_file_is_refused_where_one_file_cannot_hold_the_run() {
    for (extra, needle) in [
        (&["--num-runs", "2"][..], "--num-runs"),
        (&["--workers", "2"][..], "--workers"),
        (&["--shard", "0/2"][..], "--shard-output"),
    ] {
        let out = Bench::against("http://127.0.0.1:9")
            .random(8, 8)
            .prompts(4)
            .args(["--record-file", "/tmp/never.jsonl"])
            .args(extra)
            .run()
            .assert_failure();
        assert!(out.stderr.contains("--record-file"), "{out}");
        assert!(out.stderr.contains(needle), "{out}");
    }
    // A disk with no room: the first line cannot be written, and the run does not start.
    let m = mock(bench::mock::MockConfig::default());
    let out = Bench::against(&m.url)
        .random(8, 8)
        .prompts(4)
        .args(["--record-file", "/dev/full"])
        .run()
        .assert_failure();
    assert!(out.stderr.contains("--record-file /dev/full"), "{out}");
    assert!(out.stderr.contains("No space left on device"), "{out}");
    assert_eq!(m.server.as_ref().unwrap().requests().len(), 0, "{out}");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("records.jsonl");
    let out = Bench::against(&m.url)
        .random(8, 8)
        .prompts(4)
        .arg("--record-file")
        .arg(&missing)
        .run()
        .assert_failure();
    assert!(
        out.stderr
            .contains(&format!("--record-file {}", missing.display())),
        "{out}"
    );
}
