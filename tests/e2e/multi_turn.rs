//! Multi-turn ShareGPT (`--sharegpt-multi-turn`) against the mock server: each turn's chat
//! history holds the mock's real answers, every turn of a conversation carries its
//! session id header, the result reports TTFT/ITL by turn, and the prefix-cache hit rates
//! (the one the server reports in `usage`, and the workload's theoretical one) agree
//! with the mock's own prefix cache.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::*;

/// A multi-turn ShareGPT run of `conversations` conversations against `m` (at most 3
/// turns unless `extra` says otherwise); request ids are `t-<index>`.
fn sharegpt_turns(m: &Mock, conversations: u64, extra: &[&str]) -> Run {
    Bench::against(&m.url)
        .backend("openai-chat")
        .args(["--dataset-name", "sharegpt", "--dataset-path", &sharegpt()])
        .arg("--sharegpt-multi-turn")
        .args(["--request-id-prefix", "t-", "--seed", "3"])
        .args(extra)
        .args(if extra.contains(&"--sharegpt-max-turns") {
            &[][..]
        } else {
            &["--sharegpt-max-turns", "3"][..]
        })
        .prompts(conversations)
        .save_detailed()
        .run()
        .assert_success()
}

/// A request's chat messages, as (role, text).
type Messages = Vec<(String, String)>;

