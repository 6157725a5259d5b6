//! A Hugging Face tokenizer built from a GGUF file's embedded vocabulary.
//!
//! GGUF files carry their tokenizer as metadata (`tokenizer.ggml.*`), not as a
//! tokenizer.json. This writes the tokenizer.json that transformers' own converters would
//! have written for the same vocabulary, and loads it with the `tokenizers` crate, so bench
//! tokenizes exactly as it does for a Hugging Face directory:
//!
//! - `llama` (SentencePiece BPE, Llama 1/2, Mistral): BPE with byte fallback, merges derived
//!   from the piece scores as transformers' `SentencePieceExtractor` orders them (highest
//!   score first), the `▁` space handling of `LlamaConverter`, and a BOS-adding template.
//! - `gpt2` (byte-level BPE: GPT-2, Llama 3, SmolLM, Qwen2): the stored merges, with the
//!   pre-tokenizer that `tokenizer.ggml.pre` names (the same table llama.cpp keys on);
//!   unknown names fall back to GPT-2's.
//!
//! candle has a GGUF tokenizer builder too, but for `gpt2` vocabularies only, for a different
//! `tokenizers` release than the workspace's, and without the SmolLM digit split.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};
use serde_json::{Value as Json, json};
use tokenizers::Tokenizer;

use crate::loader::metadata::{md_str, md_u32, value_u64};

const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's token types.
const TYPE_NORMAL: u64 = 1;
const TYPE_UNKNOWN: u64 = 2;
const TYPE_CONTROL: u64 = 3;
const TYPE_USER_DEFINED: u64 = 4;

pub(crate) fn from_gguf(c: &Content) -> Result<Tokenizer, String> {
    let model = md_str(c, "tokenizer.ggml.model").ok_or(
        "the GGUF file has no embedded vocabulary (tokenizer.ggml.model); pass --tokenizer",
    )?;
    let tokens = strings(c, "tokenizer.ggml.tokens")?;
    let types: Vec<u64> = match c.metadata.get("tokenizer.ggml.token_type") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| value_u64(v).unwrap_or(TYPE_NORMAL))
            .collect(),
        _ => vec![TYPE_NORMAL; tokens.len()],
    };
    let flag = |k: &str| c.metadata.get(k).and_then(|v| v.to_bool().ok());
    let json = match model.as_str() {
        "llama" => {
            let scores: Vec<f32> = match c.metadata.get("tokenizer.ggml.scores") {
                Some(Value::Array(a)) => a.iter().map(|v| v.to_f32().unwrap_or(0.0)).collect(),
                _ => return Err("SentencePiece vocabulary without tokenizer.ggml.scores".into()),
            };
            spm(
                &tokens,
                &scores,
                &types,
                md_u32(c, "tokenizer.ggml.bos_token_id"),
                md_u32(c, "tokenizer.ggml.eos_token_id"),
                md_u32(c, "tokenizer.ggml.unknown_token_id"),
                flag("tokenizer.ggml.add_bos_token").unwrap_or(true),
                flag("tokenizer.ggml.add_eos_token").unwrap_or(false),
                flag("tokenizer.ggml.add_space_prefix").unwrap_or(true),
            )
        }
        "gpt2" => {
            let merges = strings(c, "tokenizer.ggml.merges")?;
            byte_level_bpe(
                &tokens,
                &merges,
                &types,
                md_str(c, "tokenizer.ggml.pre").as_deref().unwrap_or("gpt2"),
                md_u32(c, "tokenizer.ggml.bos_token_id"),
                flag("tokenizer.ggml.add_bos_token").unwrap_or(false),
            )
        }
        other => {
            return Err(format!(
                "tokenizer model `{other}` (supported: llama, gpt2)"
            ));
        }
    };
    json.to_string()
        .parse::<Tokenizer>()
        .map_err(|e| format!("building the tokenizer from the GGUF vocabulary: {e}"))
}

fn strings(c: &Content, key: &str) -> Result<Vec<String>, String> {
    match c.metadata.get(key) {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| format!("{key}: {e}")))
            .collect(),
        _ => Err(format!("no {key}")),
    }
}

fn added(id: usize, content: &str, special: bool) -> Json {
    json!({"id": id, "content": content, "single_word": false, "lstrip": false,
           "rstrip": false, "normalized": !special, "special": special})
}

fn added_tokens(tokens: &[String], types: &[u64]) -> Vec<Json> {
    types
        .iter()
        .enumerate()
        .filter_map(|(i, &t)| match t {
            TYPE_UNKNOWN | TYPE_CONTROL => Some(added(i, &tokens[i], true)),
            TYPE_USER_DEFINED => Some(added(i, &tokens[i], false)),
            _ => None,
        })
        .collect()
}

