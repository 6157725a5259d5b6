//! Contract `bench:plugin@0.3.0` (frozen in `wit/since_v0.3.0`): its bindings, the host
//! imports it links against, and the conversions between its types and the current ones.
//!
//! 0.4.0 and 0.5.0 only added to 0.3.0, so every 0.3.0 value has a current twin of the
//! same shape and the conversions copy field by field. What 0.3.0 cannot say gets the
//! neutral value: its datasets are not shardable (the host opens one source), and a host
//! asked for a shard never passes one down (it asks only shardable sources).

use super::current::backend::exports::bench::plugin::backend as cur_backend;
use super::current::dataset::bench::plugin::{
    log as cur_log, seed as cur_seed, tokenizer as cur_tokenizer, types as cur,
};
use super::current::dataset::exports::bench::plugin::dataset as cur_dataset;
use crate::host::StoreState;

/// The version these bindings are for.
pub const VERSION: &str = "0.3.0";

/// SHA-256 of `wit/since_v0.3.0/plugin.wit`: released contracts never change.
#[cfg(test)]
pub const FROZEN_SHA256: &str = "d802e7a045c5e267d58f8d0cbcfbd81d8cc7c6b8f127ce88f6bc07e01f7550bf";

/// The `dataset-plugin` world of 0.3.0 and its shared interfaces.
pub mod dataset {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.3.0",
        world: "dataset-plugin",
        imports: {
            "bench:plugin/tokenizer.vocab-size": trappable,
            "bench:plugin/tokenizer.special-token-ids": trappable,
        },
    });
}

/// The `backend-plugin` world of 0.3.0, sharing the dataset world's interfaces.
pub mod backend {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.3.0",
        world: "backend-plugin",
        with: {
            "bench:plugin/types": crate::bindings::v0_3_0::dataset::bench::plugin::types,
            "bench:plugin/tokenizer": crate::bindings::v0_3_0::dataset::bench::plugin::tokenizer,
            "bench:plugin/seed": crate::bindings::v0_3_0::dataset::bench::plugin::seed,
            "bench:plugin/log": crate::bindings::v0_3_0::dataset::bench::plugin::log,
        },
    });
}

use backend::exports::bench::plugin::backend as old_backend;
use dataset::bench::plugin::types as old;
use dataset::bench::plugin::{log as old_log, seed as old_seed, tokenizer as old_tokenizer};
use dataset::exports::bench::plugin::dataset as old_dataset;

// The host imports of 0.3.0 are those of the current contract: each call is passed on.

impl old::Host for StoreState {}

impl old_tokenizer::Host for StoreState {
    fn encode(&mut self, text: String, add_special_tokens: bool) -> Result<Vec<u32>, String> {
        cur_tokenizer::Host::encode(self, text, add_special_tokens)
    }

    fn encode_batch(
        &mut self,
        texts: Vec<String>,
        add_special_tokens: bool,
    ) -> Result<Vec<Vec<u32>>, String> {
        cur_tokenizer::Host::encode_batch(self, texts, add_special_tokens)
    }

    fn decode(&mut self, ids: Vec<u32>, skip_special_tokens: bool) -> Result<String, String> {
        cur_tokenizer::Host::decode(self, ids, skip_special_tokens)
    }

    fn vocab_size(&mut self, with_added_tokens: bool) -> wasmtime::Result<u32> {
        cur_tokenizer::Host::vocab_size(self, with_added_tokens)
    }

    fn special_token_ids(&mut self) -> wasmtime::Result<Vec<u32>> {
        cur_tokenizer::Host::special_token_ids(self)
    }

    fn apply_chat_template(
        &mut self,
        messages: Vec<old::ChatMessage>,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let messages = messages.into_iter().map(chat_message_up).collect();
        cur_tokenizer::Host::apply_chat_template(self, messages, add_generation_prompt)
    }
}

impl old_seed::Host for StoreState {
    fn run_seed(&mut self) -> u64 {
        cur_seed::Host::run_seed(self)
    }

    fn derive(&mut self, label: String) -> u64 {
        cur_seed::Host::derive(self, label)
    }
}

impl old_log::Host for StoreState {
    fn log(&mut self, level: old_log::Level, message: String) {
        let level = match level {
            old_log::Level::Debug => cur_log::Level::Debug,
            old_log::Level::Info => cur_log::Level::Info,
            old_log::Level::Warn => cur_log::Level::Warn,
            old_log::Level::Error => cur_log::Level::Error,
        };
        cur_log::Host::log(self, level, message)
    }
}

// Types, up (0.3.0 to current) and down.

pub(crate) fn plugin_error_up(e: old::PluginError) -> cur::PluginError {
    match e {
        old::PluginError::InvalidConfig(m) => cur::PluginError::InvalidConfig(m),
        old::PluginError::InvalidInput(m) => cur::PluginError::InvalidInput(m),
        old::PluginError::Unsupported(m) => cur::PluginError::Unsupported(m),
        old::PluginError::Internal(m) => cur::PluginError::Internal(m),
    }
}

fn option_kind_up(k: old::OptionKind) -> cur::OptionKind {
    match k {
        old::OptionKind::Text => cur::OptionKind::Text,
        old::OptionKind::Count => cur::OptionKind::Count,
        old::OptionKind::Integer => cur::OptionKind::Integer,
        old::OptionKind::Number => cur::OptionKind::Number,
        old::OptionKind::Switch => cur::OptionKind::Switch,
    }
}

fn shared_flag_up(f: old::SharedFlag) -> cur::SharedFlag {
    match f {
        old::SharedFlag::InputLen => cur::SharedFlag::InputLen,
        old::SharedFlag::OutputLen => cur::SharedFlag::OutputLen,
    }
}