/// The chat messages of a request body.
fn messages(body: &[u8]) -> Messages {
    let v: Value = serde_json::from_slice(body).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                // A first turn with an image: its text part.
                Value::Array(parts) => parts[0]["text"].as_str().unwrap().to_owned(),
                other => panic!("content {other}"),
            };
            (m["role"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

#[test]
fn each_turn_carries_the_servers_answers_and_its_session_header() {
    let m = mock(Default::default());
    let run = sharegpt_turns(&m, 4, &[]);
    let r = run.json();
    let texts: Vec<&str> = r["generated_texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    // Every request the mock saw carried a session header (a ready check would resend
    // request 0, a first turn).
    let sessions = m.server.as_ref().unwrap().sessions();
    let mut by_session: BTreeMap<String, Vec<(usize, Messages)>> = BTreeMap::new();
    for s in &sessions {
        let id = s.request_id.as_deref().unwrap();
        let index: usize = id.strip_prefix("t-").unwrap().parse().unwrap();
        let turns = by_session.entry(s.session_id.clone()).or_default();
        // The ready check's copy of request 0.
        if turns.iter().any(|(i, _)| *i == index) {
            continue;
        }
        turns.push((index, messages(&s.body)));
    }
    let ids: Vec<&String> = by_session.keys().collect();
    assert_eq!(
        ids,
        ["sharegpt-0", "sharegpt-1", "sharegpt-2", "sharegpt-3"],
        "one session id per conversation"
    );
    let requests: usize = by_session.values().map(Vec::len).sum();
    assert_eq!(requests, texts.len(), "every request had a session");
    let mut later_turns = 0;
    for (session, turns) in &by_session {
        assert!(
            !turns.is_empty() && turns.len() <= 3,
            "{session}: {turns:?}"
        );
        assert_eq!(turns[0].1.len(), 1, "a first turn is one user message");
        for pair in turns.windows(2) {
            let ((prev_index, prev), (_, next)) = (&pair[0], &pair[1]);
            later_turns += 1;
            // The history so far, the answer the mock gave to the previous turn, and the
            // next user message.
            assert_eq!(next.len(), prev.len() + 2, "{session}");
            assert_eq!(next[..prev.len()], prev[..], "{session}");
            assert_eq!(next[prev.len()].0, "assistant");
            assert_eq!(next[prev.len()].1, texts[*prev_index], "{session}");
            assert_eq!(next[prev.len() + 1].0, "user");
        }
    }
    assert!(
        later_turns >= 4,
        "too few conversations went on: {by_session:?}"
    );
    assert_eq!(r["completed"], texts.len());
    assert_eq!(r["failed"], 0);

    // Per-turn statistics: counts that add up to the run's, by increasing turn.
    let per_turn = r["per_turn"].as_array().expect("per_turn");
    assert_eq!(per_turn[0]["turn"], 0);
    assert_eq!(per_turn[0]["completed"], 4);
    let counted: u64 = per_turn
        .iter()
        .map(|t| t["completed"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, texts.len() as u64);
    for t in per_turn {
        for key in [
            "mean_ttft_ms",
            "median_ttft_ms",
            "p99_ttft_ms",
            "mean_itl_ms",
            "p99_itl_ms",
            "mean_tpot_ms",
            "mean_e2el_ms",
        ] {
            assert!(t[key].as_f64().unwrap() >= 0.0, "{key} in {t}");
        }
    }
    // The first turns' TTFT mean is the mean of their TTFTs.
    let ttfts: Vec<f64> = r["ttfts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let first_mean = ttfts[..4].iter().sum::<f64>() / 4.0 * 1000.0;
    let reported = per_turn[0]["mean_ttft_ms"].as_f64().unwrap();
    assert!(
        (reported - first_mean).abs() < 1e-6,
        "{reported} vs {first_mean}"
    );
    assert!(
        run.stdout.contains(" Conversations and Prefix Cache "),
        "{}",
        run.stdout
    );
    // vLLM's own keys are still there.
    assert!(r["mean_ttft_ms"].is_number());
}

#[test]
fn the_session_header_is_a_backend_option() {
    let m = mock(Default::default());
    sharegpt_turns(
        &m,
        2,
        &[
            "--backend-option",
            "session-header=",
            "--sharegpt-max-turns",
            "2",
        ],
    );
    assert!(m.server.as_ref().unwrap().sessions().is_empty());
}

#[test]
fn single_turn_sharegpt_has_no_sessions_and_no_turn_keys() {
    let m = mock(Default::default());
    let r = Bench::against(&m.url)
        .backend("openai-chat")
        .args(["--dataset-name", "sharegpt", "--dataset-path", &sharegpt()])
        .prompts(5)
        .save_result()
        .run()
        .assert_success()
        .json();
    assert_eq!(r["completed"], 5);
    assert!(r.get("per_turn").is_none());
    assert!(r.get("prefix_cache_hit_rate").is_none());
    assert!(m.server.as_ref().unwrap().sessions().is_empty());
}

#[test]
fn think_time_delays_each_next_turn() {
    within_bounds("turns sent after the think time", || {
        let m = mock(Default::default());
        let r = sharegpt_turns(&m, 4, &["--sharegpt-think-time", "0.3"]).json();
        let list = |key: &str| -> Vec<f64> {
            r[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect()
        };
        let (starts, latencies) = (list("start_times"), list("latencies"));
        // Each conversation's requests in the order the mock got them (the ready check's
        // copy of request 0 first).
        let mut by_session: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for s in m.server.as_ref().unwrap().sessions() {
            let index: usize = s.request_id.unwrap()[2..].parse().unwrap();
            let turns = by_session.entry(s.session_id).or_default();
            if !turns.contains(&index) {
                turns.push(index);
            }
        }
        let mut later = 0;
        // Turns sent long after their think time: a busy machine, reported once every turn
        // has been checked against the think time.
        let mut late = Vec::new();
        for turns in by_session.values() {
            for pair in turns.windows(2) {
                later += 1;
                let answered = starts[pair[0]] + latencies[pair[0]];
                let wait = starts[pair[1]] - answered;
                // The answer's end is its last chunk, the mock's [DONE] a moment later.
                assert!(
                    wait >= 0.3 - 1e-3,
                    "a turn sent {wait:.4} s after the answer"
                );
                if wait > 0.6 {
                    late.push(format!("a turn sent {wait:.3} s after the answer"));
                }
            }
        }
        assert!(later > 0, "no conversation went on");
        if late.is_empty() {
            Ok(())
        } else {
            Err(late.join("; "))
        }
    });
}

#[test]
fn hit_rates_match_the_mocks_prefix_cache() {
    // The mock serves a request from its cache when its body repeats an earlier one, and
    // says so in usage (`prompt_tokens_details.cached_tokens`) and in /metrics.
    let m = mock(bench::mock::MockConfig {
        prefix_cache: true,
        ..Default::default()
    });
    // Every prompt: the same 64-token prefix, then 48 tokens of its own.
    let run = || {
        let run = Bench::against(&m.url)
            .backend("openai-chat")
            .args(["--dataset-name", "random", "--random-input-len", "48"])
            .args(["--random-output-len", "4", "--random-prefix-len", "64"])
            .prompts(20)
            .save_result()
            .run()
            .assert_success();
        let r = run.json();
        (run, r)
    };
    let (first, r) = run();
    // The server's usage reports and its /metrics counters count the same hits: none in
    // the first run, whose prompts all differ.
    assert_eq!(r["requests_with_cached_tokens"], 20, "{r:#}");
    assert_eq!(r["cached_prompt_tokens"], r["server_cached_prompt_tokens"]);
    assert_eq!(
        r["prompt_tokens_of_cache_reports"],
        r["server_queried_prompt_tokens"]
    );
    assert_eq!(
        r["prefix_cache_hit_rate"],
        r["server_prefix_cache_hit_rate"]
    );
    assert_eq!(r["cached_prompt_tokens"], 0);
    // After the first prompt, an infinite cache of 16-token blocks serves the prefix's 4
    // blocks of the 7 (re-encoding the text may move a boundary by a token).
    assert_eq!(r["theoretical_prefix_cache_block_size"], 16);
    let blocks = r["theoretical_prefix_cache_blocks"].as_u64().unwrap();
    let reused = r["theoretical_prefix_cache_reused_blocks"]
        .as_u64()
        .unwrap();
    assert!((20 * 6..=20 * 7).contains(&blocks), "{blocks}");
    assert!((19 * 3..=19 * 4).contains(&reused), "{reused} of {blocks}");
    let theoretical = r["theoretical_prefix_cache_hit_rate"].as_f64().unwrap();
    assert!((theoretical - reused as f64 / blocks as f64).abs() < 1e-12);
    for label in [
        "Prefix cache hit rate, theoretical (%):",
        "Prefix cache hit rate, reported (%):",
    ] {
        assert!(first.stdout.contains(label), "{}", first.stdout);
    }

    // The same workload again: every body repeats, every prompt token is a hit.
    let (_, r) = run();
    assert_eq!(r["prefix_cache_hit_rate"], 1.0, "{r:#}");
    assert_eq!(r["server_prefix_cache_hit_rate"], 1.0);

    // A block size of 0 leaves the theoretical rate out.
    let r = Bench::against(&m.url)
        .backend("openai-chat")
        .args(["--dataset-name", "random", "--random-input-len", "48"])
        .args(["--random-output-len", "4", "--prefix-cache-block-size", "0"])
        .prompts(3)
        .save_result()
        .run()
        .assert_success()
        .json();
    assert!(r.get("theoretical_prefix_cache_hit_rate").is_none());
}

#[test]
fn a_conversations_later_turns_reuse_its_earlier_prompts() {
    // Each turn's prompt starts with the previous turn's prompt and answer, so an
    // infinite cache serves most of every later turn.
    let m = mock(Default::default());
    let r = sharegpt_turns(&m, 4, &[]).json();
    let reused = r["theoretical_prefix_cache_reused_blocks"]
        .as_u64()
        .unwrap();
    let blocks = r["theoretical_prefix_cache_blocks"].as_u64().unwrap();
    let per_turn = r["per_turn"].as_array().unwrap();
    assert!(per_turn.len() >= 2, "{r:#}");
    assert!(reused > 0 && reused < blocks, "{reused} of {blocks}");
}
