//! Contract `bench:plugin@0.4.1` (frozen in `wit/since_v0.4.1`): its bindings, the host
//! imports it links against, and the conversions of what changed since. Plugins built for
//! 0.4.0 run here too: 0.4.1 changed no interface, and wasmtime links their `@0.4.0` names
//! to these `@0.4.1` ones as semver-compatible versions.
//!
//! 0.5.0 only added the `server-timing` event to the `backend` interface, and 0.6.0 output
//! constraints to `types`. 0.4.1's `types` is 0.5.0's, taken from [`super::v0_5_0`], which
//! converts it; its `dataset` is 0.5.0's too, converted by the same macro
//! ([`super`]'s `dataset_conversions!`, with shards); its host imports are the current
//! ones, linked under 0.4.1's names. The backend's conversions are 0.3.0's
//! ([`super`]'s `backend_conversions!`): 0.4.0 and 0.4.1 did not change it.

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;

/// The version these bindings are for.
pub const VERSION: &str = "0.4.1";

/// SHA-256 of `wit/since_v0.4.1/plugin.wit`, pinned when 0.5.0 started: released contracts
/// never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "a17e757c266359d48da63ba7f59518c1df4a728de804cca69a8b663296c2c528";

plugin_worlds!("../../wit/since_v0.4.1", v0_4_1, with: {
    "bench:plugin/types": crate::bindings::v0_5_0::dataset::bench::plugin::types,
}, both: {
    // As for the current contract: WASI is wasmtime-wasi's own, linked once.
    "wasi": wasmtime_wasi::p2::bindings::sync,
});

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

link_host_imports!(VERSION, old_tokenizer, old_seed, old_log);

pass_on_host_imports!(
    old_tokenizer,
    old_seed,
    old_log,
    chat_template_of_0_5_0 { tools }
);

// The exported interfaces, in types of 0.4.1's own: the `dataset` of 0.4.0 (with shards)
// and the `backend` of 0.3.0.
dataset_conversions!(old_dataset, cur_dataset, types: v0_5_0, with_shards);
backend_conversions!(old_backend, cur_backend, types: v0_5_0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cross_whole() {
        let config = cur_dataset::DatasetConfig {
            num_requests: 9,
            path: Some("/data".into()),
            options: vec![("k".into(), "v".into())],
            shard: Some(cur_dataset::Shard { index: 1, count: 3 }),
        };
        let old = dataset_config_down(&config);
        assert_eq!(old.shard.map(|s| (s.index, s.count)), Some((1, 3)));
        assert_eq!((old.num_requests, old.options), (9, config.options));
    }
}
