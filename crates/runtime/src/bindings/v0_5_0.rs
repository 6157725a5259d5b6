//! Contract `bench:plugin@0.5.0` (frozen in `wit/since_v0.5.0`): its bindings, the host
//! imports it links against, and the conversions of what changed since.
//!
//! 0.6.0 added one thing: a request can carry an output constraint (structured output), a
//! new last field of `types.request-spec`. Because `types` changed, no older version can
//! take it from [`super::current`] any more. 0.3.0, 0.4.x and 0.5.0 share one `types`
//! interface, so its bindings are generated here, once, and [`super::v0_3_0`] and
//! [`super::v0_4_1`] take them from these (bindgen's `with`). The conversions between those
//! types and the current ones (requests up from a dataset and down into a backend, plugin
//! descriptions and errors up, chat messages up for the tokenizer) are therefore written
//! here once for the three adapters. A request from an old dataset has no constraint; a
//! request with one is refused by an old backend, with an error naming its version
//! ([`request_spec_down`]), rather than sent without it: the run would measure free text
//! while the user asked for structured output.
//!
//! The exported interfaces did not change in 0.6.0, but each version's bindgen makes types
//! of its own for them: their conversions are [`super`]'s macros (`dataset_conversions!`,
//! `backend_conversions!`), expanded here over 0.5.0's bindings.

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::bench::plugin::types as cur;
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;

/// The version these bindings are for.
pub const VERSION: &str = "0.5.0";

/// SHA-256 of `wit/since_v0.5.0/plugin.wit`, pinned when 0.6.0 started: released contracts
/// never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "31522e95fd89d04237f8d378600464a690f3a125da9f319673fdc3e43005cb06";

plugin_worlds!("../../wit/since_v0.5.0", v0_5_0, with: {}, both: {
    // As for the current contract: WASI is wasmtime-wasi's own, linked once.
    "wasi": wasmtime_wasi::p2::bindings::sync,
});

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::types as old;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

link_host_imports!(VERSION, old_tokenizer, old_seed, old_log);

pass_on_host_imports!(
    old_tokenizer,
    old_seed,
    old_log,
    chat_template_of_0_5_0 { tools }
);

// The `types` interface of 0.3.0 to 0.5.0, up to the current one and down.

impl From<old::PluginError> for cur::PluginError {
    fn from(e: old::PluginError) -> cur::PluginError {
        match e {
            old::PluginError::InvalidConfig(m) => cur::PluginError::InvalidConfig(m),
            old::PluginError::InvalidInput(m) => cur::PluginError::InvalidInput(m),
            old::PluginError::Unsupported(m) => cur::PluginError::Unsupported(m),
            old::PluginError::Internal(m) => cur::PluginError::Internal(m),
        }
    }
}

fn option_info_up(o: old::OptionInfo) -> cur::OptionInfo {
    cur::OptionInfo {
        name: o.name,
        description: o.description,
        default_value: o.default_value,
        required: o.required,
        cli_flag: o.cli_flag,
        kind: match o.kind {
            old::OptionKind::Text => cur::OptionKind::Text,
            old::OptionKind::Count => cur::OptionKind::Count,
            old::OptionKind::Integer => cur::OptionKind::Integer,
            old::OptionKind::Number => cur::OptionKind::Number,
            old::OptionKind::Switch => cur::OptionKind::Switch,
        },
        choices: o.choices,
        shared_flags: o
            .shared_flags
            .into_iter()
            .map(|f| match f {
                old::SharedFlag::InputLen => cur::SharedFlag::InputLen,
                old::SharedFlag::OutputLen => cur::SharedFlag::OutputLen,
            })
            .collect(),
    }
}

pub(crate) fn plugin_info_up(info: old::PluginInfo) -> cur::PluginInfo {
    cur::PluginInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        options: info.options.into_iter().map(option_info_up).collect(),
    }
}

fn content_part_up(p: old::ContentPart) -> cur::ContentPart {
    match p {
        old::ContentPart::Text(t) => cur::ContentPart::Text(t),
        old::ContentPart::ImageUrl(u) => cur::ContentPart::ImageUrl(u),
        old::ContentPart::AudioUrl(u) => cur::ContentPart::AudioUrl(u),
        old::ContentPart::VideoUrl(u) => cur::ContentPart::VideoUrl(u),
        old::ContentPart::Binary(b) => cur::ContentPart::Binary(cur::BinaryData {
            mime_type: b.mime_type,
            file_name: b.file_name,
            data: b.data,
        }),
    }
}

