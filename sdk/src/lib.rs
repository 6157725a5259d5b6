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
//! The bindings are generated from `wit/` (package `bench:plugin@0.2.0`); the helpers here
//! (options, the JSON scanner, numpy's and Python's random generators) are shared by every
//! first-party plugin so that none of them carries its own copy.

pub mod backend;
pub mod dataset;
pub mod host;
pub mod json;
pub mod openai;
pub mod options;
pub mod rng;
pub mod sampling;

/// Bindings of the `dataset-plugin` world. Plugin authors use the re-exports below.
#[doc(hidden)]
pub mod dataset_bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "dataset-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_dataset_world",
        default_bindings_module: "bench_sdk::dataset_bindings",
    });
}

/// Bindings of the `backend-plugin` world, sharing the types of the dataset world.
#[doc(hidden)]
pub mod backend_bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "backend-plugin",
        pub_export_macro: true,
        export_macro_name: "__export_backend_world",
        default_bindings_module: "bench_sdk::backend_bindings",
        with: {
            "bench:plugin/types@0.2.0": crate::dataset_bindings::bench::plugin::types,
            "bench:plugin/tokenizer@0.2.0": crate::dataset_bindings::bench::plugin::tokenizer,
            "bench:plugin/seed@0.2.0": crate::dataset_bindings::bench::plugin::seed,
            "bench:plugin/log@0.2.0": crate::dataset_bindings::bench::plugin::log,
        },
    });
}

pub use backend::{Backend, Chunk, Decoder, Event, EventKind, TextSpan};
pub use backend_bindings::exports::bench::plugin::backend::{
    ClientConfig, Framing, HttpRequest, ResponseHead, Usage,
};
pub use dataset::Dataset;
pub use dataset_bindings::bench::plugin::types::{
    ChatMessage, ContentPart, OptionInfo, Options, PluginError, PluginInfo, Prompt, RequestSpec,
};
pub use dataset_bindings::exports::bench::plugin::dataset::DatasetConfig;
pub use options::OptionReader;

/// The WIT package version this SDK builds plugins for.
pub const API_VERSION: &str = "0.2.0";

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
        }
    }
}
