//! The `openai` backend: OpenAI's completions API (`/v1/completions`), sent as vLLM's
//! `--backend openai` sends it (`async_request_openai_completions` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`).
//!
//! The whole backend lives in [`bench_sdk::completions`] (shared with `vllm`, `lmdeploy`
//! and `scalellm`); this crate gives it its name and holds the tests of its requests and
//! decoding.

use bench_sdk::completions::Flavor;

/// The name and description of vLLM's `--backend openai`.
pub struct OpenAi;

impl Flavor for OpenAi {
    const NAME: &'static str = "openai";
    const DESCRIPTION: &'static str = "OpenAI completions API (/v1/completions), as vLLM's \
                                       --backend openai. Prompts are text or token ids.";
}

/// The completions backend.
pub type Completions = bench_sdk::completions::Completions<OpenAi>;

bench_sdk::export_backend!(Completions);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::openai::render_response;
    use bench_sdk::{
        Backend, ClientConfig, ContentPart, Framing, HttpRequest, PluginError, Prompt, RequestSpec,
    };
    use serde_json::{Value, json};

    fn client(ignore_eos: bool, extra_body: Option<&str>, options: &[(&str, &str)]) -> Completions {
        Completions::open(ClientConfig {
            model: "meta-llama/Llama-3.1-8B-Instruct".into(),
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

    fn body(request: &HttpRequest) -> Value {
        serde_json::from_slice(&request.body).unwrap()
    }

    #[test]
    fn text_prompt_payload_matches_vllm() {
        // vLLM: {model, prompt, repetition_penalty: 1.0, max_tokens, logprobs: None,
        // stream: True, stream_options: {include_usage: True}} updated with the extra body,
        // whose sampling parameters default temperature to 0.0.
        let backend = client(false, None, &[]);
        let request = backend
            .build_request(RequestSpec::text("Tell me a story".into(), 4, 128))
            .unwrap();
        assert_eq!(
            body(&request),
            json!({
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "prompt": "Tell me a story",
                "repetition_penalty": 1.0,
                "max_tokens": 128,
                "logprobs": null,
                "stream": true,
                "stream_options": {"include_usage": true},
                "temperature": 0.0,
            })
        );
        assert_eq!(request.method, "POST");
        assert_eq!(
            request.headers,
            [("Content-Type".to_string(), "application/json".to_string())]
        );
        assert_eq!(backend.default_path(), "/v1/completions");
        assert_eq!(backend.framing(), Framing::Sse);
    }

    #[test]
    fn token_ids_lora_ignore_eos_extra_bodies_and_request_id() {
        let backend = client(
            true,
            Some(r#"{"temperature":0.6,"top_k":20}"#),
            &[("logprobs", "5")],
        );
        let mut spec = RequestSpec::text(String::new(), 3, 16);
        spec.prompt = Prompt::TokenIds(vec![128000, 9906, 1917]);
        spec.lora_name = Some("alpaca-lora".into());
        spec.request_id = Some("bench-run-42".into());
        spec.extra_body = Some(r#"{"top_k":5,"min_tokens":16}"#.into());
        let request = backend.build_request(spec).unwrap();
        assert_eq!(
            body(&request),
            json!({
                "model": "alpaca-lora",
                "prompt": [128000, 9906, 1917],
                "repetition_penalty": 1.0,
                "max_tokens": 16,
                "logprobs": 5,
                "stream": true,
                "stream_options": {"include_usage": true},
                "ignore_eos": true,
                "temperature": 0.6,
                "top_k": 5,
                "min_tokens": 16,
            })
        );
        assert_eq!(
            request.headers,
            [
                ("Content-Type".to_string(), "application/json".to_string()),
                ("x-request-id".to_string(), "bench-run-42".to_string()),
            ]
        );
    }

    #[test]
    fn chat_prompts_and_multimodal_items_are_refused() {
        let backend = client(false, None, &[]);
        let mut spec = RequestSpec::text("x".into(), 1, 1);
        spec.multimodal = vec![ContentPart::ImageUrl("data:image/png;base64,AAAA".into())];
        assert!(
            matches!(backend.build_request(spec), Err(PluginError::Unsupported(m)) if m.contains("openai-chat"))
        );
        let mut spec = RequestSpec::text("x".into(), 1, 1);
        spec.prompt = Prompt::Chat(Vec::new());
        assert!(
            matches!(backend.build_request(spec), Err(PluginError::Unsupported(m)) if m.contains("openai-chat"))
        );
    }

    #[test]
    fn options_are_validated() {
        let open = |options: &[(&str, &str)]| {
            Completions::open(ClientConfig {
                model: "m".into(),
                stream: true,
                ignore_eos: false,
                extra_body: None,
                options: options
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            })
        };
        assert!(
            matches!(open(&[("logprobs", "-1")]), Err(PluginError::InvalidConfig(m)) if m.contains("logprobs"))
        );
        assert!(
            matches!(open(&[("max_tokens", "3")]), Err(PluginError::InvalidConfig(m)) if m.contains("unknown option \"max_tokens\" (known: stream, session-header, structured-output, logprobs)"))
        );
        let names: Vec<String> = Completions::describe()
            .info
            .options
            .into_iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(
            names,
            ["stream", "session-header", "structured-output", "logprobs"]
        );
    }

    /// The checks every completions flavor passes (vllm, lmdeploy and scalellm run them
    /// too), among them a recorded stream decoded split at every byte.
    #[test]
    fn passes_the_completions_checks() {
        bench_sdk::completions::checks::flavor::<OpenAi>();
    }

    #[test]
    fn decodes_a_vllm_stream() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                r#"{"id":"cmpl-a1","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" Once","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
                r#"{"id":"cmpl-a1","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
                r#"{"id":"cmpl-a1","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"text":" upon\n\"a\" time\u2026","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}"#,
                r#"{"id":"cmpl-a1","object":"text_completion","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[],"usage":{"prompt_tokens":4,"total_tokens":7,"completion_tokens":3}}"#,
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Once" reasoning=none"#,
                // An empty text (a special token) is still a timing point.
                r#"1: chunk content="" reasoning=none"#,
                "2: chunk content=\" upon\\n\\\"a\\\" time…\" reasoning=none",
                "2: finish length",
                "3: usage prompt=4 completion=3",
            ]
        );
    }

    #[test]
    fn decodes_logprobs_and_llama_cpp_timings() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                // vLLM with logprobs: "text"-like keys deeper in the choice are not the text.
                r#"{"id":"cmpl-2","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hi","logprobs":{"text_offset":[0],"token_logprobs":[-0.25],"tokens":["Hi"],"top_logprobs":[{"Hi":-0.25,"text":-9.5}]},"finish_reason":null,"stop_reason":null}],"usage":null}"#,
                // llama.cpp: the last chunk has the finish reason, usage and timings.
                r#"{"choices":[{"text":"!","index":0,"logprobs":null,"finish_reason":"stop"}],"created":1718000003,"model":"gpt-3.5-turbo","system_fingerprint":"b4500-1a2b3c4d","object":"text_completion","id":"chatcmpl-Xy12","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11},"timings":{"prompt_n":9,"prompt_ms":15.361,"predicted_n":2,"predicted_ms":20.5,"predicted_per_second":97.56}}"#,
            ],
        );
        // Usage in a streamed frame with choices is reported too: the host records it as
        // the server's count without making it the output length (vLLM's rule).
        assert_eq!(
            events,
            [
                r#"0: chunk content="Hi" reasoning=none"#,
                r#"1: chunk content="!" reasoning=none"#,
                "1: usage prompt=9 completion=2",
                "1: finish stop"
            ]
        );
    }

    #[test]
    fn decodes_a_whole_response_when_not_streaming() {
        let backend = client(false, None, &[("stream", "false")]);
        assert_eq!(backend.framing(), Framing::Raw);
        let request = backend
            .build_request(RequestSpec::text("Hi".into(), 1, 4))
            .unwrap();
        let sent = body(&request);
        assert_eq!(sent["stream"], json!(false));
        assert!(sent.get("stream_options").is_none());
        let events = render_response(
            &backend,
            &[
                "{\n  \"id\": \"cmpl-7\",\n  \"object\": \"text_completion\",\n  \"choices\": [\n    {\"index\": 0, \"text\": \" there, friend\", \"logprobs\": null, \"finish_reason\": \"length\"}\n  ],\n  \"usage\": {\"prompt_tokens\": 1, \"total_tokens\": 5, \"completion_tokens\": 4}\n}\n",
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" there, friend" reasoning=none"#,
                "0: usage prompt=1 completion=4",
                "0: finish length"
            ]
        );
    }

    #[test]
    fn in_band_errors_and_broken_frames_fail_the_request() {
        let backend = client(false, None, &[]);
        let events = render_response(
            &backend,
            &[
                r#"{"choices":[{"index":0,"text":"a","finish_reason":null}]}"#,
                // vLLM's in-stream error (`create_streaming_error_response`).
                r#"{"error":{"object":"error","message":"Engine loop died","type":"InternalServerError","param":null,"code":500}}"#,
                r#"{"choices":[{"index":0,"text":"b""#,
            ],
        );
        assert_eq!(events.len(), 3, "{events:?}");
        assert_eq!(
            events[1],
            "1: error server: the server reported an error: Engine loop died"
        );
        assert!(
            events[2].starts_with("2: error malformed: invalid JSON in a response frame: "),
            "{}",
            events[2]
        );
    }

    /// The SDK's decoder fuzzing harness under the field choice this plugin makes, each
    /// response read streamed and whole.
    #[test]
    fn fuzz_decoders_hold_up_on_damaged_frames() {
        let responses: [&[&[u8]]; 4] = [
            &[
                br#"{"id":"cmpl-a1","object":"text_completion","choices":[{"index":0,"text":" upon\n\"a\" time\u2026","logprobs":null,"finish_reason":null}],"usage":null}"#,
                br#"{"id":"cmpl-a1","object":"text_completion","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}"#,
            ],
            &[b"{\n  \"choices\": [{\"index\": 0, \"text\": \" there\", \"finish_reason\": \"length\"}],\n  \"usage\": {\"prompt_tokens\": 1, \"completion_tokens\": 4}\n}\n"],
            &[br#"{"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3}}"#],
            &[br#"{"error":{"message":"Engine loop died","code":500}}"#],
        ];
        for stream in ["true", "false"] {
            let backend = client(false, None, &[("stream", stream)]);
            let events = bench_sdk::testing::fuzz_backend(&responses, &backend);
            assert_eq!(
                events[0][0],
                r#"0: chunk content=" upon\n\"a\" time…" reasoning=none"#
            );
            assert_eq!(events[1][0], r#"0: chunk content=" there" reasoning=none"#);
        }
    }
}
