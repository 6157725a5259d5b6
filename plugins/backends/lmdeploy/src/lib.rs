//! The `lmdeploy` backend: LMDeploy's `api_server` speaks OpenAI's completions API, and
//! vLLM's older benchmark client maps `--backend lmdeploy` to its completions request function.
//!
//! The whole backend is [`bench_sdk::completions::Completions`]; this crate names it, so
//! that `--backend lmdeploy` works as it does with vLLM.

use bench_sdk::completions::Flavor;

/// The name and description of `--backend lmdeploy`.
pub struct LmDeploy;

impl Flavor for LmDeploy {
    const NAME: &'static str = "lmdeploy";
    const DESCRIPTION: &'static str = "LMDeploy's OpenAI-compatible completions API (/v1/completions), as \
        vLLM's --backend lmdeploy (vLLM maps it to its OpenAI completions \
        client). Prompts are text or token ids.";
}

/// The completions backend under this crate's name.
pub type Completions = bench_sdk::completions::Completions<LmDeploy>;

bench_sdk::export_backend!(Completions);

#[cfg(test)]
mod tests {
    use super::*;
    use bench_sdk::openai::render_response;
    use bench_sdk::{Backend, ClientConfig, Framing, PluginError, Prompt, RequestSpec};
    use serde_json::{Value, json};

    fn client(options: &[(&str, &str)]) -> Result<Completions, PluginError> {
        Completions::open(ClientConfig {
            model: "Qwen/Qwen3-0.6B".into(),
            stream: true,
            ignore_eos: true,
            extra_body: None,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    #[test]
    fn described_under_its_own_name_as_openai_compatible() {
        let description = Completions::describe();
        assert_eq!(description.info.name, "lmdeploy");
        assert!(description.openai_compatible);
        assert!(description.info.description.contains("/v1/completions"));
    }

    #[test]
    fn sends_vllms_completions_body_to_v1_completions() {
        let backend = client(&[]).unwrap();
        assert_eq!(backend.default_path(), "/v1/completions");
        assert_eq!(backend.framing(), Framing::Sse);
        let request = backend
            .build_request(RequestSpec::text("Hello there".into(), 2, 8))
            .unwrap();
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "Qwen/Qwen3-0.6B",
                "prompt": "Hello there",
                "repetition_penalty": 1.0,
                "max_tokens": 8,
                "logprobs": null,
                "stream": true,
                "stream_options": {"include_usage": true},
                "ignore_eos": true,
                "temperature": 0.0,
            })
        );
    }

    #[test]
    fn errors_name_this_backend() {
        let unknown = client(&[("n_predict", "3")]);
        assert!(
            matches!(&unknown, Err(PluginError::InvalidConfig(m)) if m.contains("lmdeploy")),
            "{:?}",
            unknown.err()
        );
        let mut spec = RequestSpec::text(String::new(), 1, 1);
        spec.prompt = Prompt::Chat(Vec::new());
        let refused = client(&[]).unwrap().build_request(spec);
        assert!(
            matches!(&refused, Err(PluginError::Unsupported(m)) if m.starts_with("lmdeploy:")),
            "{:?}",
            refused.err()
        );
    }

    #[test]
    fn decodes_a_completions_stream() {
        let events = render_response(
            &client(&[]).unwrap(),
            &[
                r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" Hi","finish_reason":null}]}"#,
                r#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"!","finish_reason":"length"}]}"#,
                r#"{"id":"cmpl-1","object":"text_completion","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":2}}"#,
            ],
        );
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Hi" reasoning=none"#,
                r#"1: chunk content="!" reasoning=none"#,
                "1: finish length",
                "2: usage prompt=2 completion=2",
            ]
        );
    }
}
