//! Tokenizers: a model directory's tokenizer.json, and the ones built from GGUF vocabularies,
//! against tokenizations computed elsewhere (llama.cpp's algorithm in the reference script,
//! llama.cpp's own test vectors).

use std::path::Path;

use bench_engine::{Engine, EngineConfig};
use candle_core::quantized::gguf_file::Value;
use serde_json::Value as Json;

use crate::common::*;

fn ids(e: &Engine, text: &str) -> Vec<u32> {
    e.tokenizer().encode(text, true).unwrap().get_ids().to_vec()
}

#[test]
fn gguf_llama_vocabulary_tokenizes_like_llama2() {
    let fx: Json = serde_json::from_str(
        &std::fs::read_to_string(models().join("reference_logits.json")).unwrap(),
    )
    .unwrap();
    let gguf = load(tiny_llama_gguf());
    let hf = load(tiny_llama_hf());
    for case in fx["models"]["llama-2-tiny-random"]["tokenizer"]
        .as_array()
        .unwrap()
    {
        let text = case["text"].as_str().unwrap();
        let want: Vec<u32> = case["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(ids(&gguf, text), want, "GGUF vocabulary: {text:?}");
        assert_eq!(
            ids(&hf, text),
            want,
            "tiny-llama-hf tokenizer.json: {text:?}"
        );
        let back = gguf.tokenizer().decode(&want, true).unwrap();
        assert_eq!(back, text, "decodes back");
    }
    // The well-known ids: <s> ▁Hello ▁world
    assert_eq!(ids(&gguf, "Hello world"), vec![1, 15043, 3186]);
    assert_eq!(gguf.info().eos_token_ids, vec![2]);
}

#[test]
fn gpt2_directory_tokenizer() {
    let e = load(fake_gpt2());
    assert_eq!(
        ids(
            &e,
            "Hello world! The quick brown fox jumps over the lazy dog."
        ),
        vec![
            15496, 995, 0, 383, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13
        ]
    );
    assert_eq!(e.info().eos_token_ids, vec![50256]);
}

/// A GGUF file holding only a tokenizer.json's vocabulary the way llama.cpp's converter
/// stores it, as `gpt2` (byte-level BPE) with pre-tokenizer `pre`, plus a minimal model so
/// that the engine loads it.
fn gguf_from_tokenizer_json(tokenizer: &Path, pre: &str, out: &Path) {
    let tj: Json = serde_json::from_str(&std::fs::read_to_string(tokenizer).unwrap()).unwrap();
    let mut tokens: Vec<(u64, String, i32)> = tj["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, id)| (id.as_u64().unwrap(), t.clone(), 1))
        .collect();
    for a in tj["added_tokens"].as_array().unwrap() {
        let id = a["id"].as_u64().unwrap();
        if !tokens.iter().any(|t| t.0 == id) {
            tokens.push((id, a["content"].as_str().unwrap().to_string(), 3));
        }
    }
    tokens.sort();
    let merges: Vec<Value> = tj["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            Json::String(s) => Value::String(s.clone()),
            Json::Array(p) => Value::String(format!(
                "{} {}",
                p[0].as_str().unwrap(),
                p[1].as_str().unwrap()
            )),
            _ => panic!("merge {m}"),
        })
        .collect();
    let md = vec![
        ("general.architecture".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String(pre.into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.iter().map(|t| Value::String(t.1.clone())).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(tokens.iter().map(|t| Value::I32(t.2)).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(merges)),
    ];
    write_gguf(out, &md, &[]);
}

/// llama.cpp's tokenizer test vectors (`ggml-vocab-*.gguf.inp` / `.out`).
fn vocab_tests(name: &str) -> Vec<(String, Vec<u32>)> {
    let dir = models().join("../tokenizers/llama.cpp-vocab-tests");
    let inp = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.inp"))).unwrap();
    let out = std::fs::read_to_string(dir.join(format!("ggml-vocab-{name}.gguf.out"))).unwrap();
    let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let ids: Vec<Vec<u32>> = out
        .split('\n')
        .take(texts.len())
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect();
    texts.iter().map(|t| t.to_string()).zip(ids).collect()
}

fn check_vocab_tests(tokenizer_json: &Path, pre: &str, vectors: &str) {
    let dir = Scratch::new(&format!("vocab-{pre}"));
    let gguf = dir.0.join("vocab.gguf");
    gguf_from_tokenizer_json(tokenizer_json, pre, &gguf);
    // The vocabulary-only GGUF serves as --tokenizer for a real model.
    let e = Engine::load(&EngineConfig {
        model: fake_gpt2(),
        tokenizer: Some(gguf),
        ..EngineConfig::default()
    })
    .unwrap();
    let cases = vocab_tests(vectors);
    assert!(cases.len() > 40);
    for (text, want) in cases {
        let got = e
            .tokenizer()
            .encode(text.as_str(), false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(got, want, "{pre}: {text:?}");
    }
}

#[test]
fn gguf_gpt2_vocabulary_passes_llama_cpp_vectors() {
    check_vocab_tests(
        &models().join("../tokenizers/gpt2/tokenizer.json"),
        "gpt-2",
        "gpt-2",
    );
}

#[test]
fn gguf_qwen2_vocabulary_passes_llama_cpp_vectors() {
    check_vocab_tests(
        &models().join("../tokenizers/qwen3/tokenizer.json"),
        "qwen2",
        "qwen2",
    );
}

/// A GGUF file's tokenizer settings come out shaped like tokenizer_config.json: the tiny
/// model's BOS/EOS strings (it has no chat template or add_bos_token), then a copy of it with
/// both added; a model directory has none (its own file is on disk).
#[test]
fn gguf_tokenizer_config() {
    let e = load(tiny_llama_gguf());
    assert_eq!(
        e.tokenizer_config(),
        Some(serde_json::json!({"bos_token": "<s>", "eos_token": "</s>"}))
    );
    assert_eq!(load(tiny_llama_hf()).tokenizer_config(), None);

    let mut file = std::fs::File::open(tiny_llama_gguf()).unwrap();
    let content = candle_core::quantized::gguf_file::Content::read(&mut file).unwrap();
    let template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}";
    let mut md: Vec<(String, Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.push((
        "tokenizer.chat_template".into(),
        Value::String(template.into()),
    ));
    md.push(("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)));
    let tensors: Vec<(String, candle_core::quantized::QTensor)> = content
        .tensor_infos
        .keys()
        .map(|name| {
            let t = content
                .tensor(&mut file, name, &candle_core::Device::Cpu)
                .unwrap();
            (name.clone(), t)
        })
        .collect();
    let dir = Scratch::new("tokenizer-config");
    let path = dir.0.join("with-template.gguf");
    write_gguf(&path, &md, &tensors);
    let e = load(path);
    assert_eq!(
        e.tokenizer_config(),
        Some(serde_json::json!({
            "chat_template": template,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "add_bos_token": false,
        }))
    );
    // And the tokenizer follows the same flag.
    assert_eq!(ids(&e, "Hello world"), vec![15043, 3186]);
}
