//! A GGUF file's metadata values read by key, for the model loader and the tokenizer.

use candle_core::quantized::gguf_file::{Content, Value};

pub(crate) fn md_str(c: &Content, key: &str) -> Option<String> {
    c.metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .cloned()
}

pub(crate) fn md_u32(c: &Content, key: &str) -> Option<u32> {
    c.metadata.get(key).and_then(value_u64).map(|v| v as u32)
}

pub(crate) fn value_u64(v: &Value) -> Option<u64> {
    match v {
        Value::U8(v) => Some(*v as u64),
        Value::I8(v) => Some(*v as u64),
        Value::U16(v) => Some(*v as u64),
        Value::I16(v) => Some(*v as u64),
        Value::U32(v) => Some(*v as u64),
        Value::I32(v) => Some(*v as u64),
        Value::U64(v) => Some(*v),
        Value::I64(v) => Some(*v as u64),
        _ => None,
    }
}
