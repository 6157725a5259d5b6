//! Contract `bench:plugin@0.3.0` (frozen in `wit/since_v0.3.0`): its bindings, the host
//! imports it links against, and the conversions of what changed since.
//!
//! 0.4.0 and 0.5.0 only added to 0.3.0, and 0.6.0 changed `types`, so 0.3.0's `types`
//! interface is 0.5.0's, taken from [`super::v0_5_0`], which converts its requests,
//! prompts and errors to the current ones; its `seed` and `log` are the current ones but
//! must be linked under 0.3.0's names. What changed besides: the tokenizer gained a chat
//! template with tools (which a 0.3.0 plugin cannot call), a dataset can be sharded (0.3.0's
//! datasets are not: the host opens one source, and a host asked for a shard never passes
//! one down, as it asks only shardable sources), and a response can carry the server's
//! timing (0.5.0's `server-timing` event, which 0.3.0's decoders never send). Its exported
//! interfaces are generated for each version that has them, even unchanged, so their
//! conversions are written once, as macros in [`super`] that each adapter expands over its
//! own bindings: `dataset_conversions!` (the `dataset` of 0.3.0, and of 0.4.0 on with
//! shards) and `backend_conversions!` (the `backend` of 0.3.0 to 0.4.1, and of 0.5.0 with
//! its `server-timing` event).

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;

/// The version these bindings are for.
pub const VERSION: &str = "0.3.0";

/// SHA-256 of `wit/since_v0.3.0/plugin.wit`: released contracts never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "d802e7a045c5e267d58f8d0cbcfbd81d8cc7c6b8f127ce88f6bc07e01f7550bf";

plugin_worlds!("../../wit/since_v0.3.0", v0_3_0, with: {
    "bench:plugin/types": crate::bindings::v0_5_0::dataset::bench::plugin::types,
}, both: {});

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

link_host_imports!(VERSION, old_tokenizer, old_seed, old_log);

pass_on_host_imports!(old_tokenizer, old_seed, old_log, chat_template_of_0_5_0 {});

dataset_conversions!(old_dataset, cur_dataset, types: v0_5_0, without_shards);

backend_conversions!(old_backend, cur_backend, types: v0_5_0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_keep_their_kinds() {
        let decoded = old_backend::Decoded {
            chunks: old_backend::Chunks {
                frames: vec![0],
                spans: vec![0, 1, 0, 0],
                escaped: vec![0],
                tokens: vec![2],
            },
            events: vec![
                old_backend::Event {
                    frame: 0,
                    kind: old_backend::EventKind::Error(old_backend::ErrorEvent {
                        kind: old_backend::ErrorKind::MalformedFrame,
                        message: "bad".into(),
                    }),
                },
                old_backend::Event {
                    frame: 0,
                    kind: old_backend::EventKind::Pooled(old_backend::Pooled {
                        kind: old_backend::PooledKind::Score,
                        count: 3,
                        dimension: 1,
                    }),
                },
            ],
        };
        let up = decoded_up(decoded);
        assert_eq!(up.chunks.tokens, vec![2]);
        assert!(matches!(
            &up.events[0].kind,
            cur_backend::EventKind::Error(cur_backend::ErrorEvent {
                kind: cur_backend::ErrorKind::MalformedFrame,
                ..
            })
        ));
        assert!(matches!(
            &up.events[1].kind,
            cur_backend::EventKind::Pooled(cur_backend::Pooled {
                kind: cur_backend::PooledKind::Score,
                count: 3,
                ..
            })
        ));
    }
}
