//! Plugins built for an older contract run unchanged: `tests/fixtures/api-0.2.0/`,
//! `api-0.3.0/`, `api-0.4.0/`, `api-0.4.1/`, `api-0.5.0/` and `api-0.6.0/` hold the
//! first-party `random` dataset and `openai-chat` backend as built for `bench:plugin@0.2.0`,
//! `@0.3.0`, `@0.4.0`, `@0.4.1`, `@0.5.0` and `@0.6.0`. Each run through the host's adapter
//! for that version must give what the current plugins give: the same requests, the same
//! measurements, the same failure kinds.

use bench::mock::{Faults, MockConfig};
use serde_json::Value;

use crate::common::*;

fn old_plugin(name: &str) -> String {
    plugin_for("0.2.0", name)
}

fn plugin_for(version: &str, name: &str) -> String {
    repo()
        .join(format!("tests/fixtures/api-{version}"))
        .join(format!("{name}.wasm"))
        .display()
        .to_string()
}

#[test]
fn a_plugin_built_for_0_3_0_loads_names_its_version_and_keeps_its_flags() {
    let plugin = plugin_for("0.3.0", "random");
    let out = bench(&["plugin", "inspect", &plugin]).assert_success();
    assert!(
        out.stdout
            .starts_with("random 0.1.0 (dataset plugin, API bench:plugin@0.3.0)"),
        "{out}"
    );
    // 0.3.0 options have flags of their own, which the adapter keeps.
    assert!(out.stdout.contains("--random-input-len"), "{out}");
}

#[test]
fn a_0_3_0_dataset_and_backend_give_what_the_current_ones_give() {
    let old = sample(&plugin_for("0.3.0", "random"));
    assert_eq!(old.lines().count(), 40);
    assert_eq!(old, sample("random"));

    let old = serve_with(
        &plugin_for("0.3.0", "openai-chat"),
        &plugin_for("0.3.0", "random"),
    );
    let current = serve_with("openai-chat", "random");
    assert_same_measurements(&old, &current);
    assert_eq!(errors(&old), errors(&current));
    assert_eq!(old["completed"], 15, "{old:#}");
    assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
}

/// 0.5.0 added the `server-timing` event: plugins built for 0.4.1, and for 0.4.0 (whose
/// interfaces 0.4.1 kept, linked to them by semver), run through the 0.4.1 adapter and
/// give what the current plugins give.
#[test]
fn plugins_built_for_0_4_x_run_through_the_0_4_1_adapter() {
    let current = serve_with("openai-chat", "random");
    for version in ["0.4.0", "0.4.1"] {
        let plugin = plugin_for(version, "random");
        let out = bench(&["plugin", "inspect", &plugin]).assert_success();
        assert!(
            out.stdout.starts_with(&format!(
                "random 0.1.0 (dataset plugin, API bench:plugin@{version})"
            )),
            "{out}"
        );
        assert_eq!(sample(&plugin), sample("random"), "{version}");

        let old = serve_with(
            &plugin_for(version, "openai-chat"),
            &plugin_for(version, "random"),
        );
        assert_same_measurements(&old, &current);
        assert_eq!(errors(&old), errors(&current), "{version}");
        assert_eq!(old["completed"], 15, "{version}: {old:#}");
        assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
    }
}

/// 0.6.0 added output constraints to requests: plugins built for 0.5.0 run through the
/// 0.5.0 adapter and give what the current plugins give.
#[test]
fn plugins_built_for_0_5_0_run_through_the_0_5_0_adapter() {
    let plugin = plugin_for("0.5.0", "random");
    let out = bench(&["plugin", "inspect", &plugin]).assert_success();
    assert!(
        out.stdout
            .starts_with("random 0.1.0 (dataset plugin, API bench:plugin@0.5.0)"),
        "{out}"
    );
    assert!(out.stdout.contains("--random-input-len"), "{out}");
    assert_eq!(sample(&plugin), sample("random"));

    let old = serve_with(
        &plugin_for("0.5.0", "openai-chat"),
        &plugin_for("0.5.0", "random"),
    );
    let current = serve_with("openai-chat", "random");
    assert_same_measurements(&old, &current);
    assert_eq!(errors(&old), errors(&current));
    assert_eq!(old["completed"], 15, "{old:#}");
    assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
}

