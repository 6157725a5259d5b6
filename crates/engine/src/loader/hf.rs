//! Hugging Face model directories: `config.json` + `*.safetensors` (+ `tokenizer.json`).
//!
//! Weights are held as dense f32 whatever their stored type (f32, f16, bf16): the CPU path
//! has no faster dense kernel than f32 gemm, and one activation type keeps the forward pass
//! simple. GPT-2's Conv1D weights are stored (in, out) and are transposed once here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use super::parts::{Loaded, Tally, bad, dtype_name, unsupported};
use crate::error::EngineError;
use crate::model::{
    Activation, Arch, Block, Embedding, Fused, Linear, Mlp, Model, Norm, Positions, Shapes,
};

pub(super) fn load(dir: &Path, device: &Device) -> Result<Loaded, EngineError> {
    let cfg_path = dir.join("config.json");
    if !cfg_path.is_file() {
        return Err(bad(
            dir,
            "no config.json: a Hugging Face model directory holds config.json and *.safetensors",
        ));
    }
    let cfg: Value = std::fs::read_to_string(&cfg_path)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
        .map_err(|e| bad(&cfg_path, e))?;
    let model_type = cfg
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let arch = match model_type.as_str() {
        "gpt2" => Arch::Gpt2,
        "llama" => Arch::Llama,
        "" => return Err(bad(&cfg_path, "no model_type")),
        other => {
            return Err(unsupported(
                dir,
                format!("architecture `{other}` (the engine runs gpt2 and llama)"),
            ));
        }
    };

    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| bad(dir, e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(bad(dir, "no *.safetensors file"));
    }
    let mut tensors = HashMap::new();
    for f in &files {
        let t =
            candle_core::safetensors::load(f, &Device::Cpu).map_err(|e| bad(f, e.to_string()))?;
        tensors.extend(t);
    }
    let mut w = Weights {
        dir: dir.to_path_buf(),
        tensors,
        device: device.clone(),
        tally: Tally::default(),
    };
    let (model, max_model_len) = match arch {
        Arch::Gpt2 => gpt2(&cfg, &mut w)?,
        Arch::Llama => llama(&cfg, &mut w)?,
    };

    let mut eos = Vec::new();
    collect_ids(cfg.get("eos_token_id"), &mut eos);
    if let Ok(s) = std::fs::read_to_string(dir.join("generation_config.json"))
        && let Ok(g) = serde_json::from_str::<Value>(&s)
    {
        collect_ids(g.get("eos_token_id"), &mut eos);
    }
    eos.sort_unstable();
    eos.dedup();

    Ok(Loaded {
        model,
        tokenizer: super::parts::tokenizer_json(&dir.join("tokenizer.json")),
        max_model_len,
        eos_token_ids: eos,
        tally: w.tally,
        tokenizer_config: None,
    })
}

fn collect_ids(v: Option<&Value>, out: &mut Vec<u32>) {
    match v {
        Some(Value::Number(n)) => out.extend(n.as_u64().map(|n| n as u32)),
        Some(Value::Array(a)) => out.extend(a.iter().filter_map(|n| n.as_u64()).map(|n| n as u32)),
        _ => {}
    }
}

struct Weights {
    dir: PathBuf,
    tensors: HashMap<String, Tensor>,
    device: Device,
    tally: Tally,
}

impl Weights {
    fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The tensor, f32, on the CPU, with its stored type's name.
    fn get(&self, name: &str, shape: &[usize]) -> Result<(Tensor, &'static str), EngineError> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| bad(&self.dir, format!("tensor `{name}` missing")))?;
        if t.dims() != shape {
            return Err(bad(
                &self.dir,
                format!("tensor `{name}` is {:?}, config says {shape:?}", t.dims()),
            ));
        }
        Ok((t.to_dtype(DType::F32)?, dtype_name(t.dtype())))
    }

    /// A vector (norm weight, bias) on the device, counted.
    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor, EngineError> {
        let t = self.get(name, &[len])?.0.to_device(&self.device)?;
        self.tally.dense(&t);
        Ok(t)
    }

