//! Generation: the KV cache, ragged continuous batching, chunked prefill, sampling, events.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bench_engine::{
    Engine, EngineConfig, EngineError, Events, FinishReason, GenOptions, GenRequest, GenStats,
    Sampling,
};

use crate::common::*;

fn engine(model: PathBuf, max_num_seqs: usize, max_num_batched_tokens: usize) -> Engine {
    Engine::load(&EngineConfig {
        model,
        max_num_seqs,
        max_num_batched_tokens,
        ..EngineConfig::default()
    })
    .expect("model loads")
}

fn run(e: &mut Engine, requests: &[GenRequest]) -> Recorder {
    let mut rec = Recorder::default();
    e.generate(requests, &mut rec).expect("generate");
    rec
}

fn prompt(len: usize, salt: u32, vocab: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| (i * 7919 + salt * 104_729 + 1) % vocab)
        .collect()
}

/// Greedy decoding with the KV cache picks, at every step, the argmax of a full forward
/// pass over the whole sequence so far: the cache holds what recomputing would give.
fn cache_matches_full_forward(model: PathBuf, vocab: u32) {
    // (The prefill and attention code paths are held to each other at every logit by
    // `model::tests::one_pass_prefill_chunks_and_decode_agree`.)
    let mut e = load(model);
    for (len, salt) in [(1, 0), (5, 1), (23, 2)] {
        let p = prompt(len, salt, vocab);
        let rec = run(&mut e, &[greedy(p.clone(), 24)]);
        let out = rec.of(0);
        assert_eq!(out.len(), 24);
        let mut seq = p.clone();
        for &t in &out {
            let logits = e.logits(&seq).unwrap();
            let last = logits.last().unwrap();
            let max = last.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let first_max = last.iter().position(|&v| v == max).unwrap() as u32;
            assert!(
                t == first_max || (last[t as usize] - max).abs() < 1e-6,
                "prompt {len}: cached decode chose {t}, full forward {first_max}"
            );
            seq.push(t);
        }
    }
}

#[test]
fn greedy_with_kv_cache_equals_argmax_of_full_forward_gpt2() {
    cache_matches_full_forward(fake_gpt2(), 50257);
}

#[test]
fn greedy_with_kv_cache_equals_argmax_of_full_forward_llama() {
    cache_matches_full_forward(tiny_llama_gguf(), 32000);
}

/// Prompts of different lengths batched together (and admitted as slots free up, and
/// prefilled in chunks next to other sequences' decode tokens) give the same tokens as each
/// run alone. (`model::tests::ragged_steps_equal_separate_runs` holds the logits to it.)
#[test]
fn ragged_batches_give_the_same_tokens_as_one_at_a_time() {
    for model in [tiny_llama_gguf(), fake_gpt2()] {
        let vocab = if model == fake_gpt2() { 50257 } else { 32000 };
        let requests: Vec<GenRequest> = [(1, 9), (3, 16), (7, 5), (12, 20), (30, 11), (2, 1)]
            .iter()
            .enumerate()
            .map(|(i, &(len, out))| GenRequest {
                // Sampled (seeded), so that the tokens hang on the logits: the tiny random
                // models' greedy picks barely depend on the context.
                sampling: Sampling {
                    temperature: 1.0,
                    top_p: 1.0,
                    top_k: 0,
                    seed: i as u64,
                },
                ..greedy(prompt(len, i as u32 + 10, vocab), out)
            })
            .collect();
        let mut alone = engine(model.clone(), 256, 8192);
        let want: Vec<Vec<u32>> = requests
            .iter()
            .map(|r| run(&mut alone, std::slice::from_ref(r)).of(0))
            .collect();
        // All at once; a queue of two slots; prefill chunks of at most 8 tokens per step.
        for (seqs, budget) in [(256, 8192), (2, 8192), (4, 8)] {
            let mut e = engine(model.clone(), seqs, budget);
            let rec = run(&mut e, &requests);
            for (i, w) in want.iter().enumerate() {
                assert_eq!(
                    &rec.of(i),
                    w,
                    "request {i}, max_num_seqs {seqs}, budget {budget}"
                );
                assert_eq!(rec.reason(i), Some(FinishReason::Length));
            }
        }
    }
}

#[test]
fn max_num_seqs_bounds_the_running_batch() {
    let mut e = engine(tiny_llama_gguf(), 2, 8192);
    let requests: Vec<GenRequest> = (0..5).map(|i| greedy(prompt(3, i, 32000), 4)).collect();
    let rec = run(&mut e, &requests);
    // Replay the events: never more than two admitted and unfinished at once.
    let mut events: Vec<(Instant, i32, usize)> = rec
        .admitted
        .iter()
        .map(|&(i, t)| (t, 1, i))
        .chain(rec.finished.iter().map(|&(i, _, t)| (t, -1, i)))
        .collect();
    events.sort_by_key(|e| (e.0, e.1)); // a finish before an admission at the same instant
    let mut live = 0;
    for (_, d, _) in events {
        live += d;
        assert!(live <= 2, "{live} running");
    }
    assert_eq!(
        rec.admitted.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4],
        "admitted in order"
    );
}