/// 0.7.0 let datasets grade answers (samples with references, `grade`): plugins built for
/// 0.6.0 run through the 0.6.0 adapter, whose `types` is the current one, and give what
/// the current plugins give; their requests carry no reference, so nothing is graded.
#[test]
fn plugins_built_for_0_6_0_run_through_the_0_6_0_adapter() {
    let plugin = plugin_for("0.6.0", "random");
    let out = bench(&["plugin", "inspect", &plugin]).assert_success();
    assert!(
        out.stdout
            .starts_with("random 0.1.0 (dataset plugin, API bench:plugin@0.6.0)"),
        "{out}"
    );
    assert!(out.stdout.contains("--random-input-len"), "{out}");
    assert_eq!(sample(&plugin), sample("random"));

    let old = serve_with(
        &plugin_for("0.6.0", "openai-chat"),
        &plugin_for("0.6.0", "random"),
    );
    let current = serve_with("openai-chat", "random");
    assert_same_measurements(&old, &current);
    assert_eq!(errors(&old), errors(&current));
    assert_eq!(old["completed"], 15, "{old:#}");
    assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
    assert!(old.get("graded_requests").is_none(), "{old:#}");
}

#[test]
fn a_plugin_built_for_0_2_0_loads_and_names_its_version() {
    let plugin = old_plugin("random");
    let out = bench(&["plugin", "inspect", &plugin]).assert_success();
    assert!(
        out.stdout
            .starts_with("random 0.1.0 (dataset plugin, API bench:plugin@0.2.0)"),
        "{out}"
    );
    // Its options are listed; 0.2.0 could not give them flags of their own.
    assert!(out.stdout.contains("input-len"), "{out}");
}

/// An old plugin's run measured what the current plugins' run measured: the same counts,
/// token totals, failure kinds and per-request lengths.
fn assert_same_measurements(old: &Value, current: &Value) {
    for key in [
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "failures_by_kind",
        "input_lens",
        "output_lens",
    ] {
        assert_eq!(old[key], current[key], "{key}");
    }
}

/// `bench dataset sample` with `dataset`, as JSON lines.
fn sample(dataset: &str) -> String {
    Bench::new()
        .args(["dataset", "sample", "--dataset-name", dataset])
        .args(["--tokenizer", &gpt2(), "--num-prompts", "40", "--seed", "7"])
        .args(["--dataset-option", "input-len=48"])
        .args(["--dataset-option", "output-len=9"])
        .args(["--dataset-option", "range-ratio=0.5"])
        .run()
        .assert_success()
        .stdout
}

#[test]
fn a_0_2_0_dataset_samples_the_same_requests_as_the_current_one() {
    let old = sample(&old_plugin("random"));
    let current = sample("random");
    assert_eq!(old.lines().count(), 40);
    assert_eq!(old, current);
}

/// A serve run of 20 requests against a mock that sends a malformed frame in every 4th
/// response, with `backend` and `dataset`; returns the saved result.
fn serve_with(backend: &str, dataset: &str) -> Value {
    let m = mock(MockConfig {
        faults: Faults {
            malformed_rate: 0.25,
            ..Faults::default()
        },
        ..MockConfig::default()
    });
    Bench::new()
        .arg("serve")
        .args(["--backend", backend, "--dataset-name", dataset])
        .with_server(&m.url)
        .args(["--dataset-option", "input-len=16"])
        .args(["--dataset-option", "output-len=8"])
        .arg("--ignore-eos")
        // One at a time: the mock faults every 4th arrival, the same requests both runs.
        .args(["--max-concurrency", "1"])
        .prompts(20)
        .save_detailed()
        .run()
        .assert_success()
        .json()
}

