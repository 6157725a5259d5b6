//! GGUF files (llama.cpp's format): Llama and GPT-2 architectures, any tensor type candle
//! reads.
//!
//! Three load-time transformations, so that the forward pass is the same as for a Hugging
//! Face directory:
//!
//! - **Q/K rows un-permuted.** llama.cpp's converter permutes the rows of `attn_q` and
//!   `attn_k` within each head so that its interleaved RoPE (rotating adjacent pairs) equals
//!   transformers' half-split RoPE on the original weights. The engine uses the half-split
//!   form for both formats, so it undoes the permutation. Rows are independent in every
//!   GGML type (blocks run along a row), so this moves bytes and is lossless.
//! - **Slow quantized types converted to Q8_0 on the CPU.** candle 0.11's CPU dot products for
//!   Q4_1, Q5_0 and Q5_1 are the generic scalar code, while Q8_0 has AVX2 and NEON paths and,
//!   with AVX512-VNNI or AVX-VNNI, a repacked kernel. Such weights are dequantized and
//!   requantized to Q8_0 at load. The trade-off: Q8_0 holds a 32-value block in 34 bytes
//!   against Q4_1's 20, so ~1.7x the weight bytes per decode step; but on the 2-core AVX512
//!   machine this was measured on, a (3072 x 576) matmul ran at 3.3 G multiply-adds/s with
//!   Q4_1's scalar kernel against 17 with Q8_0's AVX2 one (and 72 at one row, 166 at 16 rows,
//!   with the repacked kernel, below). The values move by at most half a Q8_0 step (1/254 of
//!   the block's largest magnitude), against Q4_1's own step of 1/15 of the block's range.
//!   [`crate::ModelInfo::weights`] says so ("Q4_1 as Q8_0"). On CUDA, candle has kernels for
//!   these types, and they are kept. [`crate::EngineConfig::requantize`] off skips this and
//!   the padding below, for llama.cpp's numerics at candle's scalar speed.
//! - **Q8_0 rows padded for the repacked kernel.** candle takes its repacked x86 kernel for
//!   Q8_0 only when a row holds a multiple of 256 values; SmolLM2's 576-wide rows miss it and
//!   fall back to the AVX2 kernel, 4-7x slower. Where the CPU has VNNI, rows are padded with
//!   zero blocks to the next multiple of 256 (and the activations with zero columns), when
//!   that adds at most half again: 576 -> 768 reads a third more bytes and does a third
//!   more work, for the faster kernel. [`crate::ModelInfo::weight_bytes`] counts the padded
//!   size (what a step reads); `parameters` does not count the padding.
//! - **Matrices fused.** Q, K and V become one matrix, as do the gate and up projections,
//!   when they share a type (rows of the same type concatenate), so one matmul serves each
//!   group; mixed types (e.g. Q4_K_M's Q6_K `attn_v`) stay separate.

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::quantized::{GgmlDType, QMatMul, QStorage, QTensor};
use candle_core::{DType, Device, Tensor};
use tokenizers::Tokenizer;

use super::metadata::{md_str, md_u32, value_u64};
use super::parts::{Loaded, Tally, bad, ggml_name, unsupported};
use crate::error::EngineError;
use crate::model::{Arch, Block, Embedding, Linear, Mlp, Model, Norm, Positions, Shapes};

pub(super) fn load(path: &Path, device: &Device, requantize: bool) -> Result<Loaded, EngineError> {
    let mut file = File::open(path).map_err(|e| bad(path, e.to_string()))?;
    let content = Content::read(&mut file).map_err(|e| bad(path, e.to_string()))?;
    let arch_name = md_str(&content, "general.architecture").unwrap_or_default();
    let arch = match arch_name.as_str() {
        "llama" => Arch::Llama,
        "gpt2" => Arch::Gpt2,
        "" => return Err(bad(path, "no general.architecture")),
        other => {
            return Err(unsupported(
                path,
                format!("architecture `{other}` (the engine runs gpt2 and llama)"),
            ));
        }
    };
    let mut g = Gguf {
        path,
        content: &content,
        file,
        device: device.clone(),
        requantize: requantize && device.is_cpu(),
        // Padding is lossless, but it is a conversion too: off with `requantize`, so that
        // every tensor is held as stored.
        pad_q8_0: requantize && device.is_cpu() && vnni(),
        tally: Tally::default(),
        arch: arch_name.clone(),
    };
    let (model, max_len) = match arch {
        Arch::Llama => llama(&mut g)?,
        Arch::Gpt2 => gpt2(&mut g)?,
    };
    let mut eos: Vec<u32> = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"]
        .iter()
        .filter_map(|k| md_u32(&content, k))
        .collect();
    eos.sort_unstable();
    eos.dedup();
    let tokenizer =
        crate::gguf_tokenizer::from_gguf(&content).map_err(|reason| EngineError::Tokenizer {
            path: path.to_path_buf(),
            reason,
        });
    Ok(Loaded {
        model,
        tokenizer,
        max_model_len: max_len,
        eos_token_ids: eos,
        tally: g.tally,
        tokenizer_config: Some(tokenizer_config(&content)),
    })
}