    /// A linear layer from `w` (out, in) on the CPU, counted.
    fn linear(&mut self, w: Tensor, from: &str, b: Option<Tensor>) -> Result<Linear, EngineError> {
        let w = w.contiguous()?.to_device(&self.device)?;
        let b = b.map(|b| b.to_device(&self.device)).transpose()?;
        let k = w.dim(1)?;
        let l = Linear {
            w: QMatMul::Tensor(w),
            b,
            k_held: k,
        };
        self.tally.linear(from, &l, k);
        Ok(l)
    }
}

fn usize_of(cfg: &Value, key: &str) -> Option<usize> {
    cfg.get(key).and_then(Value::as_u64).map(|v| v as usize)
}

fn need(cfg: &Value, key: &str, dir: &Path) -> Result<usize, EngineError> {
    usize_of(cfg, key).ok_or_else(|| bad(&dir.join("config.json"), format!("no `{key}`")))
}

fn gpt2(cfg: &Value, w: &mut Weights) -> Result<(Model, usize), EngineError> {
    let dir = w.dir.clone();
    let d = need(cfg, "n_embd", &dir)?;
    let n_head = need(cfg, "n_head", &dir)?;
    let n_layer = need(cfg, "n_layer", &dir)?;
    let vocab = need(cfg, "vocab_size", &dir)?;
    let max_len = usize_of(cfg, "n_positions")
        .or_else(|| usize_of(cfg, "n_ctx"))
        .ok_or_else(|| bad(&dir, "no n_positions"))?;
    let inner = usize_of(cfg, "n_inner").unwrap_or(4 * d);
    let eps = cfg
        .get("layer_norm_epsilon")
        .and_then(Value::as_f64)
        .unwrap_or(1e-5) as f32;
    let act = match cfg
        .get("activation_function")
        .and_then(Value::as_str)
        .unwrap_or("gelu_new")
    {
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
        "gelu" => Activation::GeluErf,
        other => return Err(unsupported(&dir, format!("GPT-2 activation `{other}`"))),
    };
    let flag = |k: &str| cfg.get(k).and_then(Value::as_bool);
    if flag("scale_attn_by_inverse_layer_idx") == Some(true)
        || flag("scale_attn_weights") == Some(false)
    {
        return Err(unsupported(
            &dir,
            "GPT-2 attention scaling other than 1/sqrt(head_dim)",
        ));
    }
    if n_head == 0 || !d.is_multiple_of(n_head) {
        return Err(bad(&dir, "n_embd is not a multiple of n_head"));
    }
    let p = if w.has("transformer.wte.weight") {
        "transformer."
    } else {
        ""
    };

    let (wte, wte_from) = w.get(&format!("{p}wte.weight"), &[vocab, d])?;
    let wte = wte.to_device(&w.device)?;
    let wpe = w
        .get(&format!("{p}wpe.weight"), &[max_len, d])?
        .0
        .to_device(&w.device)?;
    w.tally.dense(&wpe);
    let layer_norm = |w: &mut Weights, name: &str| -> Result<Norm, EngineError> {
        Ok(Norm::Layer {
            w: w.vector(&format!("{name}.weight"), d)?,
            b: w.vector(&format!("{name}.bias"), d)?,
            eps,
        })
    };
    // Conv1D: stored (in, out), with a bias.
    let conv =
        |w: &mut Weights, name: &str, n_in: usize, n_out: usize| -> Result<Linear, EngineError> {
            let (m, from) = w.get(&format!("{name}.weight"), &[n_in, n_out])?;
            let (b, _) = w.get(&format!("{name}.bias"), &[n_out])?;
            w.linear(m.t()?, from, Some(b))
        };
    let mut blocks = Vec::with_capacity(n_layer);
    for i in 0..n_layer {
        let h = format!("{p}h.{i}");
        blocks.push(Block {
            attn_norm: layer_norm(w, &format!("{h}.ln_1"))?,
            qkv: Fused(vec![conv(w, &format!("{h}.attn.c_attn"), d, 3 * d)?]),
            o: conv(w, &format!("{h}.attn.c_proj"), d, d)?,
            mlp_norm: layer_norm(w, &format!("{h}.ln_2"))?,
            mlp: Mlp::Plain {
                fc: conv(w, &format!("{h}.mlp.c_fc"), d, inner)?,
                proj: conv(w, &format!("{h}.mlp.c_proj"), inner, d)?,
                act,
            },
        });
    }
    let final_norm = layer_norm(w, &format!("{p}ln_f"))?;
    // The output layer is tied to wte: one tensor, counted once.
    let lm_head = Linear {
        w: QMatMul::Tensor(wte.clone()),
        b: None,
        k_held: d,
    };
    w.tally.matrix(wte_from, &lm_head.w, d);
    let model = Model {
        arch: Arch::Gpt2,
        shapes: Shapes {
            n_head,
            n_kv_head: n_head,
            head_dim: d / n_head,
            vocab,
        },
        embed: Embedding::Dense(wte),
        positions: Positions::Learned(wpe),
        blocks,
        final_norm,
        lm_head,
        device: w.device.clone(),
    };
    Ok((model, max_len))
}

