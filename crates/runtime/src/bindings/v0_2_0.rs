//! Contract `bench:plugin@0.2.0` (frozen in `wit/since_v0.2.0`): its bindings, the host
//! imports it links against, and the conversions between its types and the current ones.
//!
//! What a 0.2.0 plugin cannot say gets the neutral value: its options have no flags of
//! their own (they are set with `--dataset-option`/`--backend-option`), its dataset takes
//! `--dataset-path` when given one and asks for none of vLLM's per-dataset rules, its
//! backend is not declared OpenAI-compatible, its chunks carry no token counts. A request
//! that only 0.3.0 can express (a batch of texts, a rerank query, binary data) is refused
//! with an error naming the version, as is one with an output constraint (0.6.0's
//! structured output). Its error events carry only a message: bench-sdk 0.2.0's OpenAI
//! decoder wrote every frame it could not parse as `invalid JSON ...`, a wording frozen with
//! that SDK, so such events count as malformed frames and every other one as the server's
//! error.

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::bench::plugin::types as cur;
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;
use crate::host::StoreState;

/// The version these bindings are for.
pub const VERSION: &str = "0.2.0";

/// SHA-256 of `wit/since_v0.2.0/plugin.wit`: released contracts never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "2659581f1407164153b17b18bf5adfc6c06bd3b215483ac5ba83005b1d55e04e";

plugin_worlds!("../../wit/since_v0.2.0", v0_2_0, with: {}, both: {});

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::types as old;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

// The host imports of 0.2.0 are those of the current contract: each call is passed on.

impl old::Host for StoreState {}

pass_on_host_imports!(old_tokenizer, old_seed, old_log, {
    fn apply_chat_template(
        &mut self,
        messages: Vec<old::ChatMessage>,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let messages = messages.into_iter().map(chat_message_up).collect();
        cur_tokenizer::Host::apply_chat_template(self, messages, add_generation_prompt)
    }
});

// Types, up (0.2.0 to current) and down.

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

pub(crate) fn plugin_info_up(info: old::PluginInfo) -> cur::PluginInfo {
    cur::PluginInfo {
        name: info.name,
        version: info.version,
        description: info.description,
        options: info
            .options
            .into_iter()
            .map(|o| cur::OptionInfo {
                name: o.name,
                description: o.description,
                default_value: o.default_value,
                required: o.required,
                cli_flag: None,
                kind: cur::OptionKind::Text,
                choices: Vec::new(),
                shared_flags: Vec::new(),
            })
            .collect(),
    }
}

pub(crate) fn dataset_description_up(info: old::PluginInfo) -> cur_dataset::DatasetDescription {
    cur_dataset::DatasetDescription {
        info: plugin_info_up(info),
        path: cur_dataset::PathUse::Optional,
        ignore_eos_by_default: false,
        align_to_server_tokenizer: false,
        multi_turn: false,
        shardable: false,
    }
}

pub(crate) fn backend_description_up(info: old::PluginInfo) -> cur_backend::BackendDescription {
    cur_backend::BackendDescription {
        info: plugin_info_up(info),
        openai_compatible: false,
    }
}

pub(crate) fn dataset_config_down(c: &cur_dataset::DatasetConfig) -> old_dataset::DatasetConfig {
    old_dataset::DatasetConfig {
        num_requests: c.num_requests,
        path: c.path.clone(),
        options: c.options.clone(),
    }
}

fn content_part_up(p: old::ContentPart) -> cur::ContentPart {
    match p {
        old::ContentPart::Text(t) => cur::ContentPart::Text(t),
        old::ContentPart::ImageUrl(u) => cur::ContentPart::ImageUrl(u),
        old::ContentPart::AudioUrl(u) => cur::ContentPart::AudioUrl(u),
        old::ContentPart::VideoUrl(u) => cur::ContentPart::VideoUrl(u),
    }
}

fn content_part_down(p: &cur::ContentPart) -> Result<old::ContentPart, String> {
    Ok(match p {
        cur::ContentPart::Text(t) => old::ContentPart::Text(t.clone()),
        cur::ContentPart::ImageUrl(u) => old::ContentPart::ImageUrl(u.clone()),
        cur::ContentPart::AudioUrl(u) => old::ContentPart::AudioUrl(u.clone()),
        cur::ContentPart::VideoUrl(u) => old::ContentPart::VideoUrl(u.clone()),
        cur::ContentPart::Binary(b) => {
            return Err(too_new(&format!("binary data ({})", b.mime_type)));
        }
    })
}

