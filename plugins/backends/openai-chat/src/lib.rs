//! The `openai-chat` backend: OpenAI's chat completions API (`/v1/chat/completions`),
//! sent as vLLM's `--backend openai-chat` sends it (`async_request_openai_chat_completions`
//! in `vllm/benchmarks/lib/endpoint_request_func.py`).
//!
//! The shared work (options, body merging, headers, decoding) lives in
//! [`bench_sdk::openai`]; this crate adds the chat fields: `messages` (with multimodal
//! items as OpenAI content parts), `max_completion_tokens`, and where a choice keeps its
//! content and reasoning.

use bench_sdk::openai::{
    ChoiceFields, OpenAiClient, OpenAiDecoder, chat_message, common_options, content_part,
};
use bench_sdk::structured;
use bench_sdk::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    Prompt, RequestSpec, ResponseHead,
};
use serde_json::{Value, json};

const NAME: &str = "openai-chat";

/// Reasoning text: `reasoning_content` (vLLM's reasoning parsers, DeepSeek), then
/// `reasoning` (newer vLLM, OpenRouter).
const REASONING: &[&str] = &["reasoning_content", "reasoning"];

/// A streamed chunk keeps its text in `choices[0].delta`.
const STREAM_FIELDS: ChoiceFields = ChoiceFields {
    holder: Some("delta"),
    content: "content",
    reasoning: REASONING,
};

/// A whole response keeps it in `choices[0].message`.
const WHOLE_FIELDS: ChoiceFields = ChoiceFields {
    holder: Some("message"),
    content: "content",
    reasoning: REASONING,
};

/// The chat completions backend.
pub struct ChatCompletions {
    client: OpenAiClient,
}

impl Backend for ChatCompletions {
    type Decoder = OpenAiDecoder;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "OpenAI chat completions API (/v1/chat/completions), as vLLM's \
                              --backend openai-chat. Text prompts become one user message; \
                              images, audio and video go as content parts after the text."
                    .into(),
                options: [common_options(), vec![structured::option_info()]].concat(),
            },
            openai_compatible: true,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, mut options) = OpenAiClient::open(NAME, config)?;
        let form = structured::Form::read(NAME, &mut options)?;
        options.finish(&Self::describe().info.options)?;
        Ok(ChatCompletions {
            client: client.with_structured_output(form),
        })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/chat/completions".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = self.client.body(&spec);
        body.insert("messages".into(), messages(&spec)?);
        body.insert(
            "max_completion_tokens".into(),
            json!(spec.expected_output_len),
        );
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<OpenAiDecoder, PluginError> {
        Ok(self.client.decoder(if self.client.stream() {
            STREAM_FIELDS
        } else {
            WHOLE_FIELDS
        }))
    }
}

bench_sdk::export_backend!(ChatCompletions);

