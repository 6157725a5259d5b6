//! The engine's logits against `scripts/engine_reference.py`'s, computed independently in
//! float64 numpy (tests/data/models/reference_logits.json): within 1e-4 at every position.

use serde_json::Value;

use crate::common::*;

const TOLERANCE: f64 = 1e-4;

fn fixture() -> Value {
    let path = models().join("reference_logits.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json")
}

/// Largest difference between the engine's logits and the reference's, over the probed
/// vocabulary ids and the log-sum-exp of every row (which covers the rest of the row).
fn max_diff(engine: &mut bench_engine::Engine, model: &str) -> f64 {
    let fx = fixture();
    let m = &fx["models"][model];
    let probe: Vec<usize> = m["probe_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let mut worst = 0f64;
    for seq in m["sequences"].as_array().unwrap() {
        let tokens: Vec<u32> = seq["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let logits = engine.logits(&tokens).expect("logits");
        assert_eq!(logits.len(), tokens.len());
        for (p, row) in logits.iter().enumerate() {
            let want = seq["values"][p].as_array().unwrap();
            for (j, &id) in probe.iter().enumerate() {
                let d = (row[id] as f64 - want[j].as_f64().unwrap()).abs();
                worst = worst.max(d);
            }
            let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let lse = max
                + row
                    .iter()
                    .map(|&x| (x as f64 - max).exp())
                    .sum::<f64>()
                    .ln();
            worst = worst.max((lse - seq["logsumexp"][p].as_f64().unwrap()).abs());
            // The reference's argmax is (within tolerance) the engine's maximum too.
            let arg = seq["argmax"][p].as_u64().unwrap() as usize;
            assert!(
                (row[arg] as f64 - max).abs() <= TOLERANCE,
                "{model} position {p}: argmax"
            );
        }
    }
    worst
}

#[test]
fn gpt2_safetensors_logits_match_numpy_reference() {
    let mut e = load(fake_gpt2());
    let d = max_diff(&mut e, "fake-gpt2");
    eprintln!("fake-gpt2: max |logit - reference| = {d:e}");
    assert!(d <= TOLERANCE, "{d}");
}

#[test]
fn llama_gguf_logits_match_numpy_reference() {
    let mut e = load(tiny_llama_gguf());
    let d = max_diff(&mut e, "llama-2-tiny-random");
    eprintln!("llama-2-tiny-random (GGUF): max |logit - reference| = {d:e}");
    assert!(d <= TOLERANCE, "{d}");
}

#[test]
fn llama_hf_logits_match_numpy_reference_and_the_gguf_load() {
    let mut hf = load(tiny_llama_hf());
    let d = max_diff(&mut hf, "llama-2-tiny-random");
    eprintln!("tiny-llama-hf (safetensors): max |logit - reference| = {d:e}");
    assert!(d <= TOLERANCE, "{d}");
    // The same weights through both loaders (llama.cpp's permuted Q/K rows with its
    // interleaved RoPE, against HF's layout with half-split RoPE) give the same logits.
    let mut gguf = load(tiny_llama_gguf());
    let tokens: Vec<u32> = (0..60).map(|i| (i * 7919 + 5) % 32000).collect();
    let a = hf.logits(&tokens).unwrap();
    let b = gguf.logits(&tokens).unwrap();
    let worst = a
        .iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    eprintln!("tiny llama, HF vs GGUF load: max diff {worst:e}");
    assert!(worst <= 1e-5, "{worst}");
}