/// `TemplateProcessing` adding BOS and/or EOS, or None when neither.
fn template(tokens: &[String], bos: Option<(u32, bool)>, eos: Option<(u32, bool)>) -> Option<Json> {
    let bos = bos
        .filter(|b| b.1)
        .and_then(|(id, _)| Some((id, tokens.get(id as usize)?)));
    let eos = eos
        .filter(|e| e.1)
        .and_then(|(id, _)| Some((id, tokens.get(id as usize)?)));
    if bos.is_none() && eos.is_none() {
        return None;
    }
    let mut single = Vec::new();
    let mut pair = Vec::new();
    let mut specials = serde_json::Map::new();
    for (seq, type_id) in [("A", 0), ("B", 1)] {
        if let Some((id, t)) = bos {
            pair.push(json!({"SpecialToken": {"id": t, "type_id": type_id}}));
            specials.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
        }
        pair.push(json!({"Sequence": {"id": seq, "type_id": type_id}}));
        if let Some((id, t)) = eos {
            pair.push(json!({"SpecialToken": {"id": t, "type_id": type_id}}));
            specials.insert(t.clone(), json!({"id": t, "ids": [id], "tokens": [t]}));
        }
    }
    if let Some((_, t)) = bos {
        single.push(json!({"SpecialToken": {"id": t, "type_id": 0}}));
    }
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    if let Some((_, t)) = eos {
        single.push(json!({"SpecialToken": {"id": t, "type_id": 0}}));
    }
    Some(
        json!({"type": "TemplateProcessing", "single": single, "pair": pair,
                "special_tokens": specials}),
    )
}

#[allow(clippy::too_many_arguments)]
fn spm(
    tokens: &[String],
    scores: &[f32],
    types: &[u64],
    bos: Option<u32>,
    eos: Option<u32>,
    unk: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
) -> Json {
    let ids: HashMap<&str, usize> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    // transformers' SentencePieceExtractor: every split of a piece into two pieces is a
    // merge, ranked by the merged piece's score (then by the halves' ids).
    let mut merges: Vec<(f32, usize, usize, usize)> = Vec::new();
    for (pid, piece) in tokens.iter().enumerate() {
        if types.get(pid).copied().unwrap_or(TYPE_NORMAL) != TYPE_NORMAL {
            continue;
        }
        for (at, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(at);
            if let (Some(&li), Some(&ri)) = (ids.get(l), ids.get(r)) {
                merges.push((scores.get(pid).copied().unwrap_or(0.0), pid, li, ri));
            }
        }
    }
    merges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then((a.1, a.2, a.3).cmp(&(b.1, b.2, b.3)))
    });
    let merges: Vec<Json> = merges
        .iter()
        .map(|&(_, _, l, r)| json!([tokens[l], tokens[r]]))
        .collect();
    let vocab: serde_json::Map<String, Json> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let mut normalizers = Vec::new();
    if add_space_prefix {
        normalizers.push(json!({"type": "Prepend", "prepend": "\u{2581}"}));
    }
    normalizers.push(json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}));
    let mut decoders = vec![
        json!({"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "}),
        json!({"type": "ByteFallback"}),
        json!({"type": "Fuse"}),
    ];
    if add_space_prefix {
        decoders.push(json!({"type": "Strip", "content": " ", "start": 1, "stop": 0}));
    }
    let unk_token = unk.and_then(|u| tokens.get(u as usize)).cloned();
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added_tokens(tokens, types),
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": null,
        "post_processor": template(tokens, bos.map(|b| (b, add_bos)), eos.map(|e| (e, add_eos))),
        "decoder": {"type": "Sequence", "decoders": decoders},
        "model": {"type": "BPE", "dropout": null, "unk_token": unk_token,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
                  "vocab": vocab, "merges": merges},
    })
}

fn byte_level_bpe(
    tokens: &[String],
    merges: &[String],
    types: &[u64],
    pre: &str,
    bos: Option<u32>,
    add_bos: bool,
) -> Json {
    let byte_level = |use_regex: bool| {
        json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
               "use_regex": use_regex})
    };
    let split = |regex: &str| {
        json!({"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
               "invert": false})
    };
    let mut normalizer = Json::Null;
    let mut ignore_merges = false;
    let pre_tokenizer = match pre {
        // llama.cpp's "smollm": digits one by one, then GPT-2's regex.
        "smollm" => json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
        "llama-bpe" | "llama3" | "smaug-bpe" => {
            ignore_merges = true;
            json!({"type": "Sequence", "pretokenizers": [split(LLAMA3_REGEX), byte_level(false)]})
        }
        "qwen2" => {
            normalizer = json!({"type": "NFC"});
            json!({"type": "Sequence", "pretokenizers": [split(QWEN2_REGEX), byte_level(false)]})
        }
        _ => byte_level(true),
    };
    let byte_level_post = json!({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true});
    let post_processor = match template(tokens, bos.map(|b| (b, add_bos)), None) {
        Some(t) => json!({"type": "Sequence", "processors": [byte_level_post, t]}),
        None => byte_level_post,
    };
    let vocab: serde_json::Map<String, Json> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": added_tokens(tokens, types),
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true,
                    "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null,
                  "continuing_subword_prefix": null, "end_of_word_suffix": null,
                  "fuse_unk": false, "byte_fallback": false, "ignore_merges": ignore_merges,
                  "vocab": vocab, "merges": merges},
    })
}
