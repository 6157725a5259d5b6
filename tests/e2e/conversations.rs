//! Multi-turn workloads (contract 0.3.0's sessions and `next-turn`): the host sends each
//! conversation's next turn after the previous answer, built by the dataset plugin from
//! the server's real answer, after the dataset's think time. The `conversation` fixture
//! plugin asks `conversation C turn T` and keeps the whole history; the mock counts a
//! chat's words as its prompt tokens and answers one word per output token.

use crate::common::*;

fn conversations(extra: &[&str]) -> serde_json::Value {
    let bench::runtime::PluginRef::File(plugin) = fixtures::fixture("conversation") else {
        unreachable!("fixtures are files")
    };
    let m = mock(Default::default());
    Bench::against(&m.url)
        .backend("openai-chat")
        .arg("--dataset-name")
        .arg(&plugin)
        .args([
            "--dataset-option",
            "conversations=3",
            "--dataset-option",
            "turns=3",
            "--dataset-option",
            "output-len=4",
        ])
        .args(extra)
        .prompts(3)
        .save_detailed()
        .run()
        .assert_success()
        .json()
}

fn numbers(r: &serde_json::Value, key: &str) -> Vec<f64> {
    r[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn each_turn_carries_the_real_answers_before_it() {
    let r = conversations(&[]);
    // 3 conversations of 3 turns: the first turns from the workload, 6 more on the way.
    assert_eq!(r["completed"], 9, "{r:#}");
    assert_eq!(r["failed"], 0);
    // Turn 0 is 4 words; each next turn adds the answer (4 words, as the server sent it)
    // and its own 4-word question. Without the answers the lengths would be 4, 8, 12.
    let mut lens: Vec<u64> = numbers(&r, "input_lens")
        .iter()
        .map(|&n| n as u64)
        .collect();
    lens.sort();
    assert_eq!(lens, [4, 4, 4, 12, 12, 12, 20, 20, 20], "{r:#}");
    for text in r["generated_texts"].as_array().unwrap() {
        assert_eq!(text.as_str().unwrap().split_whitespace().count(), 4);
    }
}

#[test]
fn a_next_turn_waits_for_the_answer_and_the_think_time() {
    within_bounds("turns sent after the think time", || {
        let r = conversations(&["--dataset-option", "think-time=0.3"]);
        assert_eq!(r["completed"], 9, "{r:#}");
        let mut starts = numbers(&r, "start_times");
        let first = starts.iter().copied().fold(f64::INFINITY, f64::min);
        for s in &mut starts {
            *s -= first;
        }
        starts.sort_by(f64::total_cmp);
        // All first turns at once; each later round at least one think time after the
        // answers before it (the mock answers in milliseconds).
        // The claim first, on every attempt: no later turn before its think time.
        let rounds: Vec<&[f64]> = starts.chunks(3).collect();
        assert!(
            rounds[1][0] >= 0.3,
            "second turns before the think time: {starts:?}"
        );
        assert!(rounds[2][0] >= 0.6, "third turns too early: {starts:?}");
        // Then the upper bounds, which a busy machine can break.
        if rounds[0][2] > 0.1 {
            return Err(format!(
                "first turns spread over {:.3} s: {starts:?}",
                rounds[0][2]
            ));
        }
        if rounds[2][2] > 1.0 {
            return Err(format!("third turns late: {starts:?}"));
        }
        Ok(())
    });
}

#[test]
fn any_conversation_dataset_gets_session_headers_and_per_turn_metrics() {
    let bench::runtime::PluginRef::File(plugin) = fixtures::fixture("conversation") else {
        unreachable!("fixtures are files")
    };
    let m = mock(Default::default());
    let r = Bench::against(&m.url)
        .backend("openai-chat")
        .arg("--dataset-name")
        .arg(&plugin)
        .args(["--dataset-option", "conversations=3"])
        .args(["--dataset-option", "turns=3"])
        .prompts(3)
        .save_result()
        .run()
        .assert_success()
        .json();
    // Three turns of three conversations: one entry per turn index, three requests each.
    let per_turn = r["per_turn"].as_array().expect("per_turn");
    let counts: Vec<(u64, u64)> = per_turn
        .iter()
        .map(|t| {
            (
                t["turn"].as_u64().unwrap(),
                t["completed"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [(0, 3), (1, 3), (2, 3)], "{r:#}");
    // Each request carried its conversation's id (the ready check resends one first turn).
    let mut per_session = std::collections::BTreeMap::<String, usize>::new();
    for s in m.server.as_ref().unwrap().sessions() {
        *per_session.entry(s.session_id).or_default() += 1;
    }
    let ids: Vec<&String> = per_session.keys().collect();
    assert_eq!(ids, ["conv-0", "conv-1", "conv-2"]);
    let sent: usize = per_session.values().sum();
    assert!((9..=10).contains(&sent), "{per_session:?}");
}
