//! Decode speed on a real model, for the acceptance figure "at least half of llama.cpp's
//! llama-server tokens/s" (SmolLM2-135M-Instruct Q4_1, CPU, 2 threads). Not run by default:
//!
//!     BENCH_ENGINE_SMOLLM2=~/.cache/bench-real-server/model/SmolLM2-135M-Instruct.Q4_1.gguf \
//!       cargo test --release -p bench-engine --test engine -- --ignored --nocapture smollm2
//!
//! Uses only the public API, as bench does.

use std::time::Instant;

use bench_engine::{Engine, EngineConfig, GenRequest, Sampling};

use crate::common::Recorder;

const OUTPUT: u32 = 128;

/// (output tok/s over the whole run, decode tok/s after every request's first token).
fn run(engine: &mut Engine, batch: usize) -> (f64, f64) {
    let requests: Vec<GenRequest> = (0..batch)
        .map(|i| GenRequest {
            // A short prompt (4 tokens), as in the llama-server figures.
            prompt: vec![1 + i as u32, 504, 3458, 28],
            max_tokens: OUTPUT,
            ignore_eos: true,
            sampling: Sampling::default(),
            not_before: None,
        })
        .collect();
    let mut rec = Recorder::default();
    let t0 = Instant::now();
    engine.generate(&requests, &mut rec).expect("generate");
    let end = rec.tokens.last().unwrap().2;
    assert_eq!(rec.tokens.len(), batch * OUTPUT as usize);
    // Decode phase: from the moment the last request had its first token.
    let first_of_each: Vec<Instant> = (0..batch)
        .map(|i| rec.tokens.iter().find(|t| t.0 == i).unwrap().2)
        .collect();
    let decode_start = *first_of_each.iter().max().unwrap();
    let decode_tokens = rec.tokens.iter().filter(|t| t.2 > decode_start).count();
    (
        rec.tokens.len() as f64 / end.duration_since(t0).as_secs_f64(),
        decode_tokens as f64 / end.duration_since(decode_start).as_secs_f64(),
    )
}

