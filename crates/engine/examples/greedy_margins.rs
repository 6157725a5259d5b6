//! Greedy tokens of a real model in both weight modes ([`EngineConfig::requantize`] on and
//! off), against llama.cpp's for the same prompts, with the logit margins that say whether a
//! difference is a near-tie: a diagnostic for when the engine and llama.cpp part, not a
//! check (`scripts/real-server.sh` check g asserts the agreement).
//!
//!     BENCH_ENGINE_SMOLLM2=~/.cache/bench-real-server/model/SmolLM2-135M-Instruct.Q4_1.gguf \
//!       cargo run --release -p bench-engine --example greedy_margins
//!
//! Prompts are raw text through the GGUF's own tokenizer, 32 tokens, EOS ignored, as check g.
//! `BENCH_ENGINE_LLAMA_TOKENS` (optional): a JSON array of `{"prompt": ..., "tokens": [...]}`,
//! llama-server's `/completion` tokens (`"temperature": 0, "ignore_eos": true,
//! "return_tokens": true`); without it, the prompts of check g and no comparison. Prints, per
//! prompt and mode, how many tokens agree, and at the first difference the engine's logit of
//! its own choice minus its logit of llama.cpp's token; the smallest top-2 margin along the
//! engine's own 32 steps; and the same greedy run without the KV cache (a whole-sequence pass
//! per token), which changes nothing but the order of float sums in attention, so where it
//! parts from the cached run measures how sensitive greedy decoding of the model is.
//! `BENCH_ENGINE_THREADS` (default 2) sets the threads.

use std::time::Instant;

use bench_engine::{Engine, EngineConfig, Events, FinishReason, GenRequest, Sampling};

/// The tokens each request sampled, in order.
#[derive(Default)]
struct Tokens(Vec<(usize, u32)>);

impl Tokens {
    fn of(&self, i: usize) -> Vec<u32> {
        self.0.iter().filter(|t| t.0 == i).map(|t| t.1).collect()
    }
}

impl Events for Tokens {
    fn token(&mut self, index: usize, token: u32, _: Instant) {
        self.0.push((index, token));
    }
    fn finished(&mut self, _: usize, _: FinishReason, _: Instant) {}
}

fn main() {
    let Some(model) = std::env::var_os("BENCH_ENGINE_SMOLLM2") else {
        eprintln!("set BENCH_ENGINE_SMOLLM2 to SmolLM2-135M-Instruct.Q4_1.gguf");
        std::process::exit(2);
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
        println!("requantize={requantize}: weights {}", engine.info().weights);
        let tok = engine.tokenizer().clone();
        for (prompt, want) in &reference {
            let ids = tok
                .encode(prompt.as_str(), true)
                .unwrap()
                .get_ids()
                .to_vec();
            let mut rec = Tokens::default();
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
            println!("  {prompt:?} (prompt ids {ids:?})");
            println!("    engine:    {got:?}");
            println!(
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
            println!("    no cache:  {uncached:?} ({same_path} as the cached run)");
            let Some(want) = want else { continue };
            println!("    llama.cpp: {want:?}");
            let same_uncached = uncached
                .iter()
                .zip(want)
                .take_while(|(a, b)| a == b)
                .count();
            println!(
                "    without the cache, {same_uncached}/{} agree",
                want.len()
            );
            let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
            if same >= want.len().min(got.len()) {
                println!("    {same}/{} agree", want.len());
                continue;
            }
            let row = step(same);
            let (a, b) = top2(row);
            println!(
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
