//! Stopping a run early: Ctrl-C (SIGINT) and SIGTERM keep the results measured so far and
//! mark them as interrupted; a second Ctrl-C quits at once; result files are replaced
//! atomically, so neither an append nor a SIGKILL while saving can damage them.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::*;

/// A detailed `openai-chat` run against `m` (8-token prompts, `output` tokens per answer,
/// `prompts` requests, `extra` flags) in the background, once its signal handlers are in
/// place.
fn start(m: &Mock, output: u32, prompts: u64, extra: &[&str]) -> Running {
    let run = Bench::against(&m.url)
        .backend("openai-chat")
        .random(8, output)
        .prompts(prompts)
        .args(extra)
        .save_detailed()
        .spawn();
    // Printed once the signal handlers are in place, just before the first request.
    run.wait_for_line("Starting main benchmark run", Duration::from_secs(120));
    run
}

/// Waits until the server has sent the first token of `n` requests: they have arrived.
fn wait_for_first_tokens(m: &Mock, n: u64) {
    let server = m.server.as_ref().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.timing().first_tokens < n {
        assert!(
            Instant::now() < deadline,
            "{n} requests never got their first token: {:?}",
            server.timing()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Files in `dir` that are neither results nor PyTorch records: leftovers of a write.
fn stray_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".json"))
        .collect()
}

#[test]
fn sigint_saves_what_completed_marked_interrupted_and_exits_130() {
    within_bounds("the end of a run stopped by SIGINT", || {
        // 10 tokens 20 ms apart: each request takes about 200 ms; 4 at a time, 1000 of
        // them would take 50 s.
        let m = mock(bench::mock::MockConfig {
            itl: Duration::from_millis(20),
            ..Default::default()
        });
        let grace = Duration::from_secs(3);
        let run = start(
            &m,
            10,
            1000,
            &["--max-concurrency", "4", "--shutdown-grace-sec", "3"],
        );
        // The fifth request goes out once one of the first four has completed.
        wait_for_first_tokens(&m, 5);
        run.signal(libc::SIGINT);
        let signalled = Instant::now();
        let out = run.wait(Duration::from_secs(30));
        let took = signalled.elapsed();
        assert_eq!(out.code(), Some(130), "{out}");
        // What holds however long the stop took: the result is saved, marked, and every
        // request is completed, cancelled at the end of the grace period, or never sent.
        let r = out.json();
        assert_eq!(r["interrupted"], true, "{out}");
        assert!(r["interrupt_reason"].as_str().unwrap().contains("SIGINT"));
        let completed = r["completed"].as_u64().unwrap();
        let failed = r["failed"].as_u64().unwrap();
        let not_sent = r["requests_not_sent"].as_u64().unwrap();
        assert!(completed > 0 && completed < 1000, "completed {completed}");
        // The requests never sent are not counted as failures; only cancelled ones fail.
        assert_eq!(r["requests_cancelled"].as_u64().unwrap(), failed, "{out}");
        assert_eq!(completed + failed + not_sent, 1000);
        assert_eq!(
            r["errors"].as_array().unwrap().len() as u64,
            completed + failed
        );
        assert_eq!(r["total_output_tokens"].as_u64().unwrap(), completed * 10);
        assert!(
            out.stdout.contains(&format!(
                "Benchmark interrupted (SIGINT received): {not_sent} of 1000 requests not sent"
            )),
            "{out}"
        );
        assert!(out.stdout.contains("(marked as interrupted)"), "{out}");
        assert!(stray_files(out.result_dir()).is_empty());
        // Requests in flight end within 200 ms, well inside the grace period; the rest is
        // computing and writing the report. Past the grace period bench cancels what is
        // still in flight, so only within it must nothing have failed.
        if took >= grace {
            return Err(format!(
                "bench took {took:?} after SIGINT, the grace period is {grace:?}"
            ));
        }
        assert_eq!(failed, 0, "{out}");
        Ok(())
    });
}

#[test]
fn sigterm_is_a_first_ctrl_c_and_cancels_what_outlives_the_grace_period() {
    within_bounds("the end of a run stopped by SIGTERM", || {
        // Each request streams for 20 s: all three in flight outlive a 1 s grace period.
        let m = mock(bench::mock::MockConfig {
            itl: Duration::from_millis(500),
            ..Default::default()
        });
        let run = start(
            &m,
            40,
            50,
            &["--max-concurrency", "3", "--shutdown-grace-sec", "1"],
        );
        wait_for_first_tokens(&m, 3);
        run.signal(libc::SIGTERM);
        let signalled = Instant::now();
        let out = run.wait(Duration::from_secs(30));
        let took = signalled.elapsed();
        assert_eq!(out.code(), Some(143), "{out}");
        // The grace period was given in full.
        assert!(took >= Duration::from_secs(1), "took {took:?}\n{out}");
        let r = out.json();
        assert_eq!(r["interrupted"], true);
        assert!(r["interrupt_reason"].as_str().unwrap().contains("SIGTERM"));
        assert_eq!(r["completed"], 0);
        assert_eq!(r["failed"], 3);
        assert_eq!(r["requests_cancelled"], 3);
        assert_eq!(r["requests_not_sent"], 47);
        for e in r["errors"].as_array().unwrap() {
            assert!(
                e.as_str().unwrap().starts_with("interrupted: "),
                "error kind: {e}"
            );
        }
        // ... and not much more: cancelling, reporting and saving are quick.
        if took >= Duration::from_secs(5) {
            return Err(format!(
                "bench took {took:?} after SIGTERM with a 1 s grace period"
            ));
        }
        Ok(())
    });
}