fn sampled(seed: u64) -> Sampling {
    Sampling {
        temperature: 0.9,
        top_p: 0.95,
        top_k: 1000,
        seed,
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_independent_of_the_batch() {
    let mut e = load(tiny_llama_gguf());
    let req = |seed| GenRequest {
        sampling: sampled(seed),
        ..greedy(prompt(4, 3, 32000), 32)
    };
    let a = run(&mut e, &[req(42)]).of(0);
    let b = run(&mut e, &[req(42)]).of(0);
    assert_eq!(a, b, "same seed, same tokens");
    let c = run(&mut e, &[req(43)]).of(0);
    assert_ne!(a, c, "another seed, other tokens");
    // Next to other requests (sampled and greedy), the same tokens.
    let rec = run(&mut e, &[greedy(prompt(9, 1, 32000), 20), req(42), req(7)]);
    assert_eq!(rec.of(1), a);
    // A sampled stream is not the greedy one (the random model's distribution is flat).
    let g = run(&mut e, &[greedy(prompt(4, 3, 32000), 32)]).of(0);
    assert_ne!(a, g);
}

#[test]
fn events_come_in_order_with_times() {
    let mut e = engine(fake_gpt2(), 2, 16);
    let t0 = Instant::now();
    let requests: Vec<GenRequest> = (0..4).map(|i| greedy(prompt(20, i, 50257), 6)).collect();
    let rec = run(&mut e, &requests);
    for i in 0..4 {
        let admitted = rec.admitted.iter().find(|a| a.0 == i).unwrap().1;
        let times: Vec<Instant> = rec
            .tokens
            .iter()
            .filter(|t| t.0 == i)
            .map(|t| t.2)
            .collect();
        let finished: Vec<_> = rec.finished.iter().filter(|f| f.0 == i).collect();
        assert_eq!(times.len(), 6);
        assert_eq!(finished.len(), 1, "finished exactly once");
        assert!(t0 <= admitted && admitted <= times[0]);
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!(*times.last().unwrap() <= finished[0].2);
    }
    // No event for a request after its finish.
    for &(i, _, at) in &rec.finished {
        assert!(rec.tokens.iter().filter(|t| t.0 == i).all(|t| t.2 <= at));
    }
}

#[test]
fn not_before_delays_admission() {
    let mut e = load(fake_gpt2());
    let start = Instant::now();
    let later = start + Duration::from_millis(60);
    let requests = vec![
        greedy(vec![1, 2, 3], 3),
        GenRequest {
            not_before: Some(later),
            ..greedy(vec![4, 5], 3)
        },
    ];
    let rec = run(&mut e, &requests);
    let admitted_1 = rec.admitted.iter().find(|a| a.0 == 1).unwrap().1;
    assert!(admitted_1 >= later);
    assert_eq!(rec.of(1).len(), 3);
}

/// The client's cap (`--max-concurrency`): with 6 requests due at once, 8 slots and a cap of
/// 2, the engine holds at most 2 (its own count), releases each later request only when
/// an earlier one has finished, and every request still generates all its tokens.
#[test]
fn a_cap_on_requests_in_flight_holds_arrivals_back() {
    let mut e = engine(fake_gpt2(), 8, 8192);
    let requests: Vec<GenRequest> = (0..6).map(|i| greedy(prompt(3, i, 50257), 4)).collect();
    let mut rec = Recorder::default();
    let options = GenOptions {
        max_in_flight: Some(2),
    };
    let stats = e.generate_with(&requests, &options, &mut rec).unwrap();
    assert_eq!(
        stats,
        GenStats {
            peak_running: 2,
            peak_in_flight: 2
        }
    );
    let released: Vec<usize> = rec.released.iter().map(|r| r.0).collect();
    assert_eq!(released, [0, 1, 2, 3, 4, 5]);
    // The first two were sent on arrival; the k-th later one exactly when the (k - 1)-th
    // request finished, whose slot it took: two in flight, never three.
    let mut finishes: Vec<Instant> = rec.finished.iter().map(|f| f.2).collect();
    finishes.sort();
    for (k, &(index, held_until)) in rec.released.iter().enumerate() {
        if k < 2 {
            assert_eq!(held_until, None, "request {index}");
            continue;
        }
        assert_eq!(held_until, Some(finishes[k - 2]), "request {index}");
        let admitted = rec.admitted.iter().find(|a| a.0 == index).unwrap().1;
        assert!(
            admitted >= finishes[k - 2],
            "request {index} admitted before its slot freed"
        );
    }
    for i in 0..6 {
        assert_eq!(rec.of(i).len(), 4, "request {i}");
    }
    // Without the cap all 6 run in one batch; a zero cap is refused.
    let stats = e
        .generate_with(&requests, &GenOptions::default(), &mut Recorder::default())
        .unwrap();
    assert_eq!(stats.peak_running, 6);
    assert_eq!(stats.peak_in_flight, 6);
    let zero = GenOptions {
        max_in_flight: Some(0),
    };
    assert!(matches!(
        e.generate_with(&requests, &zero, &mut Recorder::default()),
        Err(EngineError::Config(_))
    ));
}

/// Stops after `after` tokens.
struct StopAfter {
    rec: Recorder,
    after: usize,
}

impl Events for StopAfter {
    fn admitted(&mut self, index: usize, at: Instant) {
        self.rec.admitted(index, at)
    }
    fn token(&mut self, index: usize, token: u32, at: Instant) {
        self.rec.token(index, token, at)
    }
    fn finished(&mut self, index: usize, reason: FinishReason, at: Instant) {
        self.rec.finished(index, reason, at)
    }
    fn stop(&self) -> bool {
        self.rec.tokens.len() >= self.after
    }
}

#[test]
fn stop_aborts_running_and_waiting_requests() {
    let mut e = engine(fake_gpt2(), 2, 8192);
    let requests: Vec<GenRequest> = (0..4).map(|i| greedy(prompt(3, i, 50257), 50)).collect();
    let mut ev = StopAfter {
        rec: Recorder::default(),
        after: 5,
    };
    e.generate(&requests, &mut ev)
        .expect("stopping is not an error");
    assert!(ev.rec.tokens.len() < 10);
    for i in 0..4 {
        assert_eq!(ev.rec.reason(i), Some(FinishReason::Aborted), "request {i}");
        assert_eq!(ev.rec.finished.iter().filter(|f| f.0 == i).count(), 1);
    }
    // Requests 2 and 3 never got a slot: aborted without being admitted.
    assert!(ev.rec.admitted.iter().all(|a| a.0 < 2));
}

#[test]
fn eos_stops_a_request_unless_it_ignores_eos() {
    // fake-gpt2 greedily produces token 47143 after most prompts: make that its EOS.
    let dir = Scratch::new("eos");
    copy_dir(
        &fake_gpt2(),
        &dir.0,
        &["config.json", "generation_config.json"],
    );
    let cfg = std::fs::read_to_string(fake_gpt2().join("config.json")).unwrap();
    let cfg = cfg.replace("\"eos_token_id\": 50256", "\"eos_token_id\": 47143");
    std::fs::write(dir.0.join("config.json"), cfg).unwrap();
    let mut e = load(dir.0.clone());
    assert_eq!(e.info().eos_token_ids, vec![47143]);
    let p = vec![15496, 995];
    let rec = run(
        &mut e,
        &[
            GenRequest {
                ignore_eos: false,
                ..greedy(p.clone(), 10)
            },
            greedy(p, 10),
        ],
    );
    assert_eq!(
        rec.of(0),
        vec![47143],
        "the EOS token is reported, then the request stops"
    );
    assert_eq!(rec.reason(0), Some(FinishReason::Stop));
    assert_eq!(rec.of(1).len(), 10);
    assert_eq!(rec.reason(1), Some(FinishReason::Length));
}

#[test]
fn bad_requests_fail_before_any_work() {
    let mut e = Engine::load(&EngineConfig {
        model: fake_gpt2(),
        max_model_len: Some(16),
        ..EngineConfig::default()
    })
    .unwrap();
    assert_eq!(e.info().max_model_len, 16);
    let mut rec = Recorder::default();
    let long = vec![greedy(vec![1; 4], 3), greedy(vec![1; 12], 5)];
    match e.generate(&long, &mut rec) {
        Err(EngineError::PromptTooLong { index, len, max }) => {
            assert_eq!((index, len, max), (1, 12, 11));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        rec.admitted.is_empty() && rec.tokens.is_empty(),
        "no work done"
    );
    // Exactly filling the context is fine.
    run(&mut e, &[greedy(vec![1; 11], 5)]);
    for (req, what) in [
        (greedy(vec![], 3), "empty prompt"),
        (greedy(vec![1], 0), "max_tokens"),
        (greedy(vec![50257], 3), "outside the vocabulary"),
    ] {
        let err = e.generate(&[req], &mut rec).unwrap_err();
        assert!(
            matches!(err, EngineError::BadRequest { index: 0, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains(what), "{err}");
    }
    assert!(matches!(
        e.logits(&[1; 17]),
        Err(EngineError::PromptTooLong { .. })
    ));
}

/// bench may load the engine on one thread and run it on another.
#[test]
fn engine_is_send() {
    fn send<T: Send>() {}
    send::<Engine>();
    send::<EngineError>();
}