fn llama(cfg: &Value, w: &mut Weights) -> Result<(Model, usize), EngineError> {
    let dir = w.dir.clone();
    let d = need(cfg, "hidden_size", &dir)?;
    let n_layer = need(cfg, "num_hidden_layers", &dir)?;
    let n_head = need(cfg, "num_attention_heads", &dir)?;
    let n_kv = usize_of(cfg, "num_key_value_heads").unwrap_or(n_head);
    let head_dim = usize_of(cfg, "head_dim").unwrap_or(d / n_head.max(1));
    let inter = need(cfg, "intermediate_size", &dir)?;
    let vocab = need(cfg, "vocab_size", &dir)?;
    let max_len = usize_of(cfg, "max_position_embeddings").unwrap_or(2048);
    let eps = cfg
        .get("rms_norm_eps")
        .and_then(Value::as_f64)
        .unwrap_or(1e-6) as f32;
    let theta = cfg
        .get("rope_theta")
        .and_then(Value::as_f64)
        .unwrap_or(10000.0);
    let act = cfg
        .get("hidden_act")
        .and_then(Value::as_str)
        .unwrap_or("silu");
    if act != "silu" {
        return Err(unsupported(&dir, format!("Llama activation `{act}`")));
    }
    if n_head == 0 || n_kv == 0 || !n_head.is_multiple_of(n_kv) || !head_dim.is_multiple_of(2) {
        return Err(bad(&dir, "inconsistent head counts"));
    }
    let mut inv_freq = super::parts::rope_inv_freq(theta, head_dim);
    if let Some(rs) = cfg.get("rope_scaling").filter(|v| !v.is_null()) {
        let kind = rs
            .get("rope_type")
            .or_else(|| rs.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let f = |k: &str| rs.get(k).and_then(Value::as_f64);
        match kind {
            "default" => {}
            "linear" => {
                let factor = f("factor").unwrap_or(1.0);
                inv_freq.iter_mut().for_each(|x| *x /= factor);
            }
            "llama3" => super::parts::llama3_scaling(
                &mut inv_freq,
                f("factor").unwrap_or(8.0),
                f("low_freq_factor").unwrap_or(1.0),
                f("high_freq_factor").unwrap_or(4.0),
                f("original_max_position_embeddings").unwrap_or(8192.0),
            ),
            other => return Err(unsupported(&dir, format!("RoPE scaling `{other}`"))),
        }
    }
    let tie = cfg
        .get("tie_word_embeddings")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || !w.has("lm_head.weight");

    let (embed, embed_from) = w.get("model.embed_tokens.weight", &[vocab, d])?;
    let embed = embed.to_device(&w.device)?;
    let rms = |w: &mut Weights, name: &str| -> Result<Norm, EngineError> {
        Ok(Norm::Rms {
            w: w.vector(name, d)?,
            eps,
        })
    };
    // Bias vectors, where the checkpoint has them (attention_bias / mlp_bias models).
    let bias = |w: &Weights, name: &str, len: usize| -> Result<Option<Tensor>, EngineError> {
        if w.has(name) {
            Ok(Some(w.get(name, &[len])?.0))
        } else {
            Ok(None)
        }
    };
    let cat_bias = |parts: Vec<Option<Tensor>>| -> Result<Option<Tensor>, EngineError> {
        if parts.iter().all(Option::is_none) {
            return Ok(None);
        }
        if !parts.iter().all(Option::is_some) {
            return Err(bad(&dir, "biases on some of q/k/v or gate/up only"));
        }
        let ts: Vec<Tensor> = parts.into_iter().flatten().collect();
        Ok(Some(Tensor::cat(&ts, 0)?))
    };
    let mut blocks = Vec::with_capacity(n_layer);
    for i in 0..n_layer {
        let p = format!("model.layers.{i}");
        let a = format!("{p}.self_attn");
        let (q, from) = w.get(&format!("{a}.q_proj.weight"), &[n_head * head_dim, d])?;
        let (k, _) = w.get(&format!("{a}.k_proj.weight"), &[n_kv * head_dim, d])?;
        let (v, _) = w.get(&format!("{a}.v_proj.weight"), &[n_kv * head_dim, d])?;
        let qkv_b = cat_bias(vec![
            bias(w, &format!("{a}.q_proj.bias"), n_head * head_dim)?,
            bias(w, &format!("{a}.k_proj.bias"), n_kv * head_dim)?,
            bias(w, &format!("{a}.v_proj.bias"), n_kv * head_dim)?,
        ])?;
        let qkv = w.linear(Tensor::cat(&[q, k, v], 0)?, from, qkv_b)?;
        let (o, from) = w.get(&format!("{a}.o_proj.weight"), &[d, n_head * head_dim])?;
        let o_b = bias(w, &format!("{a}.o_proj.bias"), d)?;
        let o = w.linear(o, from, o_b)?;
        let m = format!("{p}.mlp");
        let (g, from) = w.get(&format!("{m}.gate_proj.weight"), &[inter, d])?;
        let (u, _) = w.get(&format!("{m}.up_proj.weight"), &[inter, d])?;
        let gu_b = cat_bias(vec![
            bias(w, &format!("{m}.gate_proj.bias"), inter)?,
            bias(w, &format!("{m}.up_proj.bias"), inter)?,
        ])?;
        let gate_up = w.linear(Tensor::cat(&[g, u], 0)?, from, gu_b)?;
        let (down, from) = w.get(&format!("{m}.down_proj.weight"), &[d, inter])?;
        let down_b = bias(w, &format!("{m}.down_proj.bias"), d)?;
        let down = w.linear(down, from, down_b)?;
        blocks.push(Block {
            attn_norm: rms(w, &format!("{p}.input_layernorm.weight"))?,
            qkv: Fused(vec![qkv]),
            o,
            mlp_norm: rms(w, &format!("{p}.post_attention_layernorm.weight"))?,
            mlp: Mlp::Gated {
                gate_up: Fused(vec![gate_up]),
                down,
                inter,
            },
        });
    }
    let final_norm = rms(w, "model.norm.weight")?;
    let lm_head = if tie {
        let l = Linear {
            w: QMatMul::Tensor(embed.clone()),
            b: None,
            k_held: d,
        };
        w.tally.matrix(embed_from, &l.w, d);
        l
    } else {
        w.tally.dense(&embed);
        let (h, from) = w.get("lm_head.weight", &[vocab, d])?;
        w.linear(h, from, None)?
    };
    let (cos, sin) = super::parts::rope_tables(&inv_freq, max_len, &w.device)?;
    let model = Model {
        arch: Arch::Llama,
        shapes: Shapes {
            n_head,
            n_kv_head: n_kv,
            head_dim,
            vocab,
        },
        embed: Embedding::Dense(embed),
        positions: Positions::Rope { cos, sin },
        blocks,
        final_norm,
        lm_head,
        device: w.device.clone(),
    };
    Ok((model, max_len))
}
