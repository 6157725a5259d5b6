//! Contract `bench:plugin@0.6.0` (frozen in `wit/since_v0.6.0`): its bindings, the host
//! imports it links against, and the conversions of what changed since.
//!
//! 0.7.0 changed only the `dataset` interface: a source's `next-batch` returns samples (a
//! request and its reference, for graded datasets) and the interface gained `grade`.
//! 0.6.0's `types` is therefore the current one, taken from [`super::current`] (bindgen's
//! `with`): its requests, descriptions and errors need no conversion, and a 0.6.0 backend
//! takes the very requests the host makes. What is left: the host imports under 0.6.0's
//! names, the `dataset` and `backend` interfaces' own types (each version's bindgen makes
//! types of its own for the interfaces its plugins export), converted by [`super`]'s macros.
//! A 0.6.0 batch becomes samples without references in `crate::dataset`, as every older
//! version's does: a dataset built before 0.7.0 grades nothing.

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::bench::plugin::types as cur;
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;

/// The version these bindings are for.
pub const VERSION: &str = "0.6.0";

/// SHA-256 of `wit/since_v0.6.0/plugin.wit`, pinned when 0.7.0 started: released contracts
/// never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "ce51c7926a625b168a0b2b26f7bba83bcf412707a3898d64dd257671df9b311a";

plugin_worlds!("../../wit/since_v0.6.0", v0_6_0, with: {
    "bench:plugin/types": crate::bindings::current::dataset::bench::plugin::types,
}, both: {
    // As for the current contract: WASI is wasmtime-wasi's own, linked once.
    "wasi": wasmtime_wasi::p2::bindings::sync,
});

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

link_host_imports!(VERSION, old_tokenizer, old_seed, old_log);

pass_on_host_imports!(old_tokenizer, old_seed, old_log, chat_template_current);

/// The plugin description as it is: 0.6.0's `types` is the current one (the conversion
/// macros ask every version's `types` module for it).
pub(crate) fn plugin_info_up(info: cur::PluginInfo) -> cur::PluginInfo {
    info
}

/// A turn's session as it is (see [`plugin_info_up`]).
pub(crate) fn session_down(s: &cur::Session) -> cur::Session {
    s.clone()
}

// The exported interfaces, in types of 0.6.0's own: the `dataset` of 0.4.0 (with shards)
// and the `backend` of 0.5.0 (with its `server-timing` event).

dataset_conversions!(old_dataset, cur_dataset, types: v0_6_0, with_shards);

backend_conversions!(old_backend, cur_backend, types: v0_6_0, more_events: {
    old_backend::EventKind::ServerTiming(t) => {
        cur_backend::EventKind::ServerTiming(cur_backend::ServerTiming {
            queue_time_ms: t.queue_time_ms,
            time_to_first_token_ms: t.time_to_first_token_ms,
            generation_time_ms: t.generation_time_ms,
            mean_itl_ms: t.mean_itl_ms,
        })
    }
});
