//! GGUF paths beyond the F16 tiny model: quantized weights (Q8_0, and Q4_1, which the
//! engine converts to Q8_0 on the CPU), grouped-query attention, and GPT-2 in GGUF, each
//! against the same weights loaded another way.

use std::path::Path;

use bench_engine::Engine;
use candle_core::quantized::gguf_file::Value;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

use crate::common::*;

const D: usize = 64;
const HEADS: usize = 4;
const HEAD_DIM: usize = D / HEADS;
const FF: usize = 128;
const LAYERS: usize = 2;
/// <unk>, <s>, </s> and the 256 byte tokens: a SentencePiece vocabulary with byte fallback
/// only.
const VOCAB: usize = 259;

/// Random Llama weights, GGUF names, as (name, rows, cols) f32 values; `kv_heads` KV heads,
/// each KV head's rows repeated `dup` times (dup > 1 writes an equivalent model without
/// grouped-query attention).
fn llama_weights(kv_heads: usize, dup: usize) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let mut rng = Rng(7);
    let mut w = vec![(
        "token_embd.weight".to_string(),
        vec![VOCAB, D],
        rng.vec(VOCAB * D, 0.5),
    )];
    for l in 0..LAYERS {
        let b = format!("blk.{l}");
        let mut m = |name: &str, rows: usize, cols: usize, std: f32| {
            (
                format!("{b}.{name}"),
                vec![rows, cols],
                rng.vec(rows * cols, std),
            )
        };
        let q = m("attn_q.weight", HEADS * HEAD_DIM, D, 0.2);
        let k = m("attn_k.weight", kv_heads * HEAD_DIM, D, 0.2);
        let v = m("attn_v.weight", kv_heads * HEAD_DIM, D, 0.2);
        let o = m("attn_output.weight", D, HEADS * HEAD_DIM, 0.1);
        let gate = m("ffn_gate.weight", FF, D, 0.1);
        let up = m("ffn_up.weight", FF, D, 0.1);
        let down = m("ffn_down.weight", D, FF, 0.1);
        let repeat = |(name, shape, data): (String, Vec<usize>, Vec<f32>)| {
            let head = HEAD_DIM * D;
            let mut out = Vec::with_capacity(data.len() * dup);
            for h in data.chunks(head) {
                for _ in 0..dup {
                    out.extend_from_slice(h);
                }
            }
            (name, vec![shape[0] * dup, shape[1]], out)
        };
        w.extend([q, repeat(k), repeat(v), o, gate, up, down]);
        for norm in ["attn_norm.weight", "ffn_norm.weight"] {
            let g: Vec<f32> = (0..D).map(|_| 1.0 + rng.normal(0.1)).collect();
            w.push((format!("{b}.{norm}"), vec![D], g));
        }
    }
    w.push(("output_norm.weight".into(), vec![D], vec![1.0; D]));
    w
}

/// Writes the weights as a GGUF llama, matrices in `dtype` (norms stay F32); the output
/// layer is tied to the token table.
fn write_llama(
    path: &Path,
    weights: &[(String, Vec<usize>, Vec<f32>)],
    kv_heads: usize,
    dtype: GgmlDType,
) {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let mut types = vec![2, 3, 3];
    types.extend([6; 256]);
    let u = |v: usize| Value::U32(v as u32);
    let md = vec![
        ("general.architecture".into(), Value::String("llama".into())),
        ("llama.context_length".into(), u(256)),
        ("llama.embedding_length".into(), u(D)),
        ("llama.block_count".into(), u(LAYERS)),
        ("llama.feed_forward_length".into(), u(FF)),
        ("llama.attention.head_count".into(), u(HEADS)),
        ("llama.attention.head_count_kv".into(), u(kv_heads)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Value::F32(1e-5),
        ),
        ("llama.rope.freq_base".into(), Value::F32(10000.0)),
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(vec![Value::F32(0.0); VOCAB]),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".into(), u(1)),
        ("tokenizer.ggml.eos_token_id".into(), u(2)),
        ("tokenizer.ggml.unknown_token_id".into(), u(0)),
    ];
    let tensors: Vec<(String, QTensor)> = weights
        .iter()
        .map(|(name, shape, data)| {
            let t = Tensor::from_slice(data, shape.as_slice(), &Device::Cpu).unwrap();
            let dt = if shape.len() == 1 {
                GgmlDType::F32
            } else {
                dtype
            };
            (name.clone(), QTensor::quantize(&t, dt).unwrap())
        })
        .collect();
    write_gguf(path, &md, &tensors);
}

fn tokens() -> Vec<u32> {
    (0..40u32).map(|i| (i * 37 + 5) % VOCAB as u32).collect()
}

