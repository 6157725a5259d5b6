//! bench-engine's tests, in one binary (one link of candle instead of one per file).

mod common;
mod errors;
mod generation;
mod quantized;
mod reference;
#[path = "../../../../tests/common/skip.rs"]
mod skip;
mod smollm2;
mod tokenizer;
