//! Paths and helpers shared by the tests.

use std::path::PathBuf;
use std::time::Instant;

use bench_engine::{Engine, EngineConfig, Events, FinishReason};

pub fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/models")
}

pub fn fake_gpt2() -> PathBuf {
    models().join("fake-gpt2")
}

pub fn tiny_llama_gguf() -> PathBuf {
    models().join("llama-2-tiny-random-gguf/llama-2-tiny-random.gguf")
}

pub fn tiny_llama_hf() -> PathBuf {
    models().join("tiny-llama-hf")
}

pub fn load(model: PathBuf) -> Engine {
    Engine::load(&EngineConfig {
        model,
        ..EngineConfig::default()
    })
    .expect("model loads")
}

/// Everything `generate` reported, in order.
#[derive(Default, Debug)]
pub struct Recorder {
    pub released: Vec<(usize, Option<Instant>)>,
    pub admitted: Vec<(usize, Instant)>,
    pub tokens: Vec<(usize, u32, Instant)>,
    pub finished: Vec<(usize, FinishReason, Instant)>,
}

impl Recorder {
    /// The tokens of request `i`, in order.
    pub fn of(&self, i: usize) -> Vec<u32> {
        self.tokens
            .iter()
            .filter(|t| t.0 == i)
            .map(|t| t.1)
            .collect()
    }

    pub fn reason(&self, i: usize) -> Option<FinishReason> {
        self.finished.iter().find(|f| f.0 == i).map(|f| f.1)
    }
}

impl Events for Recorder {
    fn released(&mut self, index: usize, held_until: Option<Instant>) {
        self.released.push((index, held_until));
    }
    fn admitted(&mut self, index: usize, at: Instant) {
        self.admitted.push((index, at));
    }
    fn token(&mut self, index: usize, token: u32, at: Instant) {
        self.tokens.push((index, token, at));
    }
    fn finished(&mut self, index: usize, reason: FinishReason, at: Instant) {
        self.finished.push((index, reason, at));
    }
}

/// A fresh scratch directory under the system temp dir, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let p =
            std::env::temp_dir().join(format!("bench-engine-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies the files of a model directory into `dst`, less those named in `skip`.
pub fn copy_dir(src: &std::path::Path, dst: &std::path::Path, skip: &[&str]) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        if skip.iter().any(|s| name == *s) {
            continue;
        }
        std::fs::copy(e.path(), dst.join(&name)).unwrap();
    }
}

/// Writes a GGUF file with candle's writer.
pub fn write_gguf(
    path: &std::path::Path,
    metadata: &[(String, candle_core::quantized::gguf_file::Value)],
    tensors: &[(String, candle_core::quantized::QTensor)],
) {
    let md: Vec<(&str, &candle_core::quantized::gguf_file::Value)> =
        metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &candle_core::quantized::QTensor)> =
        tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut f = std::fs::File::create(path).unwrap();
    candle_core::quantized::gguf_file::write(&mut f, &md, &ts).unwrap();
}

/// A deterministic pseudo-random stream (SplitMix64) for test weights.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Roughly normal, mean 0, standard deviation `std`.
    pub fn normal(&mut self, std: f32) -> f32 {
        let s: f32 = (0..4).map(|_| self.next_f32()).sum::<f32>() - 2.0;
        s * std * (3.0f32).sqrt()
    }

    pub fn vec(&mut self, n: usize, std: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal(std)).collect()
    }
}

pub fn greedy(prompt: Vec<u32>, max_tokens: u32) -> bench_engine::GenRequest {
    bench_engine::GenRequest {
        prompt,
        max_tokens,
        ignore_eos: true,
        sampling: bench_engine::Sampling::default(),
        not_before: None,
    }
}
