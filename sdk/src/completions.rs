//! OpenAI's completions API (`/v1/completions`) as a whole backend, for every `--backend`
//! name that vLLM maps to `async_request_openai_completions`: `openai`, `vllm`, and the
//! servers of vLLM's older list that speak the same API (`lmdeploy`, `scalellm`).
//!
//! Each of those plugins is a thin crate: a [`Flavor`] (its name and description) and
//! `export_backend!(Completions<ItsFlavor>)`, so that the request body and the decoding
//! live once, here, and the names differ only where users see them.

use std::marker::PhantomData;

use serde_json::{Value, json};

use crate::openai::{ChoiceFields, OpenAiClient, OpenAiDecoder, common_options};
use crate::options::option;
use crate::structured;
use crate::{
    Backend, BackendDescription, ClientConfig, Framing, HttpRequest, PluginError, PluginInfo,
    Prompt, RequestSpec, ResponseHead,
};

/// What tells one completions plugin from another: the name users type and the
/// description `bench plugin inspect` shows.
pub trait Flavor: 'static {
    /// The `--backend` name (also the prefix of error messages).
    const NAME: &'static str;
    /// One sentence: the API, and which server's client this mirrors.
    const DESCRIPTION: &'static str;
}

/// A completion choice holds its text itself, streamed or not.
pub const FIELDS: ChoiceFields = ChoiceFields {
    holder: None,
    content: "text",
    reasoning: &[],
};

/// The completions backend under the name `F` gives it.
pub struct Completions<F> {
    client: OpenAiClient,
    /// vLLM's `--logprobs`: sent as `logprobs`, `null` when not given.
    logprobs: Option<u32>,
    flavor: PhantomData<F>,
}

impl<F: Flavor> Backend for Completions<F> {
    type Decoder = OpenAiDecoder;

    fn describe() -> BackendDescription {
        let mut options = common_options();
        options.push(structured::option_info());
        options.push(
            option(
                "logprobs",
                "Number of log probabilities to request per token; unset sends null.",
                None,
            )
            .flag("logprobs")
            .count(),
        );
        BackendDescription {
            info: PluginInfo {
                name: F::NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: F::DESCRIPTION.into(),
                options,
            },
            openai_compatible: true,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, mut options) = OpenAiClient::open(F::NAME, config)?;
        let form = structured::Form::read(F::NAME, &mut options)?;
        let logprobs = options.parse("logprobs")?;
        options.finish(&Self::describe().info.options)?;
        Ok(Completions {
            client: client.with_structured_output(form),
            logprobs,
            flavor: PhantomData,
        })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/completions".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let name = F::NAME;
        if !spec.multimodal.is_empty() {
            return Err(PluginError::Unsupported(format!(
                "{name}: the completions API takes no images, audio or video; use --backend openai-chat"
            )));
        }
        let prompt = match &spec.prompt {
            Prompt::Text(text) => json!(text),
            Prompt::TokenIds(ids) => json!(ids),
            Prompt::Chat(_) => {
                return Err(PluginError::Unsupported(format!(
                    "{name}: the completions API takes no chat messages; use --backend openai-chat"
                )));
            }
            Prompt::Texts(_) | Prompt::Rerank(_) => {
                return Err(PluginError::Unsupported(format!(
                    "{name}: the completions API takes no batches of texts or rerank queries; \
                     use a pooling backend"
                )));
            }
        };
        let mut body = self.client.body(&spec);
        body.insert("prompt".into(), prompt);
        body.insert("repetition_penalty".into(), json!(1.0));
        body.insert("max_tokens".into(), json!(spec.expected_output_len));
        body.insert(
            "logprobs".into(),
            self.logprobs.map_or(Value::Null, Value::from),
        );
        self.client.request(body, &spec)
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<OpenAiDecoder, PluginError> {
        Ok(self.client.decoder(FIELDS))
    }
}

/// What every completions plugin must do under its own name, for the tests of each thin
/// crate (`vllm`, `lmdeploy`, `scalellm`): described as its flavor says, vLLM's completions
/// body, errors that name the backend, and a decoded stream. Panics on the first failure.
pub mod checks {
    use serde_json::{Value, json};

    use super::{Completions, Flavor};
    use crate::{Backend, ClientConfig, Framing, PluginError, Prompt, RequestSpec};

    /// Runs every check for flavor `F`.
    pub fn flavor<F: Flavor>() {
        described_under_its_own_name_as_openai_compatible::<F>();
        sends_vllms_completions_body_to_v1_completions::<F>();
        errors_name_this_backend::<F>();
        decodes_a_completions_stream::<F>();
    }

    fn client<F: Flavor>(options: &[(&str, &str)]) -> Result<Completions<F>, PluginError> {
        Completions::<F>::open(ClientConfig {
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

    fn described_under_its_own_name_as_openai_compatible<F: Flavor>() {
        let description = Completions::<F>::describe();
        assert_eq!(description.info.name, F::NAME);
        assert!(description.openai_compatible);
        assert!(description.info.description.contains("/v1/completions"));
    }

    fn sends_vllms_completions_body_to_v1_completions<F: Flavor>() {
        let backend = client::<F>(&[]).unwrap();
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

    fn errors_name_this_backend<F: Flavor>() {
        let unknown = client::<F>(&[("n_predict", "3")]);
        assert!(
            matches!(&unknown, Err(PluginError::InvalidConfig(m)) if m.contains(F::NAME)),
            "{:?}",
            unknown.err()
        );
        let mut spec = RequestSpec::text(String::new(), 1, 1);
        spec.prompt = Prompt::Chat(Vec::new());
        let refused = client::<F>(&[]).unwrap().build_request(spec);
        assert!(
            matches!(&refused, Err(PluginError::Unsupported(m)) if m.starts_with(&format!("{}:", F::NAME))),
            "{:?}",
            refused.err()
        );
    }

    /// A recorded vLLM stream (with a UTF-8 character and escapes), decoded whole and split
    /// at every byte as network reads split it: the same events every time.
    fn decodes_a_completions_stream<F: Flavor>() {
        let backend = client::<F>(&[]).unwrap();
        let head = crate::ResponseHead {
            status: 200,
            headers: Vec::new(),
        };
        let body = concat!(
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1718000001,\"model\":\"Qwen/Qwen3-0.6B\",\"choices\":[{\"index\":0,\"text\":\" Hi\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1718000001,\"model\":\"Qwen/Qwen3-0.6B\",\"choices\":[{\"index\":0,\"text\":\" \\\"café\\\"\\n\",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1718000001,\"model\":\"Qwen/Qwen3-0.6B\",\"choices\":[{\"index\":0,\"text\":\"!\",\"logprobs\":null,\"finish_reason\":\"length\",\"stop_reason\":null}],\"usage\":null}\n\n",
            "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1718000001,\"model\":\"Qwen/Qwen3-0.6B\",\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"total_tokens\":5,\"completion_tokens\":3,\"prompt_tokens_details\":{\"cached_tokens\":1}}}\n\n",
            "data: [DONE]\n\n",
        );
        let events =
            crate::native::decode_sse_split_everywhere(|| backend.decoder(&head).unwrap(), body);
        assert_eq!(
            events,
            [
                r#"0: chunk content=" Hi" reasoning=none"#,
                r#"1: chunk content=" \"café\"\n" reasoning=none"#,
                r#"2: chunk content="!" reasoning=none"#,
                "2: finish length",
                "3: usage prompt=2 completion=3",
            ]
        );
    }
}