/// The file's tokenizer settings as the keys of Hugging Face's `tokenizer_config.json`, for
/// [`crate::Engine::tokenizer_config`]: those the file has, and no others.
fn tokenizer_config(c: &Content) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if let Some(t) = md_str(c, "tokenizer.chat_template") {
        out.insert("chat_template".into(), t.into());
    }
    let tokens = c
        .metadata
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.to_vec().ok());
    for (key, id) in [
        ("bos_token", "tokenizer.ggml.bos_token_id"),
        ("eos_token", "tokenizer.ggml.eos_token_id"),
    ] {
        let token = md_u32(c, id)
            .and_then(|id| tokens?.get(id as usize))
            .and_then(|t| t.to_string().ok());
        if let Some(t) = token {
            out.insert(key.into(), t.clone().into());
        }
    }
    for (key, md) in [
        ("add_bos_token", "tokenizer.ggml.add_bos_token"),
        ("add_eos_token", "tokenizer.ggml.add_eos_token"),
    ] {
        if let Some(Value::Bool(b)) = c.metadata.get(md) {
            out.insert(key.into(), (*b).into());
        }
    }
    serde_json::Value::Object(out)
}

/// The tokenizer of a GGUF file's embedded vocabulary (`--tokenizer model.gguf`).
pub(super) fn tokenizer_from_file(path: &Path) -> Result<Tokenizer, EngineError> {
    let err = |reason: String| EngineError::Tokenizer {
        path: path.to_path_buf(),
        reason,
    };
    let mut file = File::open(path).map_err(|e| err(e.to_string()))?;
    let content = Content::read(&mut file).map_err(|e| err(e.to_string()))?;
    crate::gguf_tokenizer::from_gguf(&content).map_err(err)
}

fn md_f64(c: &Content, key: &str) -> Option<f64> {
    match c.metadata.get(key)? {
        Value::F32(v) => Some(*v as f64),
        Value::F64(v) => Some(*v),
        v => value_u64(v).map(|v| v as f64),
    }
}

struct Gguf<'a> {
    path: &'a Path,
    content: &'a Content,
    file: File,
    device: Device,
    /// Convert types with only a scalar CPU kernel to Q8_0 (CPU only).
    requantize: bool,
    /// Pad Q8_0 rows to a multiple of 256 columns, for candle's repacked VNNI kernel.
    pad_q8_0: bool,
    tally: Tally,
    arch: String,
}

/// A tensor as read, on the CPU, with the name of its type in the file.
struct Raw {
    q: QTensor,
    from: String,
}