/// The `messages` array.
///
/// A text prompt becomes one user message whose content is a list: the text part, then
/// the multimodal items (vLLM's `_get_chat_content` with `mm_position="last"`). Chat
/// messages go as given. vLLM never pairs prebuilt messages with separate multimodal
/// items; when a dataset does, the items are appended to the last user message rather
/// than dropped.
fn messages(spec: &RequestSpec) -> Result<Value, PluginError> {
    match &spec.prompt {
        Prompt::Text(text) => {
            let content = std::iter::once(Ok(json!({ "type": "text", "text": text })))
                .chain(spec.multimodal.iter().map(|p| content_part(NAME, p)))
                .collect::<Result<_, _>>()?;
            Ok(json!([{ "role": "user", "content": Value::Array(content) }]))
        }
        Prompt::Chat(chat) => {
            let mut messages: Vec<Value> = chat
                .iter()
                .map(|m| chat_message(NAME, m))
                .collect::<Result<_, _>>()?;
            if !spec.multimodal.is_empty() {
                let last_user = chat.iter().rposition(|m| m.role == "user").ok_or_else(|| {
                    PluginError::InvalidInput(format!(
                        "{NAME}: a request has multimodal items but no user message to attach them to"
                    ))
                })?;
                let parts = chat[last_user]
                    .content
                    .iter()
                    .chain(&spec.multimodal)
                    .map(|p| content_part(NAME, p))
                    .collect::<Result<_, _>>()?;
                messages[last_user] = json!({ "role": "user", "content": Value::Array(parts) });
            }
            Ok(Value::Array(messages))
        }
        Prompt::TokenIds(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the chat API takes no token-id prompts; use --backend openai"
        ))),
        Prompt::Texts(_) | Prompt::Rerank(_) => Err(PluginError::Unsupported(format!(
            "{NAME}: the chat API takes no batches of texts or rerank queries; use a pooling \
             backend"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::openai::render_response;
    use bench_sdk::{ChatMessage, ContentPart};

    fn client(
        ignore_eos: bool,
        extra_body: Option<&str>,
        options: &[(&str, &str)],
    ) -> ChatCompletions {
        ChatCompletions::open(ClientConfig {
            model: "Qwen/Qwen2.5-VL-7B-Instruct".into(),
            stream: true,
            ignore_eos,
            extra_body: extra_body.map(str::to_string),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
        .unwrap()
    }

    fn body(backend: &ChatCompletions, spec: RequestSpec) -> Value {
        serde_json::from_slice(&backend.build_request(spec).unwrap().body).unwrap()
    }

    fn chat(role: &str, content: Vec<ContentPart>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content,
        }
    }

    #[test]
    fn text_prompt_payload_matches_vllm() {
        // vLLM: {model, messages: [{role: user, content: [{type: text, text: prompt}]}],
        // max_completion_tokens, stream: True, stream_options: {include_usage: True}},
        // updated with the extra body (temperature 0.0 by default).
        let backend = client(false, None, &[]);
        let mut spec = RequestSpec::text("What is in Paris?".into(), 5, 64);
        spec.request_id = Some("bench-0".into());
        let request = backend.build_request(spec).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&request.body).unwrap(),
            json!({
                "model": "Qwen/Qwen2.5-VL-7B-Instruct",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "What is in Paris?"}]}],
                "max_completion_tokens": 64,
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.0,
            })
        );
        assert_eq!(
            request.headers,
            [
                ("Content-Type".to_string(), "application/json".to_string()),
                ("x-request-id".to_string(), "bench-0".to_string()),
            ]
        );
        assert_eq!(request.method, "POST");
        assert_eq!(backend.default_path(), "/v1/chat/completions");
        assert_eq!(backend.framing(), Framing::Sse);
    }

    #[test]
    fn multimodal_items_follow_the_text() {
        let backend = client(
            true,
            Some(r#"{"temperature":1.0,"chat_template_kwargs":{"enable_thinking":false}}"#),
            &[],
        );
        let mut spec = RequestSpec::text("Describe these.".into(), 3, 32);
        spec.multimodal = vec![
            ContentPart::ImageUrl("data:image/jpeg;base64,/9j/AAAA".into()),
            ContentPart::VideoUrl("https://example.com/clip.mp4".into()),
            ContentPart::AudioUrl("data:audio/wav;base64,UklGRg==".into()),
        ];
        spec.lora_name = Some("vision-lora".into());
        spec.extra_body = Some(r#"{"max_completion_tokens":7}"#.into());
        assert_eq!(
            body(&backend, spec),
            json!({
                "model": "vision-lora",
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "Describe these."},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/AAAA"}},
                    {"type": "video_url", "video_url": {"url": "https://example.com/clip.mp4"}},
                    {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,UklGRg=="}},
                ]}],
                "max_completion_tokens": 7,
                "stream": true,
                "stream_options": {"include_usage": true},
                "ignore_eos": true,
                "temperature": 1.0,
                "chat_template_kwargs": {"enable_thinking": false},
            })
        );
    }

    #[test]
    fn chat_messages_go_as_given() {
        let backend = client(false, None, &[]);
        let mut spec = RequestSpec::text(String::new(), 20, 10);
        spec.prompt = Prompt::Chat(vec![
            chat("system", vec![ContentPart::Text("Be brief.".into())]),
            chat("user", vec![ContentPart::Text("Hi".into())]),
            chat("assistant", vec![ContentPart::Text("Hello!".into())]),
            chat(
                "user",
                vec![
                    ContentPart::Text("Look:".into()),
                    ContentPart::ImageUrl("https://x/y.png".into()),
                ],
            ),
        ]);
        assert_eq!(
            body(&backend, spec.clone())["messages"],
            json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Look:"},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ]},
            ])
        );

        // Separate multimodal items join the last user message.
        spec.prompt = Prompt::Chat(vec![
            chat("user", vec![ContentPart::Text("First".into())]),
            chat("user", vec![ContentPart::Text("Second".into())]),
            chat("assistant", vec![]),
        ]);
        spec.multimodal = vec![ContentPart::AudioUrl("data:audio/wav;base64,AA==".into())];
        assert_eq!(
            body(&backend, spec.clone())["messages"],
            json!([
                {"role": "user", "content": "First"},
                {"role": "user", "content": [
                    {"type": "text", "text": "Second"},
                    {"type": "audio_url", "audio_url": {"url": "data:audio/wav;base64,AA=="}},
                ]},
                {"role": "assistant", "content": []},
            ])
        );

        spec.prompt = Prompt::Chat(vec![chat("system", vec![ContentPart::Text("s".into())])]);
        assert!(
            matches!(backend.build_request(spec), Err(PluginError::InvalidInput(m)) if m.contains("no user message"))
        );
    }

    #[test]
    fn token_ids_and_unknown_options_are_refused() {
        let backend = client(false, None, &[]);
        let mut spec = RequestSpec::text(String::new(), 2, 2);
        spec.prompt = Prompt::TokenIds(vec![1, 2]);
        assert!(
            matches!(backend.build_request(spec), Err(PluginError::Unsupported(m)) if m.contains("--backend openai"))
        );
        let open = ChatCompletions::open(ClientConfig {
            model: "m".into(),
            stream: true,
            ignore_eos: false,
            extra_body: None,
            options: vec![("logprobs".into(), "1".into())],
        });
        assert!(
            matches!(open, Err(PluginError::InvalidConfig(m)) if m.contains("unknown option \"logprobs\" (known: stream, session-header, structured-output)"))
        );
    }

    #[test]
    fn decodes_a_vllm_reasoning_stream() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Think \u2014 \"hard\"."},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":"Newer field."},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Paris\n\ud83d\uddfc"},"logprobs":null,"finish_reason":null}]}"#,
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}"#,
                r#"{"id":"chatcmpl-9c","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":17,"total_tokens":21,"completion_tokens":4}}"#,
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content="" reasoning=none"#,
                r#"1: chunk content=none reasoning="Think — \"hard\".""#,
                r#"2: chunk content=none reasoning="Newer field.""#,
                "3: chunk content=\"Paris\\n🗼\" reasoning=none",
                r#"4: chunk content="" reasoning=none"#,
                "4: finish stop",
                "5: usage prompt=17 completion=4",
            ]
        );
    }

    /// The same vLLM reasoning stream as the server sends it, decoded whole and split at
    /// every byte as network reads split it: the same events every time.
    #[test]
    fn decodes_a_recorded_stream_split_at_every_byte() {
        let backend = client(false, None, &[]);
        let head = bench_sdk::ResponseHead {
            status: 200,
            headers: Vec::new(),
        };
        let body = concat!(
            ": keep-alive\n\n",
            "data: {\"id\":\"chatcmpl-9c\",\"object\":\"chat.completion.chunk\",\"created\":1718000002,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-9c\",\"object\":\"chat.completion.chunk\",\"created\":1718000002,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Think \\u2014 \\\"hard\\\".\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-9c\",\"object\":\"chat.completion.chunk\",\"created\":1718000002,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Paris été 🗼\"},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n",
            "data: {\"id\":\"chatcmpl-9c\",\"object\":\"chat.completion.chunk\",\"created\":1718000002,\"model\":\"Qwen/Qwen3-8B\",\"choices\":[],\"usage\":{\"prompt_tokens\":17,\"total_tokens\":21,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
        );
        let events = bench_sdk::native::decode_sse_split_everywhere(
            || backend.decoder(&head).unwrap(),
            body,
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content="" reasoning=none"#,
                r#"1: chunk content=none reasoning="Think — \"hard\".""#,
                "2: chunk content=\"Paris été 🗼\" reasoning=none",
                "2: finish stop",
                "3: usage prompt=17 completion=4",
            ]
        );
    }

    #[test]
    fn decodes_a_stream_whose_chunks_repeat_their_shape() {
        // Chunk after chunk the same bytes around the text: the decoder reads most of
        // them by their text alone, and must read them as it reads each one in full.
        let frame = |delta: &str, finish: &str| {
            format!(
                r#"{{"id":"chatcmpl-9d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]}}"#
            )
        };
        let frames = [
            frame(r#"{"role":"assistant","content":""}"#, "null"),
            frame(r#"{"reasoning_content":"Let"}"#, "null"),
            frame(r#"{"reasoning_content":" me"}"#, "null"),
            // An empty reasoning text is no reasoning.
            frame(r#"{"reasoning_content":""}"#, "null"),
            frame(r#"{"reasoning_content":" think \"hard\""}"#, "null"),
            frame(r#"{"content":"The"}"#, "null"),
            frame(r#"{"content":" answer\\"}"#, "null"),
            frame(r#"{"content":"\",\"content\":\"x"}"#, "null"),
            frame(r#"{"content":"!"}"#, r#""stop""#),
            r#"{"id":"chatcmpl-9d","object":"chat.completion.chunk","created":1718000002,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":17,"total_tokens":26,"completion_tokens":9}}"#.to_owned(),
        ];
        let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
        let backend = client(false, None, &[]);
        let events = render_response(&backend, &frames);
        assert_eq!(
            events,
            [
                r#"0: chunk content="" reasoning=none"#,
                r#"1: chunk content=none reasoning="Let""#,
                r#"2: chunk content=none reasoning=" me""#,
                "3: chunk content=none reasoning=none",
                r#"4: chunk content=none reasoning=" think \"hard\"""#,
                r#"5: chunk content="The" reasoning=none"#,
                r#"6: chunk content=" answer\\" reasoning=none"#,
                r#"7: chunk content="\",\"content\":\"x" reasoning=none"#,
                r#"8: chunk content="!" reasoning=none"#,
                "8: finish stop",
                "9: usage prompt=17 completion=9",
            ]
        );
        // Each frame read alone, by a fresh decoder, reads the same.
        let alone: Vec<String> = frames
            .iter()
            .enumerate()
            .flat_map(|(i, frame)| {
                render_response(&backend, &[frame])
                    .into_iter()
                    .map(move |line| format!("{i}{}", line.strip_prefix('0').unwrap()))
            })
            .collect();
        assert_eq!(alone, events);
    }

    #[test]
    fn decodes_llama_cpp_and_openai_streams() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                // llama.cpp: an empty delta with the finish reason, usage and timings.
                r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" Paris"}}],"created":1718000003,"id":"chatcmpl-Xy","model":"gpt-3.5-turbo","system_fingerprint":"b4500-1a2b3c4d","object":"chat.completion.chunk"}"#,
                r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1718000003,"id":"chatcmpl-Xy","model":"gpt-3.5-turbo","system_fingerprint":"b4500-1a2b3c4d","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"timings":{"prompt_n":9,"prompt_ms":15.361,"predicted_n":2,"predicted_ms":20.5}}"#,
                // OpenAI: null content, refusal, usage null until the usage-only chunk.
                r#"{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82cc3fd1","choices":[{"index":0,"delta":{"content":null,"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kjD3"}"#,
                r#"{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_4d82cc3fd1","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}"#,
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Paris" reasoning=none"#,
                // Usage next to choices is reported; the host applies vLLM's rule to it.
                "1: chunk content=none reasoning=none",
                "1: usage prompt=9 completion=2",
                "1: finish stop",
                "2: chunk content=none reasoning=none",
                "3: usage prompt=19 completion=10",
            ]
        );
    }

    #[test]
    fn decodes_a_whole_response_when_not_streaming() {
        let backend = client(false, None, &[("stream", "false")]);
        assert_eq!(backend.framing(), Framing::Raw);
        let sent = body(&backend, RequestSpec::text("Hi".into(), 1, 4));
        assert_eq!(sent["stream"], json!(false));
        assert!(sent.get("stream_options").is_none());
        let events = render_response(
            &backend,
            &[
                r#"{"id":"chatcmpl-8","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello \"you\"","reasoning_content":"Greet.","tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5},"prompt_logprobs":null}"#,
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content="Hello \"you\"" reasoning="Greet.""#,
                "0: usage prompt=3 completion=2",
                "0: finish stop"
            ]
        );
    }

    #[test]
    fn in_band_errors_fail_the_request() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"a"}}]}"#,
                r#"{"error":{"object":"error","message":"Request timed out","type":"BadRequestError","param":null,"code":400}}"#,
                "data: {}",
            ],
        );
        assert_eq!(
            events[1],
            "1: error server: the server reported an error: Request timed out"
        );
        assert!(
            events[2].starts_with(
                "2: error malformed: invalid JSON in a response frame: expected a value at byte 0"
            ),
            "{}",
            events[2]
        );
        assert_eq!(events.len(), 3);
    }

    /// The SDK's decoder fuzzing harness under the field choice this plugin makes, each
    /// response read streamed and whole.
    #[test]
    fn fuzz_decoders_hold_up_on_damaged_frames() {
        let responses: [&[&[u8]]; 3] = [
            &[
                br#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"reasoning_content":"Let me \"think\"","content":"caf\u00e9 \ud83d\ude00"},"finish_reason":null}]}"#,
                br#"{"id":"chatcmpl-9","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}"#,
            ],
            &[br#"{"id":"chatcmpl-8","choices":[{"index":0,"message":{"role":"assistant","content":"Answer","reasoning":"why"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#],
            &[br#"{"error":{"message":"Engine loop died","code":500}}"#],
        ];
        let streamed = client(false, None, &[("stream", "true")]);
        let events = bench_sdk::testing::fuzz_backend(&responses, &streamed);
        assert_eq!(
            events[0][0],
            r#"0: chunk content="café 😀" reasoning="Let me \"think\"""#
        );
        let whole = client(false, None, &[("stream", "false")]);
        let events = bench_sdk::testing::fuzz_backend(&responses, &whole);
        assert_eq!(events[1][0], r#"0: chunk content="Answer" reasoning="why""#);
    }
}