fn chat_message_up(m: old::ChatMessage) -> cur::ChatMessage {
    cur::ChatMessage {
        role: m.role,
        content: m.content.into_iter().map(content_part_up).collect(),
    }
}

fn chat_message_down(m: &cur::ChatMessage) -> Result<old::ChatMessage, String> {
    Ok(old::ChatMessage {
        role: m.role.clone(),
        content: m
            .content
            .iter()
            .map(content_part_down)
            .collect::<Result<_, _>>()?,
    })
}

fn too_new(what: &str) -> String {
    format!(
        "{what} cannot be sent through a plugin built for bench:plugin@{VERSION}; rebuild it against the current bench-sdk"
    )
}

pub(crate) fn request_spec_up(s: old::RequestSpec) -> cur::RequestSpec {
    cur::RequestSpec {
        prompt: match s.prompt {
            old::Prompt::Text(t) => cur::Prompt::Text(t),
            old::Prompt::TokenIds(ids) => cur::Prompt::TokenIds(ids),
            old::Prompt::Chat(messages) => {
                cur::Prompt::Chat(messages.into_iter().map(chat_message_up).collect())
            }
        },
        prompt_len: s.prompt_len,
        expected_output_len: s.expected_output_len,
        multimodal: s.multimodal.into_iter().map(content_part_up).collect(),
        request_id: s.request_id,
        lora_name: s.lora_name,
        extra_body: s.extra_body,
        send_at: None,
        session: None,
        output_constraint: None,
    }
}

/// The 0.2.0 form of a request, or why it has none. A send time and a session are the
/// host's business and are simply not passed on.
pub(crate) fn request_spec_down(s: &cur::RequestSpec) -> Result<old::RequestSpec, String> {
    super::v0_5_0::refuse_output_constraint(s, VERSION)?;
    Ok(old::RequestSpec {
        prompt: match &s.prompt {
            cur::Prompt::Text(t) => old::Prompt::Text(t.clone()),
            cur::Prompt::TokenIds(ids) => old::Prompt::TokenIds(ids.clone()),
            cur::Prompt::Chat(messages) => old::Prompt::Chat(
                messages
                    .iter()
                    .map(chat_message_down)
                    .collect::<Result<_, _>>()?,
            ),
            cur::Prompt::Texts(_) => return Err(too_new("a batch of texts")),
            cur::Prompt::Rerank(_) => return Err(too_new("a rerank query")),
        },
        prompt_len: s.prompt_len,
        expected_output_len: s.expected_output_len,
        multimodal: s
            .multimodal
            .iter()
            .map(content_part_down)
            .collect::<Result<_, _>>()?,
        request_id: s.request_id.clone(),
        lora_name: s.lora_name.clone(),
        extra_body: s.extra_body.clone(),
    })
}

/// A 0.2.0 backend's configuration. It has no streaming switch (0.2.0 backends choose for
/// themselves) and no API key (they never received one).
pub(crate) fn client_config_down(c: &cur_backend::ClientConfig) -> old_backend::ClientConfig {
    old_backend::ClientConfig {
        model: c.model.clone(),
        ignore_eos: c.ignore_eos,
        extra_body: c.extra_body.clone(),
        options: c.options.clone(),
    }
}

pub(crate) fn framing_up(f: old_backend::Framing) -> cur_backend::Framing {
    match f {
        old_backend::Framing::Sse => cur_backend::Framing::Sse,
        old_backend::Framing::Ndjson => cur_backend::Framing::Ndjson,
        old_backend::Framing::Raw => cur_backend::Framing::Raw,
    }
}

pub(crate) fn http_request_up(r: old_backend::HttpRequest) -> cur_backend::HttpRequest {
    cur_backend::HttpRequest {
        method: r.method,
        headers: r.headers,
        body: r.body,
    }
}