#[test]
fn a_0_2_0_backend_measures_and_fails_requests_as_the_current_one() {
    let old = serve_with(&old_plugin("openai-chat"), &old_plugin("random"));
    let current = serve_with("openai-chat", "random");
    assert_same_measurements(&old, &current);
    // The errors quote the start of the bad frame, which holds the mock's `created` time
    // in seconds: the two runs can fall on either side of a second.
    assert_eq!(errors(&old), errors(&current));
    assert_eq!(old["completed"], 15);
    assert_eq!(old["total_output_tokens"], 15 * 8);
    // The 0.2.0 SDK's malformed-frame events keep their kind through the adapter.
    assert_eq!(old["failures_by_kind"]["invalid-chunk"], 5, "{old:#}");
    // Every request was timed (the failed ones up to their bad frame).
    let timed = |r: &Value| {
        r["ttfts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t.as_f64().unwrap() > 0.0)
            .count()
    };
    assert_eq!(timed(&old), 20);
}

/// 0.3.0's conversations: a multi-turn source stays open after sampling, and its next turn
/// is built from the answer the host reports (`tests/fixtures/plugins/conversation`).
#[test]
fn a_multi_turn_source_continues_a_conversation_from_the_reported_answer() {
    use bench::runtime::{HostContext, Prompt, Runtime, RuntimeConfig, Session, TurnResult};
    // Building and compiling the fixture keeps the cores busy.
    gate::enter();
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.path().to_path_buf()),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut dataset = runtime
        .load_dataset(
            &crate::common::fixtures::fixture("conversation"),
            HostContext::default(),
            None,
        )
        .unwrap();
    let description = dataset.description().unwrap();
    assert!(description.multi_turn);
    let options = vec![
        ("conversations".to_string(), "2".to_string()),
        ("think-time".to_string(), "0.25".to_string()),
    ];
    let first = dataset.sample(10, options).unwrap();
    assert_eq!(first.len(), 2);
    let session = first[1].request.session.clone().unwrap();
    assert_eq!((session.id.as_str(), session.turn), ("conv-1", 0));

    let answer = |turn: u32, text: &str| TurnResult {
        session: Session {
            id: "conv-1".into(),
            turn,
        },
        success: true,
        generated_text: text.into(),
        ttft: 0.01,
        latency: 0.05,
        finished_at: 2.0,
    };
    let next = dataset
        .next_turn(&answer(0, "the real answer"))
        .unwrap()
        .unwrap();
    assert_eq!(next.session.as_ref().unwrap().turn, 1);
    assert_eq!(next.send_at, Some(2.25));
    let Prompt::Chat(history) = &next.prompt else {
        panic!("{:?}", next.prompt)
    };
    let texts: Vec<String> = history
        .iter()
        .map(|m| format!("{}: {:?}", m.role, m.content))
        .collect();
    assert_eq!(history.len(), 3, "{texts:?}");
    assert!(texts[1].starts_with("assistant") && texts[1].contains("the real answer"));
    assert!(texts[2].contains("conversation 1 turn 1"));
    // The last turn (of 3) ends the conversation.
    assert!(dataset.next_turn(&answer(1, "again")).unwrap().is_some());
    assert!(dataset.next_turn(&answer(2, "done")).unwrap().is_none());
    // A single-turn source is closed after sampling: next-turn is refused, typed.
    let mut random = runtime
        .load_dataset(
            &bench::runtime::PluginRef::parse("random").unwrap(),
            HostContext::default(),
            None,
        )
        .unwrap();
    assert!(!random.description().unwrap().multi_turn);
    let err = random.next_turn(&answer(0, "x")).unwrap_err();
    assert!(
        matches!(err.failure, bench::runtime::CallFailure::NotOpen),
        "{err}"
    );
}

/// The result's per-request errors, each frame's `"created":<seconds>` left out.
fn errors(result: &Value) -> Vec<String> {
    result["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let e = e.as_str().unwrap();
            match e.split_once("\\\"created\\\":") {
                Some((before, after)) => {
                    let rest = after.trim_start_matches(|c: char| c.is_ascii_digit());
                    format!("{before}\\\"created\\\":_{rest}")
                }
                None => e.to_owned(),
            }
        })
        .collect()
}