impl Gguf<'_> {
    fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }

    /// The vocabulary size: the rows of the token embedding.
    fn vocab(&self) -> Result<usize, EngineError> {
        self.content
            .tensor_infos
            .get("token_embd.weight")
            .map(|t| t.shape.dims()[0])
            .ok_or_else(|| bad(self.path, "no token_embd.weight"))
    }

    fn need_u(&self, k: &str) -> Result<usize, EngineError> {
        let key = self.key(k);
        md_u32(self.content, &key)
            .map(|v| v as usize)
            .ok_or_else(|| bad(self.path, format!("no `{key}`")))
    }

    fn read(&mut self, name: &str, shape: &[usize]) -> Result<Raw, EngineError> {
        let q = self
            .content
            .tensor(&mut self.file, name, &Device::Cpu)
            .map_err(|e| bad(self.path, format!("tensor `{name}`: {e}")))?;
        if q.shape().dims() != shape {
            return Err(bad(
                self.path,
                format!(
                    "tensor `{name}` is {:?}, metadata says {shape:?}",
                    q.shape().dims()
                ),
            ));
        }
        let from = ggml_name(q.dtype());
        Ok(Raw { q, from })
    }

    /// A norm weight as f32 on the device, counted.
    fn vector(&mut self, name: &str, len: usize) -> Result<Tensor, EngineError> {
        let t = self.read_vector(name, len)?;
        self.tally.dense(&t);
        Ok(t)
    }

    /// A vector as f32 on the device, not counted (biases are, with their linear layer).
    fn read_vector(&mut self, name: &str, len: usize) -> Result<Tensor, EngineError> {
        Ok(self
            .read(name, &[len])?
            .q
            .dequantize(&Device::Cpu)?
            .to_device(&self.device)?)
    }

    /// A bias, where the file has one.
    fn bias(&mut self, name: &str, len: usize) -> Result<Option<Tensor>, EngineError> {
        if self.has(name) {
            Ok(Some(self.read_vector(name, len)?))
        } else {
            Ok(None)
        }
    }

    /// The type a matrix is held in, and the tensor converted to it (on the CPU).
    fn convert(&self, raw: Raw) -> Result<Raw, EngineError> {
        let slow = matches!(
            raw.q.dtype(),
            GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q8_1
        );
        if !(self.requantize && slow) {
            return Ok(raw);
        }
        let f = raw.q.dequantize(&Device::Cpu)?;
        let q = QTensor::quantize(&f, GgmlDType::Q8_0)?;
        Ok(Raw { q, from: raw.from })
    }

    /// Several matrices with the same number of columns as one linear layer each, or fused
    /// into one where their (converted) types agree.
    fn linears(
        &mut self,
        raws: Vec<Raw>,
        biases: Vec<Option<Tensor>>,
    ) -> Result<Vec<Linear>, EngineError> {
        let mut out = Vec::new();
        let mut group: Vec<(Raw, Option<Tensor>)> = Vec::new();
        let flush = |g: &mut Gguf,
                     group: &mut Vec<(Raw, Option<Tensor>)>,
                     out: &mut Vec<Linear>|
         -> Result<(), EngineError> {
            if group.is_empty() {
                return Ok(());
            }
            let parts = std::mem::take(group);
            let from = parts[0].0.from.clone();
            let bias = if parts.iter().all(|p| p.1.is_some()) {
                let bs: Vec<Tensor> = parts.iter().filter_map(|p| p.1.clone()).collect();
                Some(Tensor::cat(&bs, 0)?)
            } else if parts.iter().all(|p| p.1.is_none()) {
                None
            } else {
                // Mixed: give the missing ones zero biases.
                let mut bs = Vec::new();
                for p in &parts {
                    let rows = p.0.q.shape().dims()[0];
                    bs.push(match &p.1 {
                        Some(b) => b.clone(),
                        None => Tensor::zeros(rows, DType::F32, &g.device)?,
                    });
                }
                Some(Tensor::cat(&bs, 0)?)
            };
            let q = concat_rows(parts.into_iter().map(|p| p.0.q).collect())?;
            let k = q.shape().dims()[1];
            let q = g.pad(q)?;
            let k_held = q.shape().dims()[1];
            let l = Linear {
                w: g.to_device(q)?,
                b: bias,
                k_held,
            };
            g.tally.linear(&from, &l, k);
            out.push(l);
            Ok(())
        };
        for (raw, b) in raws.into_iter().zip(biases) {
            let raw = self.convert(raw)?;
            if let Some((last, _)) = group.last()
                && (last.q.dtype() != raw.q.dtype() || last.from != raw.from)
            {
                flush(self, &mut group, &mut out)?;
            }
            group.push((raw, b));
        }
        flush(self, &mut group, &mut out)?;
        Ok(out)
    }

    /// `q` with its rows padded with zero blocks to a multiple of 256 columns, where that
    /// moves a matmul from candle's generic kernel to its repacked one (see the module docs).
    fn pad(&self, q: QTensor) -> Result<QTensor, EngineError> {
        let (n, k) = q.shape().dims2()?;
        let k_to = k.div_ceil(256) * 256;
        // At most half as much again: the repacked kernel is several times faster, but
        // padding 64 columns to 256 would read four times the bytes.
        if !self.pad_q8_0
            || q.dtype() != GgmlDType::Q8_0
            || k_to == k
            || 2 * k_to > 3 * k
            || !n.is_multiple_of(16)
        {
            return Ok(q);
        }
        let block = GgmlDType::Q8_0.type_size();
        let (row, row_to) = (k / 32 * block, k_to / 32 * block);
        let data = q.data()?;
        let mut out = vec![0u8; n * row_to];
        for (src, dst) in data.chunks_exact(row).zip(out.chunks_exact_mut(row_to)) {
            dst[..row].copy_from_slice(src);
        }
        let storage = QStorage::from_data(Cow::Owned(out), &Device::Cpu, GgmlDType::Q8_0)?;
        Ok(QTensor::new(storage, (n, k_to))?)
    }

    fn to_device(&self, q: QTensor) -> Result<QMatMul, EngineError> {
        let q = if self.device.is_cpu() {
            q
        } else {
            let shape = q.shape().clone();
            let storage = QStorage::from_data(q.data()?, &self.device, q.dtype())?;
            QTensor::new(storage, shape)?
        };
        Ok(QMatMul::from_arc(Arc::new(q))?)
    }

    fn single(&mut self, raw: Raw, b: Option<Tensor>) -> Result<Linear, EngineError> {
        let mut l = self.linears(vec![raw], vec![b])?;
        Ok(l.pop().expect("one linear"))
    }

    /// The token table, and the output layer (its own tensor, or tied to the table).
    fn embedding_and_head(
        &mut self,
        vocab: usize,
        d: usize,
    ) -> Result<(Embedding, Linear), EngineError> {
        let table = self.read("token_embd.weight", &[vocab, d])?;
        let dense_type = matches!(
            table.q.dtype(),
            GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16
        );
        if self.has("output.weight") {
            let embed = if dense_type {
                let t = table.q.dequantize(&Device::Cpu)?.to_device(&self.device)?;
                self.tally.dense(&t);
                Embedding::Dense(t)
            } else {
                let q = self.convert(table)?.q;
                self.tally.parameters += q.shape().elem_count() as u64;
                self.tally.bytes += q.storage_size_in_bytes() as u64;
                let QMatMul::QTensor(table) = self.to_device(q)? else {
                    unreachable!("a quantized type stays quantized")
                };
                Embedding::Quantized { table, d }
            };
            let head = self.read("output.weight", &[vocab, d])?;
            let head = self.single(head, None)?;
            return Ok((embed, head));
        }
        // Tied: one tensor serves both, counted once.
        let from = table.from.clone();
        let q = self.pad(self.convert(table)?.q)?;
        let k_held = q.shape().dims()[1];
        let m = self.to_device(q)?;
        let embed = match &m {
            QMatMul::QTensor(q) => Embedding::Quantized {
                table: q.clone(),
                d,
            },
            QMatMul::Tensor(t) | QMatMul::TensorF16(t) => Embedding::Dense(t.to_dtype(DType::F32)?),
        };
        let head = Linear {
            w: m,
            b: None,
            k_held,
        };
        self.tally.linear(&from, &head, d);
        Ok((embed, head))
    }
}

