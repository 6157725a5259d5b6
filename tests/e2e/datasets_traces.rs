//! Trace replay datasets: `timed_trace` (vLLM's `TimedTrace`, against request sets made by
//! vLLM 0.32's own code) and `mooncake` (beyond vLLM), on the synthetic Mooncake-schema trace
//! in `tests/data/datasets/mooncake`: the request sets, the shared prompt blocks, exact
//! lengths, and the send times honoured by the scheduler.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::{Bench, Run, bench, data, gate, gpt2, mock, within_bounds};

fn trace_path() -> String {
    data("datasets/mooncake/trace.jsonl").display().to_string()
}

/// The lines of the synthetic trace.
fn trace() -> Vec<Value> {
    std::fs::read_to_string(trace_path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn lines(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

fn ids(request: &Value) -> Vec<u64> {
    request["prompt"]
        .as_array()
        .unwrap_or_else(|| panic!("a token-id prompt: {request}"))
        .iter()
        .map(|t| t.as_u64().unwrap())
        .collect()
}

/// `bench dataset sample --dataset-name NAME` on the synthetic trace with `extra` flags.
fn sample(name: &str, extra: &[&str]) -> Run {
    let mut args: Vec<String> = [
        "dataset",
        "sample",
        "--dataset-name",
        name,
        "--dataset-path",
        &trace_path(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    Bench::new().args(args).env("BENCH_LOG", "info").run()
}

/// `timed_trace` reproduces the reference `name` (made by vLLM 0.32's `TimedTrace` under
/// `PYTHONHASHSEED` = the seed): prompts, lengths, request ids and send times.
fn check_vllm(name: &str) {
    let (meta, want) = crate::common::vllm_reference(name);
    let meta = &meta;
    assert_eq!(meta["pythonhashseed"], meta["seed"], "{name}");
    let tokenizer = data(&format!(
        "tokenizers/{}",
        meta["tokenizer"].as_str().unwrap()
    ));
    let init = &meta["init"];
    let run = sample(
        "timed_trace",
        &[
            "--tokenizer",
            &tokenizer.display().to_string(),
            "--seed",
            &meta["seed"].to_string(),
            "--num-prompts",
            &meta["num_requests"].to_string(),
            "--request-id-prefix",
            "benchmark-serving",
            "--timed-trace-chunk-hash-size",
            &init["timed_trace_chunk_hash_size"].to_string(),
            "--timed-trace-sec-multiplier",
            &init["timed_trace_sec_multiplier"].to_string(),
            "--timed-trace-label-timestamp",
            init["timed_trace_label_timestamp"].as_str().unwrap(),
        ],
    )
    .assert_success();
    let got = lines(&run);
    assert_eq!(got.len(), want.len(), "{name}: request count");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        for key in ["prompt", "prompt_len", "expected_output_len", "request_id"] {
            assert_eq!(g[key], w[key], "{name}: request {i} differs in {key}");
        }
        let (at, ts) = (
            g["send_at"].as_f64().unwrap(),
            w["timestamp"].as_f64().unwrap(),
        );
        assert!(
            (at - ts).abs() < 1e-12,
            "{name}: request {i} at {at}, vLLM {ts}"
        );
    }
}

#[test]
fn timed_trace_gpt2_seed0_is_vllms() {
    check_vllm("timed_trace-gpt2-seed0");
}

#[test]
fn timed_trace_gpt2_seed42_is_vllms() {
    check_vllm("timed_trace-gpt2-seed42");
}

#[test]
fn timed_trace_qwen3_seed0_is_vllms() {
    check_vllm("timed_trace-qwen3-seed0");
}

#[test]
fn timed_trace_qwen3_seed42_is_vllms() {
    check_vllm("timed_trace-qwen3-seed42");
}

#[test]
fn timed_trace_chunk512_gpt2_seed7_is_vllms() {
    check_vllm("timed_trace-chunk512-gpt2-seed7");
}

#[test]
fn timed_trace_line_without_a_field_names_file_line_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(
        &path,
        "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1}\n\
         {\"ts\": 1, \"input_length\": 5, \"output_length\": 1}\n",
    )
    .unwrap();
    let run = bench(&[
        "dataset",
        "sample",
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        path.to_str().unwrap(),
        "--tokenizer",
        &gpt2(),
        "--num-prompts",
        "5",
    ])
    .assert_failure();
    assert!(
        run.stderr.contains(
            "t.jsonl:2: no \"timestamp\" field (the line has: ts, input_length, output_length); \
             name the field with --timed-trace-label-timestamp"
        ),
        "{run}"
    );
}

/// Every request of a `mooncake` sample: exact lengths, the trace's times and output
/// lengths, and blocks shared token for token exactly where hash ids are.
#[test]
fn mooncake_shares_blocks_of_shared_hash_ids_with_exact_lengths() {
    let trace = trace();
    let run = sample(
        "mooncake",
        &["--tokenizer", &gpt2(), "--num-prompts", "40", "--seed", "3"],
    )
    .assert_success();
    let got = lines(&run);
    assert_eq!(got.len(), trace.len());
    // The block each hash id stands for, as first seen; every later use must match it.
    let mut blocks: HashMap<u64, Vec<u64>> = HashMap::new();
    let (mut shared, mut hits, mut total) = (0, 0, 0);
    for (i, (g, t)) in got.iter().zip(&trace).enumerate() {
        let tokens = ids(g);
        let input_length = t["input_length"].as_u64().unwrap() as usize;
        assert_eq!(tokens.len(), input_length, "request {i}");
        assert_eq!(g["prompt_len"].as_u64().unwrap() as usize, input_length);
        assert_eq!(g["expected_output_len"], t["output_length"]);
        let due = t["timestamp"].as_f64().unwrap() / 1000.0;
        assert!((g["send_at"].as_f64().unwrap() - due).abs() < 1e-12, "{g}");
        for (k, h) in t["hash_ids"].as_array().unwrap().iter().enumerate() {
            let start = k * 512;
            if start >= input_length {
                break;
            }
            total += 1;
            let block = &tokens[start..(start + 512).min(input_length)];
            match blocks.get(&h.as_u64().unwrap()) {
                Some(seen) => {
                    hits += 1;
                    let n = block.len().min(seen.len());
                    assert_eq!(block[..n], seen[..n], "request {i}, block {k} (hash {h})");
                    shared += 1;
                }
                None => {
                    // A new hash id is a new block: none of the known ones.
                    for seen in blocks.values() {
                        let n = block.len().min(seen.len()).min(16);
                        assert_ne!(block[..n], seen[..n], "request {i}, block {k}");
                    }
                    blocks.insert(h.as_u64().unwrap(), block.to_vec());
                }
            }
        }
    }
    assert!(shared > 50, "the trace shares blocks: {shared}");
    // The theoretical hit rate, computed here from the trace, is logged.
    let rate = 100.0 * hits as f64 / total as f64;
    let line = format!(
        "theoretical prefix-cache hit rate {rate:.1}% ({hits} of {total} prompt blocks of 512"
    );
    assert!(run.stderr.contains(&line), "{line}\n{run}");
    // Another seed: other tokens, same lengths.
    let other = lines(
        &sample(
            "mooncake",
            &["--tokenizer", &gpt2(), "--num-prompts", "3", "--seed", "4"],
        )
        .assert_success(),
    );
    assert_ne!(ids(&other[0]), ids(&got[0]));
    assert_eq!(ids(&other[2]).len(), ids(&got[2]).len());
}

/// Runs `dataset` over the trace's first `n` lines against a mock server; the offsets of
/// the requests' start times from the times they were due (`send_at` times `scale`).
fn replay(dataset: &str, n: usize, extra: &[&str], scale: f64) -> Result<(), String> {
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .backend("openai")
        .args(["--dataset-name", dataset, "--dataset-path", &trace_path()])
        .args(["--max-concurrency", "8"])
        .prompts(n as u64)
        .args(extra)
        .save_detailed()
        .run()
        .assert_success();
    assert!(
        run.stdout
            .contains("Self timing is set, using the timestamps from the trace file."),
        "{run}"
    );
    let starts: Vec<f64> = run.json()["start_times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let due: Vec<f64> = trace()[..n]
        .iter()
        .map(|t| t["timestamp"].as_f64().unwrap() / 1000.0 * scale)
        .collect();
    assert_eq!(starts.len(), n);
    // Each request's lateness against the trace; all within 1 ms of the median one (the
    // run's own start offset).
    let mut late: Vec<f64> = starts.iter().zip(&due).map(|(s, d)| s - d).collect();
    let mut sorted = late.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[n / 2];
    for (i, l) in late.iter_mut().enumerate() {
        if (*l - median).abs() > 0.001 {
            return Err(format!(
                "request {i} sent {:.3} ms off its trace time (relative to the median): \
                 starts {starts:?}, due {due:?}",
                (*l - median) * 1000.0
            ));
        }
    }
    Ok(())
}

#[test]
fn mooncake_send_times_are_honoured_within_a_millisecond() {
    // Sub-millisecond bounds: no other test may load the machine meanwhile.
    let _alone = gate::exclusive();
    within_bounds("mooncake trace replay", || replay("mooncake", 20, &[], 1.0));
}

#[test]
fn timed_trace_send_times_follow_the_multiplier() {
    // Sub-millisecond bounds: no other test may load the machine meanwhile.
    let _alone = gate::exclusive();
    within_bounds("timed_trace at 1 ms per unit", || {
        replay(
            "timed_trace",
            16,
            &["--timed-trace-sec-multiplier", "0.001"],
            1.0,
        )
    });
    // Half the multiplier: twice as fast.
    within_bounds("timed_trace at 0.5 ms per unit", || {
        replay(
            "timed_trace",
            16,
            &["--timed-trace-sec-multiplier", "0.0005"],
            0.5,
        )
    });
}

fn file_data(name: &str) -> String {
    data(&format!("datasets/file/{name}")).display().to_string()
}

/// `bench dataset sample --dataset-name file` on `tests/data/datasets/file/NAME`.
fn sample_file(name: &str, extra: &[&str]) -> Run {
    let mut args: Vec<String> = [
        "dataset",
        "sample",
        "--dataset-name",
        "file",
        "--dataset-path",
        &file_data(name),
        "--tokenizer",
        &gpt2(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    bench(&args)
}

/// The same rows as Parquet and as CSV make the same requests, each row's columns mapped
/// to its request (prompt, output length).
#[test]
fn file_maps_columns_of_parquet_and_csv_alike() {
    let flags = [
        "--num-prompts",
        "6",
        "--seed",
        "5",
        "--file-prompt-column",
        "question",
        "--file-output-len-column",
        "max_tokens",
    ];
    let parquet = sample_file("prompts.parquet", &flags).assert_success();
    let csv = sample_file("prompts.csv", &flags).assert_success();
    assert_eq!(parquet.stdout, csv.stdout);
    let got = lines(&parquet);
    let rows: Vec<Vec<String>> = std::fs::read_to_string(file_data("prompts.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    assert_eq!(got.len(), rows.len());
    let mut prompts: Vec<&str> = got.iter().map(|g| g["prompt"].as_str().unwrap()).collect();
    prompts.sort();
    let mut want: Vec<&str> = rows.iter().map(|r| r[0].as_str()).collect();
    want.sort();
    assert_eq!(prompts, want, "every row once");
    for g in &got {
        let row = rows.iter().find(|r| r[0] == g["prompt"]).unwrap();
        assert_eq!(g["expected_output_len"].to_string(), row[1]);
        assert!(g.get("session").is_none_or(Value::is_null), "{g}");
    }
    // Another seed, another order.
    let other = sample_file(
        "prompts.parquet",
        &[&flags[..3], &["6"], &flags[4..]].concat(),
    )
    .assert_success();
    assert_ne!(other.stdout, parquet.stdout);
}

/// A session column replays each conversation turn by turn: `--num-prompts` counts
/// conversations (4 in the file: a and b with two rows, c and d with one), every row is
/// sent once, and the first turns are chat prompts of one user message.
#[test]
fn file_session_column_replays_conversations_turn_by_turn() {
    let session = [
        "--file-prompt-column",
        "question",
        "--file-session-column",
        "conversation",
    ];
    let firsts = lines(
        &sample_file(
            "prompts.csv",
            &[&["--num-prompts", "4"], &session[..]].concat(),
        )
        .assert_success(),
    );
    assert_eq!(firsts.len(), 4);
    let mut ids: Vec<&str> = firsts
        .iter()
        .map(|f| f["session"]["id"].as_str().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, ["file-0", "file-1", "file-2", "file-3"]);
    let m = mock(Default::default());
    let run = Bench::against(&m.url)
        .backend("openai-chat")
        .args([
            "--dataset-name",
            "file",
            "--dataset-path",
            &file_data("prompts.csv"),
        ])
        .args(session)
        .args(["--request-id-prefix", "f-"])
        .prompts(4)
        .save_detailed()
        .run()
        .assert_success();
    let r = run.json();
    assert_eq!(r["completed"], 6, "{run}");
    let texts: Vec<&str> = r["generated_texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    // What the mock received, by session: (request index, messages as (role, text)).
    type Turns = Vec<(usize, Vec<(String, String)>)>;
    let mut by_session: HashMap<String, Turns> = HashMap::new();
    for s in m.server.as_ref().unwrap().sessions() {
        let index: usize = s.request_id.as_deref().unwrap()[2..].parse().unwrap();
        let body: Value = serde_json::from_slice(&s.body).unwrap();
        let messages = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let role = m["role"].as_str().unwrap().to_string();
                (role, m["content"].as_str().unwrap().to_string())
            })
            .collect();
        let turns = by_session.entry(s.session_id.clone()).or_default();
        // The ready check resends request 0.
        if !turns.iter().any(|(i, _)| *i == index) {
            turns.push((index, messages));
        }
    }
    let mut lengths: Vec<usize> = by_session.values().map(Vec::len).collect();
    lengths.sort();
    assert_eq!(lengths, [1, 1, 2, 2], "{by_session:?}");
    let user = |t: &str| ("user".to_string(), t.to_string());
    for turns in by_session.values().filter(|t| t.len() == 2) {
        let ((first, one), (_, two)) = (&turns[0], &turns[1]);
        assert_eq!(one.len(), 1);
        let want_next = match one[0].1.as_str() {
            "What is a prefix cache?" => "Translate 'good morning' into French.",
            "Name three prime numbers." => "And three more?",
            other => panic!("not a first turn: {other}"),
        };
        // The history holds the mock's real answer to the first turn.
        assert_eq!(
            two[..],
            [
                one[0].clone(),
                ("assistant".to_string(), texts[*first].to_string()),
                user(want_next)
            ]
        );
    }
}

#[test]
fn file_parquet_it_cannot_read_is_a_clear_error() {
    let zstd = sample_file("table-zstd.parquet", &["--num-prompts", "2"]).assert_failure();
    assert!(
        zstd.stderr
            .contains("table-zstd.parquet: column \"prompt\" is compressed with zstd")
            && zstd.stderr.contains("compression=\"snappy\""),
        "{zstd}"
    );
    for name in ["corrupt-pages.parquet", "truncated.parquet"] {
        let run = sample_file(name, &["--num-prompts", "2"]).assert_failure();
        assert!(
            run.stderr
                .contains(&format!("{name}: not a readable Parquet file")),
            "{run}"
        );
    }
    // A row without a prompt names the row.
    let run = sample_file("table-snappy.parquet", &["--num-prompts", "2"]).assert_failure();
    assert!(
        run.stderr
            .contains("table-snappy.parquet: row 3: \"prompt\" is empty"),
        "{run}"
    );
    let run = sample_file(
        "prompts.csv",
        &[
            "--num-prompts",
            "2",
            "--no-oversample",
            "--file-prompt-column",
            "prompt",
        ],
    )
    .assert_failure();
    assert!(
        run.stderr
            .contains("prompts.csv:2: no \"prompt\" column (the row has: question"),
        "{run}"
    );
}

/// A send-time column replays the file at its times (0.1 s apart here).
#[test]
fn file_send_time_column_is_honoured() {
    // Sub-millisecond bounds: no other test may load the machine meanwhile.
    let _alone = gate::exclusive();
    within_bounds("file replay at its send times", || {
        let m = mock(Default::default());
        let run = Bench::against(&m.url)
            .backend("openai-chat")
            .args([
                "--dataset-name",
                "file",
                "--dataset-path",
                &file_data("prompts.csv"),
            ])
            .args(["--file-prompt-column", "question"])
            .args(["--file-send-time-column", "at", "--max-concurrency", "4"])
            .prompts(6)
            .save_detailed()
            .run()
            .assert_success();
        let starts: Vec<f64> = run.json()["start_times"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_f64().unwrap())
            .collect();
        assert_eq!(starts.len(), 6);
        let late: Vec<f64> = starts
            .iter()
            .enumerate()
            .map(|(i, s)| s - 0.1 * i as f64)
            .collect();
        let mut sorted = late.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[3];
        match late.iter().position(|l| (l - median).abs() > 0.001) {
            None => Ok(()),
            Some(i) => Err(format!(
                "request {i} off its time by more than 1 ms: {starts:?}"
            )),
        }
    });
}
