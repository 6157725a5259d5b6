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
    let t = Instant::now();
    let mut engine = Engine::load(&EngineConfig {
        model: model.into(),
        threads: Some(threads),
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