#[test]
#[ignore = "needs SmolLM2-135M-Instruct Q4_1 GGUF in BENCH_ENGINE_SMOLLM2; a speed figure, not a check"]
fn smollm2_q4_1_decode_speed() {
    let Some(model) = std::env::var_os("BENCH_ENGINE_SMOLLM2") else {
        panic!("set BENCH_ENGINE_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf");
    };
    let threads = std::env::var("BENCH_ENGINE_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    // BENCH_ENGINE_REQUANTIZE=0: the weights as stored (EngineConfig::requantize off).
    let requantize = std::env::var("BENCH_ENGINE_REQUANTIZE").map_or(true, |v| v != "0");
    let t = Instant::now();
    let mut engine = Engine::load(&EngineConfig {
        model: model.into(),
        threads: Some(threads),
        requantize,
        ..EngineConfig::default()
    })
    .expect("load");
    eprintln!(
        "loaded in {:.2} s: {:?}",
        t.elapsed().as_secs_f64(),
        engine.info()
    );
    run(&mut engine, 1); // warm-up
    let batches: Vec<usize> = std::env::var("BENCH_ENGINE_BATCHES")
        .unwrap_or_else(|_| "1,4,16".into())
        .split(',')
        .filter_map(|b| b.trim().parse().ok())
        .collect();
    for batch in batches {
        let (total, decode) = run(&mut engine, batch);
        eprintln!(
            "batch {batch:2}: {total:6.1} output tok/s over the run, {decode:6.1} decode tok/s ({OUTPUT} tokens each, {threads} threads)"
        );
    }
}

/// The real model through the engine says sensible things, and its embedded vocabulary
/// tokenizes as the tokenizer.json that `scripts/real-server.sh` writes for llama-server
/// (`BENCH_ENGINE_SMOLLM2_TOKENIZER`, optional).
#[test]
#[ignore = "needs SmolLM2-135M-Instruct Q4_1 GGUF in BENCH_ENGINE_SMOLLM2"]
fn smollm2_q4_1_answers_sensibly() {
    let Some(model) = std::env::var_os("BENCH_ENGINE_SMOLLM2") else {
        panic!("set BENCH_ENGINE_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf");
    };
    let mut engine = Engine::load(&EngineConfig {
        model: model.into(),
        ..EngineConfig::default()
    })
    .expect("load");
    let config = engine
        .tokenizer_config()
        .expect("a GGUF file's tokenizer config");
    let template = config["chat_template"].as_str().expect("a chat template");
    assert!(template.contains("<|im_start|>"), "{template}");
    assert_eq!(config["eos_token"], "<|im_end|>", "{config}");
    let tok = engine.tokenizer().clone();
    let prompt =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";
    let ids = tok.encode(prompt, true).unwrap().get_ids().to_vec();
    let mut rec = Recorder::default();
    let req = GenRequest {
        prompt: ids,
        max_tokens: 24,
        ignore_eos: false,
        sampling: Sampling::default(),
        not_before: None,
    };
    engine.generate(&[req], &mut rec).unwrap();
    let text = tok.decode(&rec.of(0), true).unwrap();
    eprintln!("SmolLM2: {text:?}");
    assert!(text.contains("Paris"), "{text}");

    if let Some(dir) = std::env::var_os("BENCH_ENGINE_SMOLLM2_TOKENIZER") {
        let reference =
            tokenizers::Tokenizer::from_file(std::path::Path::new(&dir).join("tokenizer.json"))
                .unwrap();
        for text in [
            prompt,
            "Hello world! 12345 numbers, 3.14159 and\n\n1. lists\t tabs   spaces",
            "unicode: café, 東京, 🙂 and <|im_end|> specials",
        ] {
            let a = tok.encode(text, false).unwrap().get_ids().to_vec();
            let b = reference.encode(text, false).unwrap().get_ids().to_vec();
            assert_eq!(a, b, "{text:?}");
        }
    }
}

/// Greedy tokens of the real model in both weight modes ([`EngineConfig::requantize`] on and
/// off), against llama.cpp's for the same prompts, with the logit margins that say whether a
/// difference is a near-tie. Prompts are raw text through the GGUF's own tokenizer, 32 tokens,
/// EOS ignored, as `scripts/real-server.sh` check g. `BENCH_ENGINE_LLAMA_TOKENS` (optional):
/// a JSON array of `{"prompt": ..., "tokens": [...]}`, llama-server's `/completion` tokens
/// (`"temperature": 0, "ignore_eos": true, "return_tokens": true`); without it, the prompts of
/// check g and no comparison. Prints, per prompt and mode, how many tokens agree, and at the
/// first difference the engine's logit of its own choice minus its logit of llama.cpp's
/// token; the smallest top-2 margin along the engine's own 32 steps; and the same greedy run
/// without the KV cache (a whole-sequence pass per token), which changes nothing but the
/// order of float sums in attention, so where it parts from the cached run measures how
/// sensitive greedy decoding of the model is. Measured this way (see the crate docs), the
/// engine's cached and uncached runs part as early as the engine and llama.cpp do.
#[test]
#[ignore = "needs SmolLM2-135M-Instruct Q4_1 GGUF in BENCH_ENGINE_SMOLLM2; a measurement, not a check"]
fn smollm2_greedy_against_llama_cpp() {
    let Some(model) = std::env::var_os("BENCH_ENGINE_SMOLLM2") else {
        panic!("set BENCH_ENGINE_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf");
    };
    let reference: Vec<(String, Option<Vec<u32>>)> =
        match std::env::var_os("BENCH_ENGINE_LLAMA_TOKENS") {
            Some(f) => {
                let v: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let tokens = r["tokens"].as_array().unwrap();
                        let tokens = tokens.iter().map(|t| t.as_u64().unwrap() as u32);
                        (
                            r["prompt"].as_str().unwrap().to_string(),
                            Some(tokens.collect()),
                        )
                    })
                    .collect()
            }
            None => [
                "The capital of France is",
                "def fibonacci(n):",
                "Once upon a time, in a small village by the sea,",
                "The three primary colors are",
            ]
            .iter()
            .map(|p| (p.to_string(), None))
            .collect(),
        };
    let threads = std::env::var("BENCH_ENGINE_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    for requantize in [true, false] {
        let mut engine = Engine::load(&EngineConfig {
            model: model.clone().into(),
            threads: Some(threads),
            requantize,
            ..EngineConfig::default()
        })
        .expect("load");
        eprintln!("requantize={requantize}: weights {}", engine.info().weights);
        let tok = engine.tokenizer().clone();
        for (prompt, want) in &reference {
            let ids = tok
                .encode(prompt.as_str(), true)
                .unwrap()
                .get_ids()
                .to_vec();
            let mut rec = Recorder::default();
            let req = GenRequest {
                prompt: ids.clone(),
                max_tokens: 32,
                ignore_eos: true,
                sampling: Sampling::default(),
                not_before: None,
            };
            engine.generate(&[req], &mut rec).unwrap();
            let got = rec.of(0);
            // Every step's logits, by one pass over prompt + generated tokens.
            let mut seq = ids.clone();
            seq.extend_from_slice(&got);
            let logits = engine.logits(&seq).unwrap();
            let step = |k: usize| &logits[ids.len() - 1 + k];
            let top2 = |row: &[f32]| {
                let mut v: Vec<(usize, f32)> = row.iter().copied().enumerate().collect();
                v.sort_by(|a, b| b.1.total_cmp(&a.1));
                (v[0], v[1])
            };
            let (min_k, min_margin) = (0..got.len())
                .map(|k| {
                    let (a, b) = top2(step(k));
                    (k, a.1 - b.1)
                })
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            eprintln!("  {prompt:?} (prompt ids {ids:?})");
            eprintln!("    engine:    {got:?}");
            eprintln!(
                "    smallest top-2 margin along the engine's path: {min_margin:.4} at step {min_k}"
            );
            // The same greedy decoding without the KV cache (one pass over the whole sequence
            // per token): where it parts from the cached run, the difference is the path's
            // float rounding, not the weights.
            let mut uncached = ids.clone();
            for _ in 0..got.len() {
                let rows = engine.logits(&uncached).unwrap();
                let last = rows.last().unwrap();
                uncached.push(top2(last).0.0 as u32);
            }
            let uncached = &uncached[ids.len()..];
            let same_path = got.iter().zip(uncached).take_while(|(a, b)| a == b).count();
            eprintln!("    no cache:  {uncached:?} ({same_path} as the cached run)");
            let Some(want) = want else { continue };
            eprintln!("    llama.cpp: {want:?}");
            let same_uncached = uncached
                .iter()
                .zip(want)
                .take_while(|(a, b)| a == b)
                .count();
            eprintln!(
                "    without the cache, {same_uncached}/{} agree",
                want.len()
            );
            let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
            if same >= want.len().min(got.len()) {
                eprintln!("    {same}/{} agree", want.len());
                continue;
            }
            let row = step(same);
            let (a, b) = top2(row);
            eprintln!(
                "    {same}/{} agree; at step {same}: engine {} ({:.4}), llama.cpp {} ({:.4}), \
                 margin {:.4}; the one-pass argmax there is {} (runner-up {} by {:.4})",
                want.len(),
                got[same],
                row[got[same] as usize],
                want[same],
                row[want[same] as usize],
                row[got[same] as usize] - row[want[same] as usize],
                a.0,
                b.0,
                a.1 - b.1,
            );
        }
    }
}