pub(crate) fn response_head_down(h: &cur_backend::ResponseHead) -> old_backend::ResponseHead {
    old_backend::ResponseHead {
        status: h.status,
        headers: h.headers.clone(),
    }
}

/// How bench-sdk 0.2.0's OpenAI decoder began the message of a frame it could not parse.
const SDK_0_2_0_MALFORMED_PREFIX: &str = "invalid JSON";

pub(crate) fn decoded_up(d: old_backend::Decoded) -> cur_backend::Decoded {
    let old_backend::Chunks {
        frames,
        spans,
        escaped,
    } = d.chunks;
    cur_backend::Decoded {
        chunks: cur_backend::Chunks {
            frames,
            spans,
            escaped,
            tokens: Vec::new(),
        },
        events: d
            .events
            .into_iter()
            .map(|e| cur_backend::Event {
                frame: e.frame,
                kind: match e.kind {
                    old_backend::EventKind::Usage(u) => {
                        cur_backend::EventKind::Usage(cur_backend::Usage {
                            prompt_tokens: u.prompt_tokens,
                            completion_tokens: u.completion_tokens,
                            cached_prompt_tokens: None,
                        })
                    }
                    old_backend::EventKind::Finish(reason) => {
                        cur_backend::EventKind::Finish(reason)
                    }
                    old_backend::EventKind::Error(message) => {
                        let kind = if message.starts_with(SDK_0_2_0_MALFORMED_PREFIX) {
                            cur_backend::ErrorKind::MalformedFrame
                        } else {
                            cur_backend::ErrorKind::Server
                        };
                        cur_backend::EventKind::Error(cur_backend::ErrorEvent { kind, message })
                    }
                },
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_new_inputs_are_refused_by_name() {
        let spec = cur::RequestSpec {
            prompt: cur::Prompt::Chat(vec![cur::ChatMessage {
                role: "user".into(),
                content: vec![
                    cur::ContentPart::Text("hi".into()),
                    cur::ContentPart::ImageUrl("data:x".into()),
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
        };
        let back = request_spec_up(request_spec_down(&spec).unwrap());
        let expected = cur::RequestSpec {
            send_at: None,
            session: None,
            ..spec.clone()
        };
        assert_eq!(format!("{back:?}"), format!("{expected:?}"));
        let batch = cur::RequestSpec {
            prompt: cur::Prompt::Texts(vec!["a".into()]),
            ..spec.clone()
        };
        let err = request_spec_down(&batch).unwrap_err();
        assert!(
            err.contains("a batch of texts") && err.contains("0.2.0"),
            "{err}"
        );
        let audio = cur::RequestSpec {
            multimodal: vec![cur::ContentPart::Binary(cur::BinaryData {
                mime_type: "audio/wav".into(),
                file_name: "a.wav".into(),
                data: vec![1],
            })],
            ..spec.clone()
        };
        assert!(request_spec_down(&audio).unwrap_err().contains("audio/wav"));
        let constrained = cur::RequestSpec {
            output_constraint: Some(cur::OutputConstraint::Regex("[0-9]+".into())),
            ..spec
        };
        let err = request_spec_down(&constrained).unwrap_err();
        assert!(err.contains("(regex)") && err.contains("0.2.0"), "{err}");
    }

    #[test]
    fn error_events_get_the_kind_the_0_2_0_sdk_meant() {
        let decoded = old_backend::Decoded {
            chunks: old_backend::Chunks {
                frames: vec![0],
                spans: vec![0, 1, 0, 0],
                escaped: vec![0],
            },
            events: vec![
                old_backend::Event {
                    frame: 0,
                    kind: old_backend::EventKind::Error("invalid JSON in a response frame".into()),
                },
                old_backend::Event {
                    frame: 0,
                    kind: old_backend::EventKind::Error("overloaded".into()),
                },
            ],
        };
        let up = decoded_up(decoded);
        assert_eq!(up.chunks.frames, vec![0]);
        assert!(up.chunks.tokens.is_empty());
        let kinds: Vec<cur_backend::ErrorKind> = up
            .events
            .iter()
            .map(|e| match &e.kind {
                cur_backend::EventKind::Error(e) => e.kind,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                cur_backend::ErrorKind::MalformedFrame,
                cur_backend::ErrorKind::Server
            ]
        );
    }
}
