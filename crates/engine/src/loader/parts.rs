//! What both formats' loaders build a model from: the [`Loaded`] result, the weights'
//! tally, the rotary tables, the type names and the errors that name the file.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::quantized::QMatMul;
use candle_core::{DType, Tensor};
use tokenizers::Tokenizer;

use crate::error::EngineError;
use crate::model::{Linear, Model};

/// What a loader produces.
pub(crate) struct Loaded {
    pub model: Model,
    /// The tokenizer found with the model (a directory's tokenizer.json, a GGUF's
    /// vocabulary), if any; the caller's `--tokenizer` replaces it.
    pub tokenizer: Result<Tokenizer, EngineError>,
    pub max_model_len: usize,
    pub eos_token_ids: Vec<u32>,
    pub tally: Tally,
    /// A GGUF file's tokenizer settings in the shape of Hugging Face's
    /// `tokenizer_config.json` (see [`crate::Engine::tokenizer_config`]); None for a
    /// directory, whose own file is on disk.
    pub tokenizer_config: Option<serde_json::Value>,
}

pub(crate) fn tokenizer_json(file: &Path) -> Result<Tokenizer, EngineError> {
    if !file.is_file() {
        return Err(EngineError::Tokenizer {
            path: file.to_path_buf(),
            reason:
                "no such file (pass --tokenizer with a tokenizer.json or a directory holding one)"
                    .into(),
        });
    }
    Tokenizer::from_file(file).map_err(|e| EngineError::Tokenizer {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Counts weights as they end up held, for [`crate::ModelInfo`].
#[derive(Default)]
pub(crate) struct Tally {
    pub parameters: u64,
    pub bytes: u64,
    /// (type in the file, type held) -> number of weights, for the matrices.
    kinds: BTreeMap<(String, String), u64>,
}

impl Tally {
    /// A matrix held as `linear`, `k` columns wide (before any padding), was `from` in
    /// the file.
    pub(crate) fn matrix(&mut self, from: &str, linear: &QMatMul, k: usize) {
        let (held, rows, bytes) = held(linear);
        let elems = rows * k as u64;
        self.parameters += elems;
        self.bytes += bytes;
        *self
            .kinds
            .entry((from.to_string(), held.to_string()))
            .or_default() += elems;
    }

    /// A vector (norm, bias) or a dense table, counted but not named in `weights`.
    pub(crate) fn dense(&mut self, t: &Tensor) {
        self.parameters += t.elem_count() as u64;
        self.bytes += (t.elem_count() * t.dtype().size_in_bytes()) as u64;
    }

    pub(crate) fn linear(&mut self, from: &str, l: &Linear, k: usize) {
        self.matrix(from, &l.w, k);
        if let Some(b) = &l.b {
            self.dense(b);
        }
    }

    /// "Q4_1 as Q8_0, Q6_K": by share of the weights, largest first.
    pub(crate) fn weights(&self) -> String {
        let mut kinds: Vec<_> = self.kinds.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let names: Vec<String> = kinds
            .iter()
            .map(|((from, held), _)| {
                if from.eq_ignore_ascii_case(held) {
                    from.clone()
                } else {
                    format!("{from} as {held}")
                }
            })
            .collect();
        names.join(", ")
    }
}

/// (type name, rows, bytes) of a linear layer's weight as held.
fn held(w: &QMatMul) -> (String, u64, u64) {
    match w {
        QMatMul::QTensor(q) => (
            ggml_name(q.dtype()),
            q.shape().dims()[0] as u64,
            q.storage_size_in_bytes() as u64,
        ),
        QMatMul::Tensor(t) | QMatMul::TensorF16(t) => (
            dtype_name(t.dtype()).to_string(),
            t.dims()[0] as u64,
            (t.elem_count() * t.dtype().size_in_bytes()) as u64,
        ),
    }
}

/// llama.cpp's spelling of a GGML type: `Q4_1`, `Q6_K`, `F16`.
pub(crate) fn ggml_name(dt: candle_core::quantized::GgmlDType) -> String {
    let s = format!("{dt:?}");
    match s.strip_suffix('K') {
        Some(head) if !head.ends_with('_') && head.starts_with('Q') => format!("{head}_K"),
        _ => s,
    }
}

pub(crate) fn dtype_name(dt: DType) -> &'static str {
    dt.as_str()
}

pub(crate) fn bad(path: &Path, reason: impl Into<String>) -> EngineError {
    EngineError::BadModel {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

pub(crate) fn unsupported(path: &Path, what: impl Into<String>) -> EngineError {
    EngineError::Unsupported {
        path: path.to_path_buf(),
        what: what.into(),
    }
}

/// RoPE tables, (max_len, head_dim / 2) each, from the per-pair inverse frequencies.
pub(crate) fn rope_tables(
    inv_freq: &[f64],
    max_len: usize,
    device: &candle_core::Device,
) -> candle_core::Result<(Tensor, Tensor)> {
    let half = inv_freq.len();
    let mut cos = Vec::with_capacity(max_len * half);
    let mut sin = Vec::with_capacity(max_len * half);
    for p in 0..max_len {
        for f in inv_freq {
            let a = p as f64 * f;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    Ok((
        Tensor::from_vec(cos, (max_len, half), device)?,
        Tensor::from_vec(sin, (max_len, half), device)?,
    ))
}

/// `theta^(-2i/d)` for i in 0..d/2: the standard RoPE frequencies.
pub(crate) fn rope_inv_freq(theta: f64, head_dim: usize) -> Vec<f64> {
    (0..head_dim / 2)
        .map(|i| theta.powf(-((2 * i) as f64) / head_dim as f64))
        .collect()
}

/// Llama 3's frequency-dependent RoPE scaling (transformers' `_compute_llama3_parameters`).
pub(crate) fn llama3_scaling(
    inv_freq: &mut [f64],
    factor: f64,
    low_freq_factor: f64,
    high_freq_factor: f64,
    original_max: f64,
) {
    let low_wavelen = original_max / low_freq_factor;
    let high_wavelen = original_max / high_freq_factor;
    for f in inv_freq.iter_mut() {
        let wavelen = 2.0 * std::f64::consts::PI / *f;
        if wavelen > low_wavelen {
            *f /= factor;
        } else if wavelen >= high_wavelen {
            let smooth =
                (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            *f = (1.0 - smooth) * *f / factor + smooth * *f;
        }
    }
}
