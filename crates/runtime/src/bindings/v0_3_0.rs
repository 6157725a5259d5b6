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
//! conversions are written once here, as macros that the later adapters expand over their
//! own bindings: [`dataset_conversions`] (the `dataset` of 0.3.0, and of 0.4.0 on with
//! shards) and [`backend_conversions`] (the `backend` of 0.3.0 to 0.4.1, and of 0.5.0 with
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

/// The conversions of the `dataset` interface's own types, up to the current ones and
/// down, over a version's own bindings (named `$old` in the calling module, the current
/// ones `$cur`): 0.3.0's (`without_shards`) or, from 0.4.0 on, with a `shardable`
/// description and a `shard` in the config (`with_shards`). Their `types` are 0.5.0's,
/// converted by [`super::v0_5_0`].
macro_rules! dataset_conversions {
    ($old:ident, $cur:ident, without_shards) => {
        // 0.3.0's datasets are never shardable.
        $crate::bindings::v0_3_0::dataset_conversions!(@description $old, $cur, |_| false);

        pub(crate) fn dataset_config_down(c: &$cur::DatasetConfig) -> $old::DatasetConfig {
            $old::DatasetConfig {
                num_requests: c.num_requests,
                path: c.path.clone(),
                options: c.options.clone(),
            }
        }
    };
    ($old:ident, $cur:ident, with_shards) => {
        $crate::bindings::v0_3_0::dataset_conversions!(@description $old, $cur, |d| d.shardable);

        pub(crate) fn dataset_config_down(c: &$cur::DatasetConfig) -> $old::DatasetConfig {
            $old::DatasetConfig {
                num_requests: c.num_requests,
                path: c.path.clone(),
                options: c.options.clone(),
                shard: c.shard.as_ref().map(|s| $old::Shard {
                    index: s.index,
                    count: s.count,
                }),
            }
        }
    };
    // What both have: `$shardable` says, from the old description, whether the dataset is.
    (@description $old:ident, $cur:ident, $shardable:expr) => {
        pub(crate) fn dataset_description_up(
            d: $old::DatasetDescription,
        ) -> $cur::DatasetDescription {
            let shardable: fn(&$old::DatasetDescription) -> bool = $shardable;
            $cur::DatasetDescription {
                shardable: shardable(&d),
                info: crate::bindings::v0_5_0::plugin_info_up(d.info),
                path: match d.path {
                    $old::PathUse::Refused => $cur::PathUse::Refused,
                    $old::PathUse::Optional => $cur::PathUse::Optional,
                    $old::PathUse::Required => $cur::PathUse::Required,
                },
                ignore_eos_by_default: d.ignore_eos_by_default,
                align_to_server_tokenizer: d.align_to_server_tokenizer,
                multi_turn: d.multi_turn,
            }
        }

        pub(crate) fn turn_result_down(t: &$cur::TurnResult) -> $old::TurnResult {
            $old::TurnResult {
                session: crate::bindings::v0_5_0::session_down(&t.session),
                success: t.success,
                generated_text: t.generated_text.clone(),
                ttft: t.ttft,
                latency: t.latency,
                finished_at: t.finished_at,
            }
        }
    };
}
pub(super) use dataset_conversions;

dataset_conversions!(old_dataset, cur_dataset, without_shards);

/// The conversions of the `backend` interface as 0.3.0 defined it, up to the current one
/// and down; 0.4.0 and 0.4.1 kept it unchanged, and 0.5.0 only added the `server-timing`
/// event (its arm of `event_kind_up` given as `more_events`), so [`super::v0_4_1`] and
/// [`super::v0_5_0`] expand them too, over their own bindings (named `$old` in the calling
/// module, the current ones `$cur`). Each version's bindgen makes types of its own for an
/// interface its plugins export, even one the same as another version's, so the
/// conversions are written once and made for each.
macro_rules! backend_conversions {
    ($old:ident, $cur:ident $(, more_events: { $($more_events:tt)* })?) => {
        pub(crate) fn backend_description_up(
            d: $old::BackendDescription,
        ) -> $cur::BackendDescription {
            $cur::BackendDescription {
                info: crate::bindings::v0_5_0::plugin_info_up(d.info),
                openai_compatible: d.openai_compatible,
            }
        }

        pub(crate) fn client_config_down(c: &$cur::ClientConfig) -> $old::ClientConfig {
            $old::ClientConfig {
                model: c.model.clone(),
                ignore_eos: c.ignore_eos,
                stream: c.stream,
                extra_body: c.extra_body.clone(),
                options: c.options.clone(),
            }
        }

        pub(crate) fn framing_up(f: $old::Framing) -> $cur::Framing {
            match f {
                $old::Framing::Sse => $cur::Framing::Sse,
                $old::Framing::Ndjson => $cur::Framing::Ndjson,
                $old::Framing::Raw => $cur::Framing::Raw,
            }
        }

        pub(crate) fn http_request_up(r: $old::HttpRequest) -> $cur::HttpRequest {
            $cur::HttpRequest {
                method: r.method,
                headers: r.headers,
                body: r.body,
            }
        }

        pub(crate) fn response_head_down(h: &$cur::ResponseHead) -> $old::ResponseHead {
            $old::ResponseHead {
                status: h.status,
                headers: h.headers.clone(),
            }
        }

        fn event_kind_up(k: $old::EventKind) -> $cur::EventKind {
            match k {
                $old::EventKind::Usage(u) => $cur::EventKind::Usage($cur::Usage {
                    prompt_tokens: u.prompt_tokens,
                    completion_tokens: u.completion_tokens,
                    cached_prompt_tokens: u.cached_prompt_tokens,
                }),
                $old::EventKind::Finish(reason) => $cur::EventKind::Finish(reason),
                $old::EventKind::Error(e) => $cur::EventKind::Error($cur::ErrorEvent {
                    kind: match e.kind {
                        $old::ErrorKind::Server => $cur::ErrorKind::Server,
                        $old::ErrorKind::MalformedFrame => $cur::ErrorKind::MalformedFrame,
                    },
                    message: e.message,
                }),
                $old::EventKind::Pooled(p) => $cur::EventKind::Pooled($cur::Pooled {
                    kind: match p.kind {
                        $old::PooledKind::Embedding => $cur::PooledKind::Embedding,
                        $old::PooledKind::Score => $cur::PooledKind::Score,
                        $old::PooledKind::Classification => $cur::PooledKind::Classification,
                        $old::PooledKind::Other => $cur::PooledKind::Other,
                    },
                    count: p.count,
                    dimension: p.dimension,
                }),
                $($($more_events)*)?
            }
        }

        pub(crate) fn decoded_up(d: $old::Decoded) -> $cur::Decoded {
            let $old::Chunks {
                frames,
                spans,
                escaped,
                tokens,
            } = d.chunks;
            $cur::Decoded {
                chunks: $cur::Chunks {
                    frames,
                    spans,
                    escaped,
                    tokens,
                },
                events: d
                    .events
                    .into_iter()
                    .map(|e| $cur::Event {
                        frame: e.frame,
                        kind: event_kind_up(e.kind),
                    })
                    .collect(),
            }
        }
    };
}
pub(super) use backend_conversions;

backend_conversions!(old_backend, cur_backend);

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
