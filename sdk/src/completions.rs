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
        let logprobs = options.parse("logprobs")?;
        options.finish(&Self::describe().info.options)?;
        Ok(Completions {
            client,
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
