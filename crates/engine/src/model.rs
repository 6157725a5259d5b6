//! The transformer: one implementation for GPT-2 and Llama.
//!
//! Both are pre-norm decoders that differ only in their parts (LayerNorm or RMSNorm, learned
//! positions or RoPE, a GELU MLP or a gated SiLU one, biases or not), so one struct with
//! those parts as enums serves both, and both loaders ([`crate::loader`]) fill it in.
//!
//! A forward pass runs over a *step*: the new tokens of several sequences, laid end to end
//! (one row per token). The linear layers see all rows at once, which is where batching pays
//! (the weights are read once per step, not once per sequence); attention is done per
//! sequence, against that sequence's own KV cache, so sequences of any lengths (and a prefill
//! chunk next to single decode tokens) share a step without padding.
//!
//! Everything is f32 apart from the weights of the linear layers, which stay in their
//! quantized type where candle has a kernel for it (see `loader::gguf`).

use candle_core::quantized::QMatMul;
use candle_core::{D, DType, Device, Module, Result, Tensor};

use crate::kv::KvCache;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arch {
    Gpt2,
    Llama,
}

impl Arch {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arch::Gpt2 => "gpt2",
            Arch::Llama => "llama",
        }
    }
}

/// Shapes the forward pass needs.
#[derive(Debug, Clone)]
pub(crate) struct Shapes {
    pub n_head: usize,
    pub n_kv_head: usize,
    pub head_dim: usize,
    pub vocab: usize,
}

pub(crate) enum Norm {
    Rms { w: Tensor, eps: f32 },
    Layer { w: Tensor, b: Tensor, eps: f32 },
}

impl Norm {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Rms { w, eps } => candle_nn::ops::rms_norm(x, w, *eps),
            Norm::Layer { w, b, eps } => candle_nn::ops::layer_norm(x, w, b, *eps),
        }
    }
}

/// `x @ w.T + b`, `w` quantized or dense.
pub(crate) struct Linear {
    pub w: QMatMul,
    pub b: Option<Tensor>,
    /// Columns of `w` as held: more than the input's width when the loader padded the rows
    /// with zeros to reach one of candle's faster kernels (see `loader::gguf`); the input is
    /// then padded to match.
    pub k_held: usize,
}

impl Linear {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let k = x.dim(D::Minus1)?;
        let y = if k < self.k_held {
            self.w
                .forward(&x.pad_with_zeros(D::Minus1, 0, self.k_held - k)?)?
        } else {
            self.w.forward(x)?
        };
        match &self.b {
            Some(b) => y.broadcast_add(b),
            None => Ok(y),
        }
    }
}

/// Linear layers that read the same input, their outputs side by side: one matmul when the
/// loader could fuse their weights into one matrix, several (and a concatenation) when not.
pub(crate) struct Fused(pub Vec<Linear>);

