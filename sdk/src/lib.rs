//! `bench-sdk`: what a plugin author depends on.
//!
//! A plugin is a struct and a trait impl:
//!
//! ```ignore
//! use bench_sdk::{Dataset, DatasetConfig, PluginError, PluginInfo, RequestSpec};
//!
//! struct MyDataset { /* ... */ }
//! impl Dataset for MyDataset { /* describe, open, next_batch */ }
//! bench_sdk::export_dataset!(MyDataset);
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release` and pass the `.wasm` to
//! `bench --plugin` (datasets) or `bench --backend` (backends).
//!
//! The bindings are generated from `wit/current` (the package version is [`API_VERSION`]);
//! the helpers here (options, the JSON scanner, numpy's and Python's random generators) are
//! shared by every first-party plugin so that none of them carries its own copy.
//!
//! A backend's decoder walks its frames with [`backend::frames`] and builds every text span
//! with [`Frame::span`] from the offsets a [`json::Cursor`] over the frame gives; its tests
//! fuzz it with `bench_sdk::testing` (feature `testing`), the harness the first-party
//! decoders are tested with.

#[cfg(feature = "audio")]
pub mod audio;
pub mod backend;
pub mod completions;
pub mod conversation;
pub mod custom;
pub mod dataset;
pub mod delta_shape;
pub mod grading;
pub mod host;
pub mod json;
pub mod lengths;
#[cfg(feature = "media")]
pub mod media;
pub mod multipart;
pub mod native;
pub mod openai;
pub mod options;
pub mod pooling;
pub mod questions;
pub mod rng;
pub mod sampling;
mod server_error;
pub mod structured;
pub mod synthetic;
#[cfg(feature = "table")]
pub mod table;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "table")]
pub mod trace;
#[cfg(feature = "media")]
pub mod video;

// The generated bindings (`dataset_bindings`, `backend_bindings`): see `build.rs`.
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

pub use backend::{Backend, Chunk, Decoder, Event, EventKind, Frame, TextSpan};
pub use backend_bindings::exports::bench::plugin::backend::{
    BackendDescription, ClientConfig, ErrorEvent, ErrorKind, Framing, HttpRequest, Pooled,
    PooledKind, ResponseHead, ServerTiming, Usage,
};
pub use dataset::Dataset;
pub use dataset_bindings::bench::plugin::types::{
    BinaryData, ChatMessage, ContentPart, OptionInfo, OptionKind, Options, OutputConstraint,
    PluginError, PluginInfo, Prompt, RequestSpec, RerankInput, Session, SharedFlag,
};
pub use dataset_bindings::exports::bench::plugin::dataset::{
    DatasetConfig, DatasetDescription, PathUse, Sample, Shard, TurnResult, Verdict,
};
pub use options::OptionReader;

/// The WIT package version this SDK builds plugins for (from `wit/current`'s `package`
/// line, read by `build.rs`).
pub const API_VERSION: &str = env!("BENCH_PLUGIN_API_VERSION");

impl RequestSpec {
    /// A text prompt with the given lengths and nothing else set.
    pub fn text(prompt: String, prompt_len: u32, expected_output_len: u32) -> Self {
        RequestSpec {
            prompt: Prompt::Text(prompt),
            prompt_len,
            expected_output_len,
            multimodal: Vec::new(),
            request_id: None,
            lora_name: None,
            extra_body: None,
            send_at: None,
            session: None,
            output_constraint: None,
        }
    }
}

impl DatasetDescription {
    /// A dataset described by `info` that takes `--dataset-path` when given one and asks
    /// for none of the host's per-dataset rules; the builder methods below add them.
    pub fn new(info: PluginInfo) -> Self {
        DatasetDescription {
            info,
            path: PathUse::Optional,
            ignore_eos_by_default: false,
            align_to_server_tokenizer: false,
            multi_turn: false,
            shardable: false,
        }
    }

    /// How the dataset uses `--dataset-path`.
    pub fn path(mut self, path: PathUse) -> Self {
        self.path = path;
        self
    }

    /// vLLM's rule for synthetic datasets: OpenAI-compatible servers ignore EOS by default.
    pub fn ignore_eos_by_default(mut self) -> Self {
        self.ignore_eos_by_default = true;
        self
    }

    /// Prompts are token ids the host re-tokenises with the server's tokenizer where the
    /// server offers `/tokenize`, as vLLM does for its synthetic datasets.
    pub fn align_to_server_tokenizer(mut self) -> Self {
        self.align_to_server_tokenizer = true;
        self
    }

    /// The source continues conversations: [`Dataset::next_turn`] is called.
    pub fn multi_turn(mut self) -> Self {
        self.multi_turn = true;
        self
    }

    /// The source makes the shard `DatasetConfig::shard` asks for ([`dataset::Positions`]),
    /// so the host prepares the workload with one instance per core. Worth it where making
    /// a request costs far more than drawing its random numbers (encoded images).
    pub fn shardable(mut self) -> Self {
        self.shardable = true;
        self
    }
}