#[test]
fn a_second_ctrl_c_quits_at_once_without_saving() {
    within_bounds("the exit after a second Ctrl-C", || {
        let m = mock(bench::mock::MockConfig {
            itl: Duration::from_millis(500),
            ..Default::default()
        });
        let run = start(&m, 40, 10, &["--shutdown-grace-sec", "60"]);
        wait_for_first_tokens(&m, 1);
        run.signal(libc::SIGINT);
        // The first one is acknowledged on stderr once the handler has seen it.
        run.wait_for_stderr_line(
            "SIGINT received: sending no more requests",
            Duration::from_secs(30),
        );
        run.signal(libc::SIGINT);
        let signalled = Instant::now();
        let out = run.wait(Duration::from_secs(30));
        let took = signalled.elapsed();
        assert_eq!(out.code(), Some(130), "{out}");
        assert!(out.stderr.contains("quitting without saving"), "{out}");
        assert_eq!(std::fs::read_dir(out.result_dir()).unwrap().count(), 0);
        if took >= Duration::from_secs(2) {
            return Err(format!("bench took {took:?} after the second Ctrl-C"));
        }
        Ok(())
    });
}

#[test]
fn append_result_keeps_the_existing_entry_and_adds_the_new_one() {
    let m = mock(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.json");
    // An earlier result, byte for byte as vLLM's json.dump writes it.
    let old = br#"{"date": "20250101-000000", "backend": "vllm", "completed": 7}"#;
    std::fs::write(&path, old).unwrap();
    Bench::against(&m.url)
        .backend("openai-chat")
        .random(8, 4)
        .prompts(5)
        .arg("--append-result")
        .arg("--result-dir")
        .arg(dir.path())
        .args(["--result-filename", "results.json"])
        .run()
        .assert_success();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(old));
    assert_eq!(bytes[old.len()], b'\n');
    let new: serde_json::Value = serde_json::from_slice(&bytes[old.len() + 1..]).unwrap();
    assert_eq!(new["completed"], 5);
    assert_eq!(new["backend"], "openai-chat");
    assert!(new.get("interrupted").is_none(), "a full run is not marked");
    assert!(stray_files(dir.path()).is_empty());
}

/// The environment variable that turns [`sigkill_target_writer`] into a writer.
const WRITER_ENV: &str = "BENCH_TEST_SIGKILL_TARGET";

/// Two results of several megabytes: writing one takes long enough for a SIGKILL to land
/// in the middle of it.
fn big_documents() -> [Vec<u8>; 2] {
    ["a", "b"].map(|fill| {
        let texts = vec![fill.repeat(100); 40_000];
        serde_json::to_vec(&serde_json::json!({ "generated_texts": texts })).unwrap()
    })
}

/// Not a test on its own: run by [`sigkill_while_saving_never_leaves_a_damaged_file`] as a
/// child process that rewrites a result file in a loop until it is killed.
#[test]
#[ignore = "a helper process for sigkill_while_saving_never_leaves_a_damaged_file"]
fn sigkill_target_writer() {
    let Some(path) = std::env::var_os(WRITER_ENV) else {
        return;
    };
    let docs = big_documents();
    for i in 0.. {
        bench::report::save::write_atomically(Path::new(&path), &[&docs[i % 2]]).unwrap();
    }
}

/// What this shows: a process killed with SIGKILL at arbitrary moments while it rewrites
/// a multi-megabyte result file through `write_atomically` (the function every result
/// and append goes through) never leaves that file partly written: it always holds one of
/// the complete documents. It cannot show durability across a power loss (that rests on
/// fsync, which a test cannot observe), and it does not kill `bench` itself mid-save,
/// because a real result is written in microseconds and a kill could not be aimed at it.
#[test]
fn sigkill_while_saving_never_leaves_a_damaged_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("result.json");
    let docs = big_documents();
    std::fs::write(&path, &docs[0]).unwrap();
    let me = std::env::current_exe().unwrap();
    // The writer's test name in this binary: its module path without the crate's name.
    let (_, module) = module_path!().split_once("::").unwrap();
    let writer = format!("{module}::sigkill_target_writer");
    let mut kills_mid_write = 0;
    for round in 0..12u64 {
        let mut child = Command::new(&me)
            .args(["--ignored", "--exact", &writer, "--quiet"])
            .env(WRITER_ENV, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // From the writer's first write on (however long it took to start), a kill at a
        // different moment of its loop each round.
        wait_for_a_write(dir.path(), &path);
        std::thread::sleep(Duration::from_millis(round * 37));
        // SAFETY: kill(2) on our own child, not yet reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        child.wait().unwrap();
        let now = std::fs::read(&path).unwrap();
        assert!(
            now == docs[0] || now == docs[1],
            "round {round}: a damaged file of {} bytes",
            now.len()
        );
        // A temporary file left behind means the kill landed during a write.
        let temps: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p != &path)
            .collect();
        if !temps.is_empty() {
            kills_mid_write += 1;
        }
        for t in temps {
            std::fs::remove_file(t).unwrap();
        }
    }
    // The test only means something if some kills did interrupt a write.
    assert!(kills_mid_write > 0, "no kill landed during a write");
}

/// Waits until a file other than `path` (a write's temporary file) appears in `dir`.
fn wait_for_a_write(dir: &Path, path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(dir)
        .unwrap()
        .all(|e| e.unwrap().path() == path)
    {
        assert!(
            Instant::now() < deadline,
            "the writer never started writing"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