impl Fused {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self.0.as_slice() {
            [one] => one.forward(x),
            parts => {
                // Pad a shared input once rather than once per part.
                let k_held = parts[0].k_held;
                let padded;
                let x = if parts.iter().all(|p| p.k_held == k_held) && x.dim(D::Minus1)? < k_held {
                    let k = x.dim(D::Minus1)?;
                    padded = x.pad_with_zeros(D::Minus1, 0, k_held - k)?;
                    &padded
                } else {
                    x
                };
                let ys = parts
                    .iter()
                    .map(|l| l.forward(x))
                    .collect::<Result<Vec<_>>>()?;
                Tensor::cat(&ys, D::Minus1)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Activation {
    /// GPT-2's `gelu_new`: the tanh approximation.
    GeluTanh,
    /// The exact, erf-based GELU.
    GeluErf,
}

pub(crate) enum Mlp {
    /// GPT-2: `proj(act(fc(x)))`.
    Plain {
        fc: Linear,
        proj: Linear,
        act: Activation,
    },
    /// Llama: `down(silu(gate(x)) * up(x))`, gate and up fused into one matrix (gate rows
    /// first) so that one matmul serves both.
    Gated {
        gate_up: Fused,
        down: Linear,
        inter: usize,
    },
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Mlp::Plain { fc, proj, act } => {
                let h = fc.forward(x)?;
                let h = match act {
                    Activation::GeluTanh => h.gelu()?,
                    Activation::GeluErf => h.gelu_erf()?,
                };
                proj.forward(&h)
            }
            Mlp::Gated {
                gate_up,
                down,
                inter,
            } => {
                let gu = gate_up.forward(x)?;
                let gate = gu.narrow(D::Minus1, 0, *inter)?;
                let up = gu.narrow(D::Minus1, *inter, *inter)?;
                down.forward(&(candle_nn::ops::silu(&gate)? * up)?)
            }
        }
    }
}

pub(crate) struct Block {
    pub attn_norm: Norm,
    /// Q, K and V fused into one matrix (rows: all of Q, then K, then V), as GPT-2 stores it
    /// and as the loaders build it for Llama: one matmul instead of three per layer.
    pub qkv: Fused,
    pub o: Linear,
    pub mlp_norm: Norm,
    pub mlp: Mlp,
}

pub(crate) enum Embedding {
    Dense(Tensor),
    /// Rows looked up straight from the quantized table (often tied to the output layer),
    /// whose rows may be padded past the model width `d`.
    Quantized {
        table: std::sync::Arc<candle_core::quantized::QTensor>,
        d: usize,
    },
}

pub(crate) enum Positions {
    /// GPT-2's learned position table, (max_len, d).
    Learned(Tensor),
    /// RoPE in the half-split ("rotate_half") layout, as transformers' Llama has it; the GGUF
    /// loader un-permutes llama.cpp's Q/K rows to match. Tables are (max_len, head_dim/2).
    Rope { cos: Tensor, sin: Tensor },
}

pub(crate) struct Model {
    pub arch: Arch,
    pub shapes: Shapes,
    pub embed: Embedding,
    pub positions: Positions,
    pub blocks: Vec<Block>,
    pub final_norm: Norm,
    pub lm_head: Linear,
    pub device: Device,
}

/// One sequence's share of a step: `len` new tokens at positions `start..start + len`.
pub(crate) struct Segment<'a> {
    pub start: usize,
    pub len: usize,
    pub cache: &'a mut KvCache,
}