fn content_part_down(p: &cur::ContentPart) -> old::ContentPart {
    match p {
        cur::ContentPart::Text(t) => old::ContentPart::Text(t.clone()),
        cur::ContentPart::ImageUrl(u) => old::ContentPart::ImageUrl(u.clone()),
        cur::ContentPart::AudioUrl(u) => old::ContentPart::AudioUrl(u.clone()),
        cur::ContentPart::VideoUrl(u) => old::ContentPart::VideoUrl(u.clone()),
        cur::ContentPart::Binary(b) => old::ContentPart::Binary(old::BinaryData {
            mime_type: b.mime_type.clone(),
            file_name: b.file_name.clone(),
            data: b.data.clone(),
        }),
    }
}

/// Also what the tokenizer's chat-template imports of 0.3.0 to 0.5.0 pass on
/// (`pass_on_host_imports!`'s `chat_template_of_0_5_0`).
pub(crate) fn chat_messages_up(messages: Vec<old::ChatMessage>) -> Vec<cur::ChatMessage> {
    messages
        .into_iter()
        .map(|m| cur::ChatMessage {
            role: m.role,
            content: m.content.into_iter().map(content_part_up).collect(),
        })
        .collect()
}

fn chat_message_down(m: &cur::ChatMessage) -> old::ChatMessage {
    old::ChatMessage {
        role: m.role.clone(),
        content: m.content.iter().map(content_part_down).collect(),
    }
}

fn session_up(s: old::Session) -> cur::Session {
    cur::Session {
        id: s.id,
        turn: s.turn,
    }
}

/// Also the session of a `turn-result` (`dataset_conversions!`).
pub(crate) fn session_down(s: &cur::Session) -> old::Session {
    old::Session {
        id: s.id.clone(),
        turn: s.turn,
    }
}

/// A request from a dataset of 0.3.0 to 0.5.0: it has no output constraint.
pub(crate) fn request_spec_up(s: old::RequestSpec) -> cur::RequestSpec {
    cur::RequestSpec {
        prompt: match s.prompt {
            old::Prompt::Text(t) => cur::Prompt::Text(t),
            old::Prompt::TokenIds(ids) => cur::Prompt::TokenIds(ids),
            old::Prompt::Chat(messages) => cur::Prompt::Chat(chat_messages_up(messages)),
            old::Prompt::Texts(texts) => cur::Prompt::Texts(texts),
            old::Prompt::Rerank(r) => cur::Prompt::Rerank(cur::RerankInput {
                query: r.query,
                documents: r.documents,
            }),
        },
        prompt_len: s.prompt_len,
        expected_output_len: s.expected_output_len,
        multimodal: s.multimodal.into_iter().map(content_part_up).collect(),
        request_id: s.request_id,
        lora_name: s.lora_name,
        extra_body: s.extra_body,
        send_at: s.send_at,
        session: s.session.map(session_up),
        output_constraint: None,
    }
}

/// Refuses to hand a backend built for `version` (before 0.6.0) a request that carries an
/// output constraint: such a backend cannot send it, and the request without it would not
/// be the one asked for (the run would measure free text while the user asked for
/// structured output).
pub(crate) fn refuse_output_constraint(s: &cur::RequestSpec, version: &str) -> Result<(), String> {
    let Some(constraint) = &s.output_constraint else {
        return Ok(());
    };
    let kind = match constraint {
        cur::OutputConstraint::JsonSchema(_) => "json-schema",
        cur::OutputConstraint::Regex(_) => "regex",
        cur::OutputConstraint::Choice(_) => "choice",
        cur::OutputConstraint::Grammar(_) => "grammar",
    };
    Err(format!(
        "the request carries an output constraint ({kind}), which a backend built for \
         bench:plugin@{version} cannot send: structured output came with bench:plugin@0.6.0; \
         rebuild the backend against 0.6.0 or later to send it"
    ))
}

/// The form of a request a backend built for `version` (0.3.0 to 0.5.0) takes, or why it
/// cannot take it ([`refuse_output_constraint`]).
pub(crate) fn request_spec_down(
    s: &cur::RequestSpec,
    version: &str,
) -> Result<old::RequestSpec, String> {
    refuse_output_constraint(s, version)?;
    Ok(old::RequestSpec {
        prompt: match &s.prompt {
            cur::Prompt::Text(t) => old::Prompt::Text(t.clone()),
            cur::Prompt::TokenIds(ids) => old::Prompt::TokenIds(ids.clone()),
            cur::Prompt::Chat(messages) => {
                old::Prompt::Chat(messages.iter().map(chat_message_down).collect())
            }
            cur::Prompt::Texts(texts) => old::Prompt::Texts(texts.clone()),
            cur::Prompt::Rerank(r) => old::Prompt::Rerank(old::RerankInput {
                query: r.query.clone(),
                documents: r.documents.clone(),
            }),
        },
        prompt_len: s.prompt_len,
        expected_output_len: s.expected_output_len,
        multimodal: s.multimodal.iter().map(content_part_down).collect(),
        request_id: s.request_id.clone(),
        lora_name: s.lora_name.clone(),
        extra_body: s.extra_body.clone(),
        send_at: s.send_at,
        session: s.session.as_ref().map(session_down),
    })
}