/// sqrt(mean((a - b)^2)) / sqrt(mean(b^2)) over all logits.
fn rel_rms(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (x, y) in a.iter().flatten().zip(b.iter().flatten()) {
        num += ((x - y) as f64).powi(2);
        den += (*y as f64).powi(2);
    }
    (num / den).sqrt()
}

fn max_abs_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn quantized_weights_stay_close_to_f32() {
    let dir = Scratch::new("quantized");
    let w = llama_weights(2, 1);
    let path = |n: &str| dir.0.join(format!("{n}.gguf"));
    write_llama(&path("f32"), &w, 2, GgmlDType::F32);
    write_llama(&path("q8_0"), &w, 2, GgmlDType::Q8_0);
    write_llama(&path("q4_1"), &w, 2, GgmlDType::Q4_1);
    // The Q4_1 weights' own values, in f32: what the Q4_1 file means exactly.
    let deq: Vec<_> = w
        .iter()
        .map(|(n, s, d)| {
            if s.len() == 1 {
                return (n.clone(), s.clone(), d.clone());
            }
            let t = Tensor::from_slice(d, s.as_slice(), &Device::Cpu).unwrap();
            let q = QTensor::quantize(&t, GgmlDType::Q4_1).unwrap();
            let back = q.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
            (n.clone(), s.clone(), back.to_vec1().unwrap())
        })
        .collect();
    write_llama(&path("q4_1-dequantized"), &deq, 2, GgmlDType::F32);

    let mut logits = std::collections::HashMap::new();
    let mut infos = std::collections::HashMap::new();
    for name in ["f32", "q8_0", "q4_1", "q4_1-dequantized"] {
        let mut e: Engine = load(path(name));
        logits.insert(name, e.logits(&tokens()).unwrap());
        infos.insert(name, e.info().clone());
    }
    assert_eq!(infos["f32"].weights, "F32");
    assert_eq!(infos["q8_0"].weights, "Q8_0");
    assert_eq!(
        infos["q4_1"].weights, "Q4_1 as Q8_0",
        "the conversion is visible"
    );
    let params = infos["f32"].parameters;
    let per_layer = 2 * D * D + 2 * (2 * HEAD_DIM) * D + 3 * FF * D + 2 * D;
    assert_eq!(params as usize, VOCAB * D + LAYERS * per_layer + D);
    assert!(infos.values().all(|i| i.parameters == params));
    assert!(infos["q8_0"].weight_bytes < infos["f32"].weight_bytes / 3);
    assert_eq!(infos["q4_1"].weight_bytes, infos["q8_0"].weight_bytes);

    let q8 = rel_rms(&logits["q8_0"], &logits["f32"]);
    let q41 = rel_rms(&logits["q4_1"], &logits["f32"]);
    let conv = rel_rms(&logits["q4_1"], &logits["q4_1-dequantized"]);
    eprintln!(
        "relative RMS logit error: Q8_0 {q8:.2e}, Q4_1 {q41:.2e}; Q4_1-as-Q8_0 against Q4_1's exact values {conv:.2e}"
    );
    // One Q8_0 matmul of random data is ~0.7% off (weights and activations both quantized),
    // one Q4_1 matmul ~8%; two random layers and the output layer compound that.
    assert!(q8 < 0.06, "Q8_0: {q8}");
    assert!(q41 < 0.6, "Q4_1: {q41}");
    // Converting Q4_1 to Q8_0 costs far less than Q4_1 itself did.
    assert!(conv < 0.06 && conv < q41 / 4.0, "Q4_1 as Q8_0: {conv}");
}

#[test]
fn grouped_query_attention_equals_repeated_kv_heads() {
    let dir = Scratch::new("gqa");
    let gqa = dir.0.join("gqa.gguf");
    let mha = dir.0.join("mha.gguf");
    write_llama(&gqa, &llama_weights(2, 1), 2, GgmlDType::F32);
    write_llama(&mha, &llama_weights(2, 2), 4, GgmlDType::F32);
    let a = load(gqa).logits(&tokens()).unwrap();
    let b = load(mha).logits(&tokens()).unwrap();
    let d = max_abs_diff(&a, &b);
    assert!(d < 1e-5, "{d}");
    // And in generation, where each sequence attends to its own cache.
    let mut e = load(dir.0.join("gqa.gguf"));
    let rec = {
        let mut rec = Recorder::default();
        e.generate(&[greedy(tokens(), 8), greedy(vec![1, 2, 3], 8)], &mut rec)
            .unwrap();
        rec
    };
    let mut m = load(dir.0.join("mha.gguf"));
    let mut rec2 = Recorder::default();
    m.generate(&[greedy(tokens(), 8), greedy(vec![1, 2, 3], 8)], &mut rec2)
        .unwrap();
    assert_eq!(rec.of(0), rec2.of(0));
    assert_eq!(rec.of(1), rec2.of(1));
}

