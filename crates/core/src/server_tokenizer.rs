//! vLLM's re-alignment of prompts to the server's tokenizer (0.32, `serve.py`,
//! `_align_prompts_to_server_tokenizer`), which `vllm bench serve` runs on the `random` and
//! `prefix_repetition` datasets before the benchmark: so bench sends the same prompts.
//!
//! The rule, as vLLM has it: the first prompt goes to the server's `POST /tokenize`
//! (`{"model", "prompt", "add_special_tokens": false}`). If that fails the prompts stay as
//! they are ("/tokenize unavailable"); if the server counts the dataset's `prompt_len`
//! tokens, too. Otherwise every prompt is tokenized by the server, and one the server
//! counts longer than its `prompt_len` is replaced by the server's `POST /detokenize` of
//! its first `prompt_len` tokens; `prompt_len` stays the dataset's. A prompt whose calls
//! fail keeps its text. At most 64 calls are in flight, as in vLLM.
//!
//! This runs before the clock starts and costs two calls per prompt only when the
//! tokenizers disagree.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{StreamExt, stream};
use serde_json::{Value, json};

use crate::client::Tls;
use crate::runtime::{Prompt, RequestSpec};

/// vLLM's `asyncio.Semaphore(64)`.
const IN_FLIGHT: usize = 64;

/// What the alignment did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Alignment {
    /// Not attempted: the first prompt is not a text.
    NotText,
    /// The server's `/tokenize` failed on the first prompt (the error); nothing changed.
    Unavailable(String),
    /// The server counts the first prompt as the dataset does; nothing changed.
    Agrees,
    /// The tokenizers disagree (`server` tokens against `expected` for the first prompt):
    /// `shortened` prompts were cut to their `prompt_len` server tokens, `failed` kept their
    /// text because a call failed.
    Realigned {
        server: usize,
        expected: u32,
        shortened: usize,
        failed: usize,
    },
}

/// Re-aligns `specs`' text prompts to the tokenizer of the server at `base_url` (without
/// `/v1`), as vLLM's client does.
pub async fn align(base_url: &str, model: &str, specs: &mut [RequestSpec], tls: Tls) -> Alignment {
    let Some(Prompt::Text(first)) = specs.first().map(|s| &s.prompt) else {
        return Alignment::NotText;
    };
    let server = match Server::new(base_url, model, tls) {
        Ok(server) => Arc::new(server),
        Err(e) => return Alignment::Unavailable(format!("{e:#}")),
    };
    let first_tokens = match server.tokenize(first).await {
        Ok(tokens) => tokens,
        Err(e) => return Alignment::Unavailable(format!("{e:#}")),
    };
    let expected = specs[0].prompt_len;
    if first_tokens.len() == expected as usize {
        return Alignment::Agrees;
    }
    let fixes: Vec<Result<Option<String>>> = stream::iter(specs.iter().map(|spec| {
        let server = server.clone();
        let (prompt, prompt_len) = (spec.prompt.clone(), spec.prompt_len as usize);
        async move {
            let Prompt::Text(text) = prompt else {
                bail!("not a text prompt");
            };
            let tokens = server.tokenize(&text).await?;
            if tokens.len() <= prompt_len {
                return Ok(None);
            }
            server.detokenize(&tokens[..prompt_len]).await.map(Some)
        }
    }))
    .buffered(IN_FLIGHT)
    .collect()
    .await;
    let (mut shortened, mut failed) = (0, 0);
    for (spec, fix) in specs.iter_mut().zip(fixes) {
        match fix {
            Ok(Some(text)) => {
                spec.prompt = Prompt::Text(text);
                shortened += 1;
            }
            Ok(None) => {}
            Err(_) => failed += 1,
        }
    }
    Alignment::Realigned {
        server: first_tokens.len(),
        expected,
        shortened,
        failed,
    }
}

/// The server's two endpoints.
struct Server {
    client: reqwest::Client,
    tokenize_url: String,
    detokenize_url: String,
    model: String,
}

impl Server {
    fn new(base_url: &str, model: &str, tls: Tls) -> Result<Self> {
        let base = base_url.trim_end_matches('/');
        Ok(Server {
            // aiohttp's default session timeout, which vLLM's client keeps.
            client: crate::client::reqwest_builder(tls)
                .timeout(Duration::from_secs(300))
                .build()
                .context("building an HTTP client")?,
            tokenize_url: format!("{base}/tokenize"),
            detokenize_url: format!("{base}/detokenize"),
            model: model.to_owned(),
        })
    }

    async fn post(&self, url: &str, body: Value) -> Result<Value> {
        let response = self
            .client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = response.status();
        if !status.is_success() {
            bail!("POST {url}: HTTP {status}");
        }
        let bytes = response
            .bytes()
            .await
            .with_context(|| format!("POST {url}: reading the answer"))?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("POST {url}: the answer is not JSON"))
    }

    async fn tokenize(&self, prompt: &str) -> Result<Vec<u64>> {
        let body = json!({"model": self.model, "prompt": prompt, "add_special_tokens": false});
        let answer = self.post(&self.tokenize_url, body).await?;
        serde_json::from_value(answer["tokens"].clone()).with_context(|| {
            format!(
                "POST {}: `tokens` is not a list of token ids",
                self.tokenize_url
            )
        })
    }

    async fn detokenize(&self, tokens: &[u64]) -> Result<String> {
        let body = json!({"model": self.model, "tokens": tokens});
        let answer = self.post(&self.detokenize_url, body).await?;
        answer["prompt"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("POST {}: no `prompt` string", self.detokenize_url))
    }
}