// The exported interfaces, in types of 0.5.0's own: the `dataset` of 0.4.0 (with shards)
// and the `backend` of 0.3.0 with 0.5.0's `server-timing` event.

dataset_conversions!(old_dataset, cur_dataset, types: v0_5_0, with_shards);

backend_conversions!(old_backend, cur_backend, types: v0_5_0, more_events: {
    old_backend::EventKind::ServerTiming(t) => {
        cur_backend::EventKind::ServerTiming(cur_backend::ServerTiming {
            queue_time_ms: t.queue_time_ms,
            time_to_first_token_ms: t.time_to_first_token_ms,
            generation_time_ms: t.generation_time_ms,
            mean_itl_ms: t.mean_itl_ms,
        })
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> cur::RequestSpec {
        cur::RequestSpec {
            prompt: cur::Prompt::Chat(vec![cur::ChatMessage {
                role: "user".into(),
                content: vec![
                    cur::ContentPart::Text("hi".into()),
                    cur::ContentPart::Binary(cur::BinaryData {
                        mime_type: "image/png".into(),
                        file_name: "a.png".into(),
                        data: vec![1, 2],
                    }),
                ],
            }]),
            prompt_len: 3,
            expected_output_len: 7,
            multimodal: vec![cur::ContentPart::AudioUrl("a".into())],
            request_id: Some("r-1".into()),
            lora_name: Some("l".into()),
            extra_body: Some("{}".into()),
            send_at: Some(1.5),
            session: Some(cur::Session {
                id: "s".into(),
                turn: 2,
            }),
            output_constraint: None,
        }
    }

    #[test]
    fn requests_without_a_constraint_cross_whole() {
        let spec = request();
        let back = request_spec_up(request_spec_down(&spec, VERSION).unwrap());
        assert_eq!(format!("{back:?}"), format!("{spec:?}"));
        let rerank = cur::RequestSpec {
            prompt: cur::Prompt::Rerank(cur::RerankInput {
                query: "q".into(),
                documents: vec!["d".into()],
            }),
            ..spec
        };
        let back = request_spec_up(request_spec_down(&rerank, VERSION).unwrap());
        assert_eq!(format!("{back:?}"), format!("{rerank:?}"));
    }

    #[test]
    fn a_constraint_is_refused_naming_the_backends_version_and_the_one_it_needs() {
        let spec = cur::RequestSpec {
            output_constraint: Some(cur::OutputConstraint::Choice(vec!["yes".into()])),
            ..request()
        };
        let err = request_spec_down(&spec, "0.4.0").unwrap_err();
        for part in [
            "(choice)",
            "bench:plugin@0.4.0",
            "0.6.0",
            "rebuild the backend",
        ] {
            assert!(err.contains(part), "{part}: {err}");
        }
    }

    #[test]
    fn descriptions_keep_their_flags() {
        let info = old::PluginInfo {
            name: "n".into(),
            version: "1".into(),
            description: "d".into(),
            options: vec![old::OptionInfo {
                name: "len".into(),
                description: "how long".into(),
                default_value: Some("4".into()),
                required: false,
                cli_flag: Some("len".into()),
                kind: old::OptionKind::Count,
                choices: vec!["4".into()],
                shared_flags: vec![old::SharedFlag::OutputLen],
            }],
        };
        let up = plugin_info_up(info);
        let o = &up.options[0];
        assert_eq!(o.cli_flag.as_deref(), Some("len"));
        assert_eq!(o.kind, cur::OptionKind::Count);
        assert_eq!(o.shared_flags, [cur::SharedFlag::OutputLen]);
        assert_eq!(
            (o.choices.len(), o.default_value.as_deref()),
            (1, Some("4"))
        );
    }

    #[test]
    fn server_timing_events_cross() {
        let decoded = old_backend::Decoded {
            chunks: old_backend::Chunks {
                frames: vec![],
                spans: vec![],
                escaped: vec![],
                tokens: vec![],
            },
            events: vec![old_backend::Event {
                frame: 0,
                kind: old_backend::EventKind::ServerTiming(old_backend::ServerTiming {
                    queue_time_ms: Some(1.0),
                    time_to_first_token_ms: Some(2.0),
                    generation_time_ms: None,
                    mean_itl_ms: Some(4.0),
                }),
            }],
        };
        let up = decoded_up(decoded);
        let cur_backend::EventKind::ServerTiming(t) = &up.events[0].kind else {
            panic!("{:?}", up.events[0].kind);
        };
        assert_eq!(
            (
                t.queue_time_ms,
                t.time_to_first_token_ms,
                t.generation_time_ms
            ),
            (Some(1.0), Some(2.0), None)
        );
        assert_eq!(t.mean_itl_ms, Some(4.0));
    }
}
