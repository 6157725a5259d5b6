//! Load errors say what is wrong, typed.

use std::path::PathBuf;

use bench_engine::{Device, Engine, EngineConfig, EngineError};
use candle_core::quantized::gguf_file::Value;

use crate::common::*;

fn load_err(config: EngineConfig) -> EngineError {
    match Engine::load(&config) {
        Ok(_) => panic!("{:?} loaded", config.model),
        Err(e) => e,
    }
}

fn at(model: PathBuf) -> EngineConfig {
    EngineConfig {
        model,
        ..EngineConfig::default()
    }
}

#[test]
fn a_missing_path_or_a_hub_id_is_not_found() {
    for p in [
        "/nonexistent/model-dir",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    ] {
        let e = load_err(at(p.into()));
        assert!(matches!(e, EngineError::NotFound { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{p}: not found on disk; pass a local directory or .gguf file")
        );
    }
    let e = load_err(EngineConfig {
        tokenizer: Some("/nonexistent/tokenizer.json".into()),
        ..at(fake_gpt2())
    });
    assert!(matches!(e, EngineError::NotFound { .. }), "{e:?}");
}

#[test]
fn an_unknown_architecture_is_unsupported() {
    let dir = Scratch::new("bert");
    std::fs::write(dir.0.join("config.json"), r#"{"model_type": "bert"}"#).unwrap();
    let e = load_err(at(dir.0.clone()));
    assert!(matches!(e, EngineError::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("architecture `bert`"), "{e}");

    let gguf = dir.0.join("falcon.gguf");
    write_gguf(
        &gguf,
        &[(
            "general.architecture".into(),
            Value::String("falcon".into()),
        )],
        &[],
    );
    let e = load_err(at(gguf));
    assert!(matches!(e, EngineError::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("architecture `falcon`"), "{e}");
}

#[test]
fn broken_models_are_bad_models() {
    let dir = Scratch::new("broken");
    // Not a model at all.
    let file = dir.0.join("notes.txt");
    std::fs::write(&file, "hello").unwrap();
    assert!(matches!(load_err(at(file)), EngineError::BadModel { .. }));
    // A directory without config.json.
    assert!(matches!(
        load_err(at(dir.0.clone())),
        EngineError::BadModel { .. }
    ));
    // A tensor missing.
    let sub = dir.0.join("gpt2");
    std::fs::create_dir(&sub).unwrap();
    copy_dir(&fake_gpt2(), &sub, &["model.safetensors"]);
    let weights = candle_core::safetensors::load(
        fake_gpt2().join("model.safetensors"),
        &candle_core::Device::Cpu,
    )
    .unwrap();
    let mut fewer = weights.clone();
    fewer.remove("transformer.h.0.mlp.c_fc.weight");
    candle_core::safetensors::save(&fewer, sub.join("model.safetensors")).unwrap();
    let e = load_err(at(sub.clone()));
    assert!(matches!(e, EngineError::BadModel { .. }), "{e:?}");
    assert!(e.to_string().contains("h.0.mlp.c_fc.weight"), "{e}");
    // Shapes that disagree with config.json.
    let cfg = std::fs::read_to_string(fake_gpt2().join("config.json")).unwrap();
    std::fs::write(
        sub.join("config.json"),
        cfg.replace("\"n_embd\": 2", "\"n_embd\": 4"),
    )
    .unwrap();
    candle_core::safetensors::save(&weights, sub.join("model.safetensors")).unwrap();
    assert!(matches!(load_err(at(sub)), EngineError::BadModel { .. }));
}

#[test]
fn a_directory_without_tokenizer_needs_one_named() {
    let dir = Scratch::new("no-tokenizer");
    copy_dir(&fake_gpt2(), &dir.0, &["tokenizer.json"]);
    let e = load_err(at(dir.0.clone()));
    assert!(matches!(e, EngineError::Tokenizer { .. }), "{e:?}");
    assert!(e.to_string().contains("--tokenizer"), "{e}");
    // --tokenizer as a directory, a file, or a GGUF file's vocabulary.
    for t in [
        fake_gpt2(),
        fake_gpt2().join("tokenizer.json"),
        tiny_llama_gguf(),
    ] {
        let e = Engine::load(&EngineConfig {
            tokenizer: Some(t.clone()),
            ..at(dir.0.clone())
        })
        .unwrap_or_else(|e| panic!("{t:?}: {e}"));
        assert!(e.tokenizer().get_vocab_size(true) > 1000);
    }
}

#[test]
#[cfg(not(feature = "cuda"))]
fn cuda_without_the_feature_says_how_to_get_it() {
    let e = load_err(EngineConfig {
        device: Device::Cuda(0),
        ..at(fake_gpt2())
    });
    assert!(matches!(e, EngineError::CudaNotBuilt), "{e:?}");
    assert!(e.to_string().contains("--features cuda"), "{e}");
}

#[test]
fn impossible_configurations_are_refused() {
    for c in [
        EngineConfig {
            max_num_seqs: 0,
            ..at(fake_gpt2())
        },
        EngineConfig {
            max_num_batched_tokens: 0,
            ..at(fake_gpt2())
        },
        EngineConfig {
            max_model_len: Some(4096),
            ..at(fake_gpt2())
        },
        EngineConfig {
            max_num_seqs: 300,
            max_num_batched_tokens: 256,
            ..at(fake_gpt2())
        },
        EngineConfig {
            threads: Some(0),
            ..at(fake_gpt2())
        },
    ] {
        assert!(matches!(load_err(c), EngineError::Config(_)));
    }
}

#[test]
fn device_strings() {
    assert_eq!("cpu".parse::<Device>(), Ok(Device::Cpu));
    assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda(0)));
    assert_eq!("CUDA:3".parse::<Device>(), Ok(Device::Cuda(3)));
    assert!("cuda:x".parse::<Device>().is_err());
    assert!("tpu".parse::<Device>().is_err());
    assert_eq!(Device::Cuda(1).to_string(), "cuda:1");
    assert_eq!(Device::Cpu.to_string(), "cpu");
}