#[test]
fn gpt2_gguf_equals_the_safetensors_load() {
    let st = candle_core::safetensors::load(fake_gpt2().join("model.safetensors"), &Device::Cpu)
        .unwrap();
    let t = |n: &str| st[&format!("transformer.{n}")].clone();
    // GGUF stores GPT-2's Conv1D matrices as (out, in).
    let q = |t: Tensor| QTensor::quantize(&t.contiguous().unwrap(), GgmlDType::F32).unwrap();
    let mut tensors = vec![
        ("token_embd.weight".to_string(), q(t("wte.weight"))),
        ("position_embd.weight".into(), q(t("wpe.weight"))),
        ("output_norm.weight".into(), q(t("ln_f.weight"))),
        ("output_norm.bias".into(), q(t("ln_f.bias"))),
    ];
    for (gguf, hf, transpose) in [
        ("attn_norm", "ln_1", false),
        ("attn_qkv", "attn.c_attn", true),
        ("attn_output", "attn.c_proj", true),
        ("ffn_norm", "ln_2", false),
        ("ffn_up", "mlp.c_fc", true),
        ("ffn_down", "mlp.c_proj", true),
    ] {
        let w = t(&format!("h.0.{hf}.weight"));
        let w = if transpose { w.t().unwrap() } else { w };
        tensors.push((format!("blk.0.{gguf}.weight"), q(w)));
        tensors.push((
            format!("blk.0.{gguf}.bias"),
            q(t(&format!("h.0.{hf}.bias"))),
        ));
    }
    let u = |v: u32| Value::U32(v);
    let md = vec![
        ("general.architecture".into(), Value::String("gpt2".into())),
        ("gpt2.context_length".into(), u(1024)),
        ("gpt2.embedding_length".into(), u(2)),
        ("gpt2.feed_forward_length".into(), u(8)),
        ("gpt2.block_count".into(), u(1)),
        ("gpt2.attention.head_count".into(), u(1)),
        ("gpt2.attention.layer_norm_epsilon".into(), Value::F32(1e-5)),
    ];
    let dir = Scratch::new("gpt2-gguf");
    let path = dir.0.join("fake-gpt2.gguf");
    write_gguf(&path, &md, &tensors);
    let mut g = Engine::load(&bench_engine::EngineConfig {
        model: path,
        tokenizer: Some(fake_gpt2()),
        ..Default::default()
    })
    .unwrap();
    let mut h = load(fake_gpt2());
    let seq: Vec<u32> = (0..30u32).map(|i| (i * 7919) % 50257).collect();
    let d = max_abs_diff(&g.logits(&seq).unwrap(), &h.logits(&seq).unwrap());
    assert!(d < 1e-6, "{d}");
    assert_eq!(g.info().architecture, "gpt2");
    assert_eq!(g.info().parameters, h.info().parameters);
}

/// With `requantize` off, Q4_1 weights are held as stored (the bytes say so, and `weights`),
/// and the logits are those of Q4_1's exact values up to activation quantization, close to
/// what the Q8_0 conversion gives.
#[test]
fn requantize_off_keeps_the_stored_types() {
    let dir = Scratch::new("requantize");
    let w = llama_weights(2, 1);
    let q41 = dir.0.join("q4_1.gguf");
    write_llama(&q41, &w, 2, GgmlDType::Q4_1);
    let load_as = |requantize| {
        Engine::load(&bench_engine::EngineConfig {
            model: q41.clone(),
            requantize,
            ..Default::default()
        })
        .unwrap()
    };
    let (mut on, mut off) = (load_as(true), load_as(false));
    assert_eq!(on.info().weights, "Q4_1 as Q8_0");
    assert_eq!(off.info().weights, "Q4_1");
    assert_eq!(on.info().parameters, off.info().parameters);
    // Q4_1 holds 32 weights in 20 bytes, Q8_0 in 34 (norms are f32 in both).
    let norms = (2 * LAYERS * D + D) as u64 * 4;
    let blocks = (off.info().parameters - (2 * LAYERS * D + D) as u64) / 32;
    assert_eq!(off.info().weight_bytes, blocks * 20 + norms);
    assert_eq!(on.info().weight_bytes, blocks * 34 + norms);

    let a = on.logits(&tokens()).unwrap();
    let b = off.logits(&tokens()).unwrap();
    let d = rel_rms(&a, &b);
    eprintln!("relative RMS logit difference, Q4_1 as Q8_0 against Q4_1 as stored: {d:.2e}");
    assert!(d > 0.0 && d < 0.06, "{d}");
    // Generation runs on the stored types too.
    let mut rec = Recorder::default();
    off.generate(&[greedy(tokens(), 4)], &mut rec).unwrap();
    assert_eq!(rec.of(0).len(), 4);
}