fn plugin_info_up(info: old::PluginInfo) -> cur::PluginInfo {
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
                cli_flag: o.cli_flag,
                kind: option_kind_up(o.kind),
                choices: o.choices,
                shared_flags: o.shared_flags.into_iter().map(shared_flag_up).collect(),
            })
            .collect(),
    }
}

pub(crate) fn dataset_description_up(
    d: old_dataset::DatasetDescription,
) -> cur_dataset::DatasetDescription {
    cur_dataset::DatasetDescription {
        info: plugin_info_up(d.info),
        path: match d.path {
            old_dataset::PathUse::Refused => cur_dataset::PathUse::Refused,
            old_dataset::PathUse::Optional => cur_dataset::PathUse::Optional,
            old_dataset::PathUse::Required => cur_dataset::PathUse::Required,
        },
        ignore_eos_by_default: d.ignore_eos_by_default,
        align_to_server_tokenizer: d.align_to_server_tokenizer,
        multi_turn: d.multi_turn,
        shardable: false,
    }
}

pub(crate) fn backend_description_up(
    d: old_backend::BackendDescription,
) -> cur_backend::BackendDescription {
    cur_backend::BackendDescription {
        info: plugin_info_up(d.info),
        openai_compatible: d.openai_compatible,
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

fn chat_message_up(m: old::ChatMessage) -> cur::ChatMessage {
    cur::ChatMessage {
        role: m.role,
        content: m.content.into_iter().map(content_part_up).collect(),
    }
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

fn session_down(s: &cur::Session) -> old::Session {
    old::Session {
        id: s.id.clone(),
        turn: s.turn,
    }
}

pub(crate) fn request_spec_up(s: old::RequestSpec) -> cur::RequestSpec {
    cur::RequestSpec {
        prompt: match s.prompt {
            old::Prompt::Text(t) => cur::Prompt::Text(t),
            old::Prompt::TokenIds(ids) => cur::Prompt::TokenIds(ids),
            old::Prompt::Chat(messages) => {
                cur::Prompt::Chat(messages.into_iter().map(chat_message_up).collect())
            }
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
    }
}

pub(crate) fn request_spec_down(s: &cur::RequestSpec) -> old::RequestSpec {
    old::RequestSpec {
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
    }
}

pub(crate) fn turn_result_down(t: &cur_dataset::TurnResult) -> old_dataset::TurnResult {
    old_dataset::TurnResult {
        session: session_down(&t.session),
        success: t.success,
        generated_text: t.generated_text.clone(),
        ttft: t.ttft,
        latency: t.latency,
        finished_at: t.finished_at,
    }
}

pub(crate) fn client_config_down(c: &cur_backend::ClientConfig) -> old_backend::ClientConfig {
    old_backend::ClientConfig {
        model: c.model.clone(),
        ignore_eos: c.ignore_eos,
        stream: c.stream,
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

fn event_kind_up(k: old_backend::EventKind) -> cur_backend::EventKind {
    match k {
        old_backend::EventKind::Usage(u) => cur_backend::EventKind::Usage(cur_backend::Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_prompt_tokens: u.cached_prompt_tokens,
        }),
        old_backend::EventKind::Finish(reason) => cur_backend::EventKind::Finish(reason),
        old_backend::EventKind::Error(e) => {
            cur_backend::EventKind::Error(cur_backend::ErrorEvent {
                kind: match e.kind {
                    old_backend::ErrorKind::Server => cur_backend::ErrorKind::Server,
                    old_backend::ErrorKind::MalformedFrame => {
                        cur_backend::ErrorKind::MalformedFrame
                    }
                },
                message: e.message,
            })
        }
        old_backend::EventKind::Pooled(p) => cur_backend::EventKind::Pooled(cur_backend::Pooled {
            kind: match p.kind {
                old_backend::PooledKind::Embedding => cur_backend::PooledKind::Embedding,
                old_backend::PooledKind::Score => cur_backend::PooledKind::Score,
                old_backend::PooledKind::Classification => cur_backend::PooledKind::Classification,
                old_backend::PooledKind::Other => cur_backend::PooledKind::Other,
            },
            count: p.count,
            dimension: p.dimension,
        }),
    }
}

pub(crate) fn decoded_up(d: old_backend::Decoded) -> cur_backend::Decoded {
    let old_backend::Chunks {
        frames,
        spans,
        escaped,
        tokens,
    } = d.chunks;
    cur_backend::Decoded {
        chunks: cur_backend::Chunks {
            frames,
            spans,
            escaped,
            tokens,
        },
        events: d
            .events
            .into_iter()
            .map(|e| cur_backend::Event {
                frame: e.frame,
                kind: event_kind_up(e.kind),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_whole() {
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
            multimodal: vec![cur::ContentPart::Binary(cur::BinaryData {
                mime_type: "audio/wav".into(),
                file_name: "a.wav".into(),
                data: vec![1, 2],
            })],
            request_id: Some("r-1".into()),
            lora_name: Some("l".into()),
            extra_body: Some("{}".into()),
            send_at: Some(1.5),
            session: Some(cur::Session {
                id: "s".into(),
                turn: 2,
            }),
        };
        let back = request_spec_up(request_spec_down(&spec));
        assert_eq!(format!("{back:?}"), format!("{spec:?}"));
        let rerank = cur::RequestSpec {
            prompt: cur::Prompt::Rerank(cur::RerankInput {
                query: "q".into(),
                documents: vec!["d".into()],
            }),
            ..spec
        };
        let back = request_spec_up(request_spec_down(&rerank));
        assert_eq!(format!("{back:?}"), format!("{rerank:?}"));
    }

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