impl Model {
    /// [`Model::forward`] inside candle's CPU thread pool (`Device::with_context`; a no-op on
    /// CUDA). candle-nn's softmax and RoPE, and gemm, split their work with rayon; called
    /// from a thread outside a rayon pool, every such call hands its work to the pool and
    /// sleeps until it is done, a futex round trip: a decode step's softmax (9 x 70 scores)
    /// took ~20 us that way against ~6 us inside the pool, and there is one per sequence per
    /// layer. Inside the pool the calling thread is a worker and runs small splits itself.
    pub(crate) fn step(
        &self,
        tokens: &[u32],
        segments: &mut [Segment<'_>],
        out_rows: &[u32],
    ) -> Result<Tensor> {
        self.device
            .with_context(|| self.forward(tokens, segments, out_rows))
    }

    /// Runs one step. `tokens` holds the segments' new tokens end to end; `out_rows` are the
    /// rows (indices into `tokens`) whose logits are wanted, usually each segment's last.
    /// Returns their logits, (out_rows.len(), vocab), f32, on the model's device. Appends the
    /// new keys and values to each segment's cache.
    fn forward(
        &self,
        tokens: &[u32],
        segments: &mut [Segment<'_>],
        out_rows: &[u32],
    ) -> Result<Tensor> {
        let n = tokens.len();
        debug_assert_eq!(n, segments.iter().map(|s| s.len).sum::<usize>());
        let dev = &self.device;
        let ids = Tensor::from_slice(tokens, n, dev)?;
        let mut pos = Vec::with_capacity(n);
        for s in segments.iter() {
            pos.extend((s.start..s.start + s.len).map(|p| p as u32));
        }
        let pos = Tensor::from_vec(pos, n, dev)?;

        let mut x = match &self.embed {
            Embedding::Dense(w) => w.index_select(&ids, 0)?,
            Embedding::Quantized { table, d } => {
                let x = table.embedding(&ids)?;
                if x.dim(1)? > *d {
                    x.narrow(1, 0, *d)?.contiguous()?
                } else {
                    x
                }
            }
        };
        let rope = match &self.positions {
            Positions::Learned(wpe) => {
                x = (x + wpe.index_select(&pos, 0)?)?;
                None
            }
            Positions::Rope { cos, sin } => {
                Some((cos.index_select(&pos, 0)?, sin.index_select(&pos, 0)?))
            }
        };

        for (layer, block) in self.blocks.iter().enumerate() {
            let h = block.attn_norm.forward(&x)?;
            let a = self.attention(layer, block, &h, rope.as_ref(), segments)?;
            x = (x + block.o.forward(&a)?)?;
            let h = block.mlp_norm.forward(&x)?;
            x = (x + block.mlp.forward(&h)?)?;
        }

        let x = if out_rows.len() == n && out_rows.iter().enumerate().all(|(i, &r)| i == r as usize)
        {
            x
        } else {
            let rows = Tensor::from_slice(out_rows, out_rows.len(), dev)?;
            x.index_select(&rows, 0)?
        };
        let x = self.final_norm.forward(&x)?;
        self.lm_head.forward(&x)?.to_dtype(DType::F32)
    }

    fn attention(
        &self,
        layer: usize,
        block: &Block,
        h: &Tensor,
        rope: Option<&(Tensor, Tensor)>,
        segments: &mut [Segment<'_>],
    ) -> Result<Tensor> {
        let Shapes {
            n_head,
            n_kv_head,
            head_dim,
            ..
        } = self.shapes;
        let n = h.dim(0)?;
        let qkv = block.qkv.forward(h)?;
        let q_width = n_head * head_dim;
        let kv_width = n_kv_head * head_dim;
        // Scaling q once here saves a pass over every sequence's scores.
        let scale = 1.0 / (head_dim as f64).sqrt();
        let q = (qkv.narrow(1, 0, q_width)? * scale)?.reshape((1, n, n_head, head_dim))?;
        let k = qkv
            .narrow(1, q_width, kv_width)?
            .contiguous()?
            .reshape((1, n, n_kv_head, head_dim))?;
        let v = qkv
            .narrow(1, q_width + kv_width, kv_width)?
            .contiguous()?
            .reshape((n, n_kv_head, head_dim))?;
        let (q, k) = match rope {
            Some((cos, sin)) => (
                candle_nn::rotary_emb::rope_thd(&q, cos, sin)?,
                candle_nn::rotary_emb::rope_thd(&k, cos, sin)?,
            ),
            None => (q, k),
        };
        let q = q.reshape((n, n_head, head_dim))?;
        let k = k.reshape((n, n_kv_head, head_dim))?;
        let rep = n_head / n_kv_head;

        let mut outs = Vec::with_capacity(segments.len());
        let mut off = 0;
        for seg in segments.iter_mut() {
            let len = seg.len;
            if len == 1 {
                // A decode token: (1, heads, hd) is already (kv_heads, rep, hd), so no
                // transpose and no copy. This runs once per sequence and layer, and its fixed
                // costs are what bounds large decode batches.
                let qs = q.narrow(0, off, 1)?.reshape((n_kv_head, rep, head_dim))?;
                let ks = k.narrow(0, off, 1)?.reshape((n_kv_head, 1, head_dim))?;
                let vs = v.narrow(0, off, 1)?.reshape((n_kv_head, 1, head_dim))?;
                let (keys, values) = seg.cache.append(layer, seg.start, &ks, &vs)?;
                let scores = qs.matmul(&keys.t()?)?; // (kv_heads, rep, total)
                let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                outs.push(probs.matmul(&values)?.reshape((1, n_head * head_dim))?);
                off += 1;
                continue;
            }
            let ks = k.narrow(0, off, len)?.transpose(0, 1)?.contiguous()?;
            let vs = v.narrow(0, off, len)?.transpose(0, 1)?.contiguous()?;
            let (keys, values) = seg.cache.append(layer, seg.start, &ks, &vs)?;
            // Queries in chunks, so that a long prompt's scores (heads x rows x keys) stay
            // bounded: 512 rows against 8k keys is 16 MB per head.
            for a in (0..len).step_by(QUERY_CHUNK) {
                let rows = QUERY_CHUNK.min(len - a);
                let total = seg.start + a + rows; // keys this chunk can see
                // (rows, heads, hd) -> (kv_heads, rep * rows, hd): the query heads that share
                // a KV head become extra rows of one matmul, so K and V are never repeated.
                let qs = q
                    .narrow(0, off + a, rows)?
                    .transpose(0, 1)?
                    .contiguous()?
                    .reshape((n_kv_head, rep * rows, head_dim))?;
                let keys = keys.narrow(1, 0, total)?;
                let values = values.narrow(1, 0, total)?;
                let mask = causal_mask(seg.start + a, rows, total, &self.device)?;
                let scores = qs
                    .matmul(&keys.t()?)? // (kv_heads, rep * rows, total)
                    .reshape((n_kv_head, rep, rows, total))?
                    .broadcast_add(&mask)?
                    .reshape((n_kv_head, rep * rows, total))?;
                let probs = candle_nn::ops::softmax_last_dim(&scores)?;
                outs.push(
                    probs
                        .matmul(&values)? // (kv_heads, rep * rows, hd)
                        .reshape((n_head, rows, head_dim))?
                        .transpose(0, 1)?
                        .reshape((rows, n_head * head_dim))?,
                );
            }
            off += len;
        }
        if outs.len() == 1 {
            Ok(outs.pop().expect("one segment"))
        } else {
            Tensor::cat(&outs, 0)
        }
    }
}

/// Query rows per attention matmul in a prefill.
const QUERY_CHUNK: usize = 512;

/// (len, total): 0 where query `start + i` may see key `j` (j <= start + i), -inf elsewhere.
fn causal_mask(start: usize, len: usize, total: usize, dev: &Device) -> Result<Tensor> {
    let mut m = vec![0f32; len * total];
    for i in 0..len {
        for v in &mut m[i * total + start + i + 1..(i + 1) * total] {
            *v = f32::NEG_INFINITY;
        }
    }
    Tensor::from_vec(m, (len, total), dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Logits of every position of `tokens`, fed `chunk` tokens a step.
    fn rows(model: &Model, tokens: &[u32], chunk: usize) -> Vec<Vec<f32>> {
        let s = &model.shapes;
        let n = tokens.len();
        let mut cache = KvCache::new(
            model.blocks.len(),
            s.n_kv_head,
            s.head_dim,
            1,
            n,
            &model.device,
        )
        .unwrap();
        let mut out = Vec::new();
        for start in (0..n).step_by(chunk) {
            let len = chunk.min(n - start);
            let rows: Vec<u32> = (0..len as u32).collect();
            let mut seg = [Segment {
                start,
                len,
                cache: &mut cache,
            }];
            let logits = model
                .step(&tokens[start..start + len], &mut seg, &rows)
                .unwrap();
            out.extend(logits.to_vec2::<f32>().unwrap());
        }
        out
    }

    /// The tiny Llama (GGUF) and GPT-2 (safetensors) test models, loaded on the CPU.
    fn test_models() -> Vec<Model> {
        let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models");
        [
            models.join("llama-2-tiny-random-gguf/llama-2-tiny-random.gguf"),
            models.join("fake-gpt2"),
        ]
        .iter()
        .map(|path| crate::loader::load(path, &Device::Cpu, true).unwrap().model)
        .collect()
    }

    /// Three sequences sharing steps in ragged shapes (a prefill chunk next to a single token
    /// next to another sequence's whole prompt) give, row for row, the logits each gives
    /// alone: the linear layers batch, attention stays per sequence.
    #[test]
    fn ragged_steps_equal_separate_runs() {
        for model in test_models() {
            let vocab = model.shapes.vocab as u32;
            let seqs: Vec<Vec<u32>> = [30u32, 7, 50]
                .iter()
                .map(|&n| (0..n).map(|i| (i * 104_729 + n * 31) % vocab).collect())
                .collect();
            let alone: Vec<Vec<Vec<f32>>> = seqs.iter().map(|t| rows(&model, t, t.len())).collect();
            let s = &model.shapes;
            let mut caches: Vec<KvCache> = seqs
                .iter()
                .map(|t| {
                    KvCache::new(
                        model.blocks.len(),
                        s.n_kv_head,
                        s.head_dim,
                        1,
                        t.len(),
                        &model.device,
                    )
                    .unwrap()
                })
                .collect();
            let mut got: Vec<Vec<Vec<f32>>> = vec![Vec::new(); 3];
            let mut done = [0usize; 3];
            // (sequence, tokens) per step.
            let schedule: [&[(usize, usize)]; 4] = [
                &[(0, 10), (1, 7), (2, 1)],
                &[(0, 1), (2, 40)],
                &[(2, 1), (0, 19)],
                &[(2, 8)],
            ];
            for step in schedule {
                let mut tokens = Vec::new();
                let mut segments = Vec::new();
                let mut order = Vec::new();
                for (c, cache) in caches.iter_mut().enumerate() {
                    if let Some(&(_, len)) = step.iter().find(|s| s.0 == c) {
                        tokens.extend_from_slice(&seqs[c][done[c]..done[c] + len]);
                        segments.push(Segment {
                            start: done[c],
                            len,
                            cache,
                        });
                        order.push((c, len));
                    }
                }
                let all: Vec<u32> = (0..tokens.len() as u32).collect();
                let logits = model
                    .step(&tokens, &mut segments, &all)
                    .unwrap()
                    .to_vec2::<f32>()
                    .unwrap();
                let mut it = logits.into_iter();
                for (c, len) in order {
                    got[c].extend(it.by_ref().take(len));
                    done[c] += len;
                }
            }
            for c in 0..3 {
                assert_eq!(done[c], seqs[c].len());
                let worst = got[c]
                    .iter()
                    .flatten()
                    .zip(alone[c].iter().flatten())
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(worst < 1e-5, "{}, sequence {c}: {worst}", model.arch.name());
            }
        }
    }

    /// One pass over 700 tokens (attention in 512-row query chunks), prefill chunks of 37
    /// (each attending to a cache written by the ones before), and one token at a time (the
    /// decode path, no mask, no copies): three code paths, the same logits at every position.
    #[test]
    fn one_pass_prefill_chunks_and_decode_agree() {
        for model in test_models() {
            let vocab = model.shapes.vocab as u32;
            let tokens: Vec<u32> = (0..700u32).map(|i| (i * 7919 + 11) % vocab).collect();
            let whole = rows(&model, &tokens, 700);
            for chunk in [37, 1] {
                let other = rows(&model, &tokens, chunk);
                let worst = whole
                    .iter()
                    .flatten()
                    .zip(other.iter().flatten())
                    .map(|(a, b)| (a - b).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst < 1e-5,
                    "{}, chunks of {chunk}: {worst}",
                    model.arch.name()
                );
            }
        }
    }
}