/// Whether this CPU has the VNNI instructions candle's repacked Q8_0 kernel needs.
fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        (is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"))
            || (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("avxvnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Rows of same-typed matrices with the same column count, stacked.
fn concat_rows(parts: Vec<QTensor>) -> Result<QTensor, EngineError> {
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    let dtype = parts[0].dtype();
    let cols = parts[0].shape().dims()[1];
    let mut rows = 0;
    let mut data = Vec::new();
    for p in &parts {
        rows += p.shape().dims()[0];
        data.extend_from_slice(&p.data()?);
    }
    let storage = QStorage::from_data(Cow::Owned(data), &Device::Cpu, dtype)?;
    Ok(QTensor::new(storage, (rows, cols))?)
}

/// Undoes llama.cpp's `permute` of Q/K rows: within each head, row `2j + s` (pair j, half s)
/// goes back to row `s * head_dim/2 + j`.
fn unpermute(q: QTensor, n_head: usize) -> Result<QTensor, EngineError> {
    let (rows, cols) = q.shape().dims2()?;
    let hd = rows / n_head;
    let half = hd / 2;
    let data = q.data()?;
    let rb = data.len() / rows;
    let mut out = vec![0u8; data.len()];
    for h in 0..n_head {
        for j in 0..half {
            for s in 0..2 {
                let from = h * hd + 2 * j + s;
                let to = h * hd + s * half + j;
                out[to * rb..(to + 1) * rb].copy_from_slice(&data[from * rb..(from + 1) * rb]);
            }
        }
    }
    let storage = QStorage::from_data(Cow::Owned(out), &Device::Cpu, q.dtype())?;
    Ok(QTensor::new(storage, (rows, cols))?)
}

fn llama(g: &mut Gguf) -> Result<(Model, usize), EngineError> {
    let d = g.need_u("embedding_length")?;
    let n_layer = g.need_u("block_count")?;
    let n_head = g.need_u("attention.head_count")?;
    let n_kv = g.need_u("attention.head_count_kv").unwrap_or(n_head);
    let inter = g.need_u("feed_forward_length")?;
    let max_len = g.need_u("context_length")?;
    let head_dim = g
        .need_u("attention.key_length")
        .unwrap_or(d / n_head.max(1));
    let eps = md_f64(g.content, &g.key("attention.layer_norm_rms_epsilon")).unwrap_or(1e-5) as f32;
    let theta = md_f64(g.content, &g.key("rope.freq_base")).unwrap_or(10000.0);
    let rot = g.need_u("rope.dimension_count").unwrap_or(head_dim);
    if rot != head_dim {
        return Err(unsupported(
            g.path,
            format!("partial RoPE ({rot} of {head_dim} dims)"),
        ));
    }
    if n_head == 0 || n_kv == 0 || !n_head.is_multiple_of(n_kv) || !head_dim.is_multiple_of(2) {
        return Err(bad(g.path, "inconsistent head counts"));
    }
    let vocab = g.vocab()?;

    let mut inv_freq = super::parts::rope_inv_freq(theta, head_dim);
    match md_str(g.content, &g.key("rope.scaling.type")).as_deref() {
        None | Some("none") => {}
        Some("linear") => {
            let f = md_f64(g.content, &g.key("rope.scaling.factor")).unwrap_or(1.0);
            inv_freq.iter_mut().for_each(|x| *x /= f);
        }
        Some(other) => return Err(unsupported(g.path, format!("RoPE scaling `{other}`"))),
    }
    // Llama 3.1's frequency factors, which the converter stores as a tensor.
    if g.has("rope_freqs.weight") {
        let f: Vec<f32> = g
            .read("rope_freqs.weight", &[head_dim / 2])?
            .q
            .dequantize(&Device::Cpu)?
            .to_vec1()?;
        inv_freq.iter_mut().zip(f).for_each(|(x, f)| *x /= f as f64);
    }

    let (embed, lm_head) = g.embedding_and_head(vocab, d)?;
    let mut blocks = Vec::with_capacity(n_layer);
    for i in 0..n_layer {
        let b = format!("blk.{i}");
        let mut q = g.read(&format!("{b}.attn_q.weight"), &[n_head * head_dim, d])?;
        q.q = unpermute(q.q, n_head)?;
        let mut k = g.read(&format!("{b}.attn_k.weight"), &[n_kv * head_dim, d])?;
        k.q = unpermute(k.q, n_kv)?;
        let v = g.read(&format!("{b}.attn_v.weight"), &[n_kv * head_dim, d])?;
        // The converter permutes Q/K biases too (Qwen-style bias models are another arch).
        let qkv_b = vec![
            g.bias(&format!("{b}.attn_q.bias"), n_head * head_dim)?,
            g.bias(&format!("{b}.attn_k.bias"), n_kv * head_dim)?,
            g.bias(&format!("{b}.attn_v.bias"), n_kv * head_dim)?,
        ];
        if qkv_b[0].is_some() || qkv_b[1].is_some() {
            return Err(unsupported(g.path, "Llama with Q/K biases"));
        }
        let qkv = g.linears(vec![q, k, v], qkv_b)?;
        let o = g.read(&format!("{b}.attn_output.weight"), &[d, n_head * head_dim])?;
        let o = g.single(o, None)?;
        let gate = g.read(&format!("{b}.ffn_gate.weight"), &[inter, d])?;
        let up = g.read(&format!("{b}.ffn_up.weight"), &[inter, d])?;
        let gate_up = g.linears(vec![gate, up], vec![None, None])?;
        let down = g.read(&format!("{b}.ffn_down.weight"), &[d, inter])?;
        let down = g.single(down, None)?;
        blocks.push(Block {
            attn_norm: Norm::Rms {
                w: g.vector(&format!("{b}.attn_norm.weight"), d)?,
                eps,
            },
            qkv: crate::model::Fused(qkv),
            o,
            mlp_norm: Norm::Rms {
                w: g.vector(&format!("{b}.ffn_norm.weight"), d)?,
                eps,
            },
            mlp: Mlp::Gated {
                gate_up: crate::model::Fused(gate_up),
                down,
                inter,
            },
        });
    }
    let final_norm = Norm::Rms {
        w: g.vector("output_norm.weight", d)?,
        eps,
    };
    let (cos, sin) = super::parts::rope_tables(&inv_freq, max_len, &g.device)?;
    Ok((
        Model {
            arch: Arch::Llama,
            shapes: Shapes {
                n_head,
                n_kv_head: n_kv,
                head_dim,
                vocab,
            },
            embed,
            positions: Positions::Rope { cos, sin },
            blocks,
            final_norm,
            lm_head,
            device: g.device.clone(),
        },
        max_len,
    ))
}

fn gpt2(g: &mut Gguf) -> Result<(Model, usize), EngineError> {
    let d = g.need_u("embedding_length")?;
    let n_layer = g.need_u("block_count")?;
    let n_head = g.need_u("attention.head_count")?;
    let inner = g.need_u("feed_forward_length").unwrap_or(4 * d);
    let max_len = g.need_u("context_length")?;
    let eps = md_f64(g.content, &g.key("attention.layer_norm_epsilon")).unwrap_or(1e-5) as f32;
    if n_head == 0 || !d.is_multiple_of(n_head) {
        return Err(bad(g.path, "inconsistent head counts"));
    }
    let vocab = g.vocab()?;
    let (embed, lm_head) = g.embedding_and_head(vocab, d)?;
    let wpe = g
        .read("position_embd.weight", &[max_len, d])?
        .q
        .dequantize(&Device::Cpu)?
        .to_device(&g.device)?;
    g.tally.dense(&wpe);
    let layer_norm = |g: &mut Gguf, name: &str| -> Result<Norm, EngineError> {
        Ok(Norm::Layer {
            w: g.vector(&format!("{name}.weight"), d)?,
            b: g.vector(&format!("{name}.bias"), d)?,
            eps,
        })
    };
    let linear =
        |g: &mut Gguf, name: &str, out: usize, inp: usize| -> Result<Linear, EngineError> {
            let w = g.read(&format!("{name}.weight"), &[out, inp])?;
            let b = g.bias(&format!("{name}.bias"), out)?;
            g.single(w, b)
        };
    let mut blocks = Vec::with_capacity(n_layer);
    for i in 0..n_layer {
        let b = format!("blk.{i}");
        blocks.push(Block {
            attn_norm: layer_norm(g, &format!("{b}.attn_norm"))?,
            qkv: crate::model::Fused(vec![linear(g, &format!("{b}.attn_qkv"), 3 * d, d)?]),
            o: linear(g, &format!("{b}.attn_output"), d, d)?,
            mlp_norm: layer_norm(g, &format!("{b}.ffn_norm"))?,
            mlp: Mlp::Plain {
                fc: linear(g, &format!("{b}.ffn_up"), inner, d)?,
                proj: linear(g, &format!("{b}.ffn_down"), d, inner)?,
                act: crate::model::Activation::GeluTanh,
            },
        });
    }
    let final_norm = layer_norm(g, "output_norm")?;
    Ok((
        Model {
            arch: Arch::Gpt2,
            shapes: Shapes {
                n_head,
                n_kv_head: n_head,
                head_dim: d / n_head,
                vocab,
            },
            embed,
            positions: Positions::Learned(wpe),
            blocks,
            final_norm,
            lm_head,
            device: g.device.clone(),
        },
        max_len,
    ))
}
