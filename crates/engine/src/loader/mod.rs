//! From a path to a runnable [`Model`]: which format, which architecture, which tokenizer.
//!
//! Both formats are read into the same [`Model`]; the differences (tensor names, GPT-2's
//! transposed Conv1D weights, llama.cpp's permuted Q/K rows, quantized types) are dealt with
//! here, once, at load time, so the forward pass has a single shape.

mod gguf;
mod hf;
pub(crate) mod metadata;
mod parts;

pub(crate) use parts::Loaded;
use parts::tokenizer_json;

use std::path::{Path, PathBuf};

use tokenizers::Tokenizer;

use crate::error::EngineError;

/// The model's format, from what is on disk. `requantize`: see
/// [`crate::EngineConfig::requantize`] (GGUF on the CPU only).
pub(crate) fn load(
    path: &Path,
    device: &candle_core::Device,
    requantize: bool,
) -> Result<Loaded, EngineError> {
    if !path.exists() {
        return Err(EngineError::NotFound {
            path: path.to_path_buf(),
        });
    }
    if path.is_dir() {
        return hf::load(path, device);
    }
    if is_gguf(path) {
        return gguf::load(path, device, requantize);
    }
    Err(EngineError::BadModel {
        path: path.to_path_buf(),
        reason: "neither a model directory (config.json + *.safetensors) nor a GGUF file".into(),
    })
}

pub(crate) fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"GGUF"
}

/// The tokenizer named by `--tokenizer`: a tokenizer.json, a directory holding one, or a GGUF
/// file whose vocabulary to use.
pub(crate) fn load_tokenizer(path: &Path) -> Result<Tokenizer, EngineError> {
    if !path.exists() {
        return Err(EngineError::NotFound {
            path: path.to_path_buf(),
        });
    }
    if is_gguf(path) {
        return gguf::tokenizer_from_file(path);
    }
    let file = if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.to_path_buf()
    };
    tokenizer_json(&file)
}

/// The model's directory name or file stem, for reports.
pub(crate) fn model_name(path: &Path) -> String {
    let p: PathBuf = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let name = if p.is_dir() {
        p.file_name()
    } else {
        p.file_stem()
    };
    name.map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}
