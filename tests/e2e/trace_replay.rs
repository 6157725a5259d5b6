//! Requests with send times (contract 0.3.0's `send-at`, vLLM's self-timed trace replay):
//! the scheduler sends each at its time, scaled by `--time-scale`, unless told to use the
//! rate (`--no-self-timed`). The workload comes from the `conversation` fixture plugin with
//! one turn per conversation, whose first turns are due every `first-send-interval` s.

use crate::common::*;

/// A replay of four requests due 0.2 s apart, with `extra` flags; the run and the send
/// times of its requests relative to the first.
fn replay(extra: &[&str]) -> (Run, Vec<f64>) {
    let bench::runtime::PluginRef::File(plugin) = fixtures::fixture("conversation") else {
        unreachable!("fixtures are files")
    };
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .backend("openai-chat")
        .arg("--dataset-name")
        .arg(&plugin)
        .args([
            "--dataset-option",
            "conversations=4",
            "--dataset-option",
            "turns=1",
            "--dataset-option",
            "first-send-interval=0.2",
        ])
        .prompts(4)
        .args(extra)
        .save_detailed()
        .run()
        .assert_success();
    let starts: Vec<f64> = run.json()["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let first = starts[0];
    let relative = starts.iter().map(|t| t - first).collect();
    (run, relative)
}

/// Whether each send time is within 5 ms of `step * i`.
fn on_time(starts: &[f64], step: f64) -> Result<(), String> {
    for (i, t) in starts.iter().enumerate() {
        let due = step * i as f64;
        if (t - due).abs() > 0.005 {
            return Err(format!(
                "request {i} sent at {t:.4} s, due at {due:.4} s: {starts:?}"
            ));
        }
    }
    Ok(())
}

#[test]
fn send_times_are_honoured_and_scaled() {
    within_bounds("trace replay at the dataset's times", || {
        let (run, starts) = replay(&[]);
        assert!(
            run.stdout
                .contains("Self timing is set, using the timestamps from the trace file."),
            "{run}"
        );
        assert_eq!(starts.len(), 4);
        on_time(&starts, 0.2)
    });
    within_bounds("trace replay twice as fast", || {
        let (_, starts) = replay(&["--time-scale", "0.5"]);
        on_time(&starts, 0.1)
    });
    // The rate instead (infinite by default): everything at once.
    let (run, starts) = replay(&["--no-self-timed"]);
    assert!(run.stdout.contains("Traffic request rate: inf"), "{run}");
    assert!(starts.iter().all(|t| *t < 0.15), "{starts:?}");
}

#[test]
fn self_timed_needs_a_dataset_that_gives_send_times() {
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .random(8, 2)
        .prompts(2)
        .arg("--self-timed")
        .run();
    assert!(!run.success(), "{run}");
    assert!(
        run.stderr.contains("--self-timed") && run.stderr.contains("no request a send time"),
        "{run}"
    );
}
