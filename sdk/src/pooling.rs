//! Pooling backends: embeddings, vLLM's pooling API and rerank.
//!
//! vLLM 0.32's `POOLING_BACKENDS` (`vllm/benchmarks/lib/endpoint_request_func.py`) send one
//! JSON body and read one JSON body back: no stream, no generated text. What they share
//! lives here, so that each first-party plugin (`openai-embeddings`,
//! `openai-embeddings-chat`, `openai-embeddings-clip`, `openai-embeddings-vlm2vec`,
//! `infinity-embeddings`, `infinity-embeddings-clip`, `vllm-pooling`, `vllm-rerank`) is a
//! [`PoolingApi`] of a few lines: the body of its request, its path and what its response
//! holds. [`PoolingBackend`] does the rest:
//!
//! - the request: `model` (the request's LoRA adapter when it names one, as vLLM's
//!   `model_name`), the API's fields, then vLLM's `_update_payload_common` (`ignore_eos`
//!   when set, the client's extra body, the request's own), `Content-Type` and
//!   `x-request-id` headers. No `stream` and no default temperature: vLLM sends neither
//!   to a pooling API;
//! - the response ([`PoolingDecoder`]): the whole body is one JSON document, read with the
//!   zero-copy scanner, however the host framed it. It gives a [`Pooled`] event (kind,
//!   how many results, the first embedding's length), the server's `usage.prompt_tokens`
//!   (vLLM's `prompt_len` for these backends) and an in-band `error` as a failure. The
//!   events name the last frame: vLLM's `_run_pooling_request` stops its clock when the
//!   whole body has been read.

use std::marker::PhantomData;

use serde_json::{Map, Value, json};

use crate::json::{self, Cursor};
use crate::openai::{chat_message, content_part};
use crate::server_error::quote;
use crate::{
    Backend, BackendDescription, ClientConfig, ContentPart, Decoder, Event, EventKind, Framing,
    HttpRequest, OptionReader, PluginError, PluginInfo, Pooled, PooledKind, Prompt, RequestSpec,
    ResponseHead, Usage,
};

/// One pooling API: the fields of its request body and what its response holds.
pub trait PoolingApi: 'static {
    /// The backend's name (`--backend`).
    const NAME: &'static str;
    /// One line for `bench plugin inspect` and the help of `bench serve`.
    const DESCRIPTION: &'static str;
    /// The endpoint path used without `--endpoint`.
    const DEFAULT_PATH: &'static str;
    /// What the response's results are.
    const KIND: PooledKind;
    /// Whether vLLM's `_update_payload_common` applies (`ignore_eos`, extra bodies). vLLM's
    /// rerank request function skips it, so `vllm-rerank` sends neither.
    const MERGES_EXTRA_BODY: bool = true;

    /// Adds the API's own fields to `body`, which holds `model` already.
    fn fields(spec: &RequestSpec, body: &mut Map<String, Value>) -> Result<(), PluginError>;
}

/// What a pooling backend takes from its client configuration.
#[derive(Debug, Clone)]
pub struct PoolingClient {
    plugin: &'static str,
    model: String,
    ignore_eos: bool,
    extra_body: Map<String, Value>,
    /// vLLM's `encoding_format: "bytes"` (set in the extra body): the server answers
    /// with the raw vectors and puts what the JSON body would say in a `metadata` header.
    bytes: bool,
}

impl PoolingClient {
    /// Reads the configuration. `config.stream` is not used: a pooling API answers with one
    /// body, and vLLM sends no `stream` field to one. The returned reader holds the
    /// options for the plugin to read and [`OptionReader::finish`].
    pub fn open(
        plugin: &'static str,
        config: ClientConfig,
    ) -> Result<(Self, OptionReader), PluginError> {
        let options = OptionReader::new(plugin, config.options);
        let extra_body = match &config.extra_body {
            None => Map::new(),
            Some(text) => object(text).map_err(|e| {
                PluginError::InvalidConfig(format!("{plugin}: the client's extra body {e}"))
            })?,
        };
        let bytes = match extra_body.get("encoding_format").and_then(Value::as_str) {
            Some("bytes") => true,
            // The body is the vectors alone: nothing says how many there are.
            Some("bytes_only") => {
                return Err(PluginError::Unsupported(format!(
                    "{plugin}: encoding_format \"bytes_only\" answers without saying how many \
                     results it holds; use \"bytes\" (the same vectors, with a metadata header)"
                )));
            }
            _ => false,
        };
        let client = PoolingClient {
            plugin,
            model: config.model,
            ignore_eos: config.ignore_eos,
            extra_body,
            bytes,
        };
        Ok((client, options))
    }

    /// A body holding the model: the request's LoRA adapter when it names one, else the
    /// client's model.
    pub fn body(&self, spec: &RequestSpec) -> Map<String, Value> {
        let model = spec
            .lora_name
            .as_deref()
            .filter(|name| !name.is_empty())
            .unwrap_or(&self.model);
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body
    }

    /// Finishes `body` and makes the request: with `merge`, vLLM's
    /// `_update_payload_common` (`ignore_eos` when set, then the client's extra body, then
    /// the request's, later entries winning); headers `Content-Type: application/json` and
    /// `x-request-id` when the request has an id (the host adds authorization and
    /// `--header` values).
    pub fn request(
        &self,
        mut body: Map<String, Value>,
        spec: &RequestSpec,
        merge: bool,
    ) -> Result<HttpRequest, PluginError> {
        crate::structured::refuse(self.plugin, spec)?;
        if merge {
            if self.ignore_eos {
                body.insert("ignore_eos".into(), json!(true));
            }
            body.extend(self.extra_body.iter().map(|(k, v)| (k.clone(), v.clone())));
            if let Some(text) = &spec.extra_body {
                let extra = object(text).map_err(|e| {
                    PluginError::InvalidInput(format!(
                        "{}: the request's extra body {e}",
                        self.plugin
                    ))
                })?;
                body.extend(extra);
            }
        }
        crate::native::json_post(self.plugin, body, spec)
    }
}

/// A JSON object (an extra body); duplicate keys keep the last value, as Python does.
fn object(text: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("must be a JSON object".to_string()),
        Err(e) => Err(format!("is not valid JSON: {e}")),
    }
}

/// A [`PoolingApi`] as a backend plugin: `bench_sdk::export_backend!(PoolingBackend<MyApi>)`.
/// It takes no options of its own.
pub struct PoolingBackend<A> {
    client: PoolingClient,
    api: PhantomData<A>,
}

impl<A: PoolingApi> Backend for PoolingBackend<A> {
    type Decoder = PoolingDecoder;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: A::NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: A::DESCRIPTION.into(),
                options: Vec::new(),
            },
            // Not in vLLM's OPENAI_COMPATIBLE_BACKENDS: no default `ignore_eos`.
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = PoolingClient::open(A::NAME, config)?;
        options.finish(&[])?;
        Ok(PoolingBackend {
            client,
            api: PhantomData,
        })
    }

    fn framing(&self) -> Framing {
        Framing::Raw
    }

    fn default_path(&self) -> String {
        A::DEFAULT_PATH.into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let mut body = self.client.body(&spec);
        A::fields(&spec, &mut body)?;
        self.client.request(body, &spec, A::MERGES_EXTRA_BODY)
    }

    fn decoder(&self, head: &ResponseHead) -> Result<PoolingDecoder, PluginError> {
        Ok(if self.client.bytes {
            PoolingDecoder::bytes(A::KIND, head)
        } else {
            PoolingDecoder::new(A::KIND)
        })
    }
}

/// The `input` of an embeddings or pooling request: a text, a batch of texts (vLLM's
/// `--random-batch-size`) or token ids, as vLLM sends its `prompt`.
pub fn input(plugin: &str, spec: &RequestSpec) -> Result<Value, PluginError> {
    match &spec.prompt {
        Prompt::Text(text) => Ok(json!(text)),
        Prompt::Texts(texts) => Ok(json!(texts)),
        Prompt::TokenIds(ids) => Ok(json!(ids)),
        Prompt::Chat(_) => Err(PluginError::Unsupported(format!(
            "{plugin}: chat messages go to an embeddings-chat backend (openai-embeddings-chat)"
        ))),
        Prompt::Rerank(_) => Err(PluginError::Unsupported(format!(
            "{plugin}: a rerank query goes to --backend vllm-rerank (or give the dataset \
             --no-reranker to embed its texts)"
        ))),
    }
}

/// Where a request's multimodal items go in its chat message, next to its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaPosition {
    First,
    Last,
}

/// The `messages` of an embeddings-chat request (vLLM's `_get_chat_messages`): chat
/// messages as given, else one user message whose content is the text part and the
/// multimodal items, in the order `position` says. `text` replaces the prompt's text
/// when set (the clip and vlm2vec rules).
pub fn chat_messages(
    plugin: &str,
    spec: &RequestSpec,
    text: Option<&str>,
    position: MediaPosition,
) -> Result<Value, PluginError> {
    let prompt = match (&spec.prompt, text) {
        (_, Some(text)) => text,
        (Prompt::Text(text), None) => text.as_str(),
        (Prompt::Chat(chat), None) => {
            if !spec.multimodal.is_empty() {
                return Err(PluginError::Unsupported(format!(
                    "{plugin}: a request has both chat messages and separate multimodal items"
                )));
            }
            return chat
                .iter()
                .map(|m| chat_message(plugin, m))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array);
        }
        (Prompt::TokenIds(_) | Prompt::Texts(_) | Prompt::Rerank(_), None) => {
            return Err(PluginError::Unsupported(format!(
                "{plugin}: the embeddings chat API takes one text or chat messages; use \
                 --backend openai-embeddings for token ids and batches of texts"
            )));
        }
    };
    let text = json!({ "type": "text", "text": prompt });
    let media = spec.multimodal.iter().map(|p| content_part(plugin, p));
    let content: Vec<Value> = match position {
        MediaPosition::First => media
            .chain(std::iter::once(Ok(text)))
            .collect::<Result<_, _>>()?,
        MediaPosition::Last => std::iter::once(Ok(text))
            .chain(media)
            .collect::<Result<_, _>>()?,
    };
    Ok(json!([{ "role": "user", "content": content }]))
}

/// The number at the end of a request id (`bench-12` -> 12), as vLLM's
/// `_try_extract_request_idx` reads it for the vlm2vec rule.
pub fn request_index(request_id: Option<&str>) -> Option<u64> {
    let id = request_id?;
    let digits = id.len() - id.bytes().rev().take_while(u8::is_ascii_digit).count();
    id[digits..].parse().ok()
}

/// The one multimodal item of an Infinity request without text: its URL and modality
/// (`image` for an `image_url`, as vLLM's `type.split("_")[0]`).
pub fn single_media<'a>(
    plugin: &str,
    spec: &'a RequestSpec,
) -> Result<(&'a str, &'static str), PluginError> {
    match spec.multimodal.as_slice() {
        [ContentPart::ImageUrl(url)] => Ok((url, "image")),
        [ContentPart::AudioUrl(url)] => Ok((url, "audio")),
        [ContentPart::VideoUrl(url)] => Ok((url, "video")),
        [] => Err(PluginError::InvalidInput(format!(
            "{plugin}: a request has neither text nor a multimodal item"
        ))),
        [_] => Err(PluginError::Unsupported(format!(
            "{plugin}: only image, audio and video URLs can be embedded"
        ))),
        items => Err(PluginError::Unsupported(format!(
            "{plugin}: a request has {} multimodal items; the API embeds one",
            items.len()
        ))),
    }
}

/// The fields of an Infinity embeddings request (vLLM's
/// `async_request_infinity_embeddings`): the prompt as `input` when it is not empty,
/// else the request's one multimodal item's URL with its `modality`. With `clip`, a
/// request with a multimodal item drops its text first (vLLM's `_preprocess_clip`), as a
/// CLIP model embeds one or the other.
pub fn infinity_fields(
    plugin: &str,
    spec: &RequestSpec,
    clip: bool,
    body: &mut Map<String, Value>,
) -> Result<(), PluginError> {
    let has_text = match &spec.prompt {
        Prompt::Text(text) => !text.is_empty(),
        Prompt::Texts(texts) => !texts.is_empty(),
        Prompt::TokenIds(ids) => !ids.is_empty(),
        Prompt::Chat(_) | Prompt::Rerank(_) => true,
    };
    if has_text && (!clip || spec.multimodal.is_empty()) {
        body.insert("input".into(), input(plugin, spec)?);
    } else {
        let (url, modality) = single_media(plugin, spec)?;
        body.insert("input".into(), json!(url));
        body.insert("modality".into(), json!(modality));
    }
    Ok(())
}

/// Decodes a pooling response: `data` (embeddings, pooling outputs, scores) or `results`
/// (rerank), `usage` and `error`, from the whole body, or, for vLLM's `encoding_format:
/// "bytes"`, from the JSON of the response's `metadata` header (its `data` items give
/// each vector's `shape`), the body being the raw vectors.
#[derive(Debug, Clone)]
pub struct PoolingDecoder {
    kind: PooledKind,
    /// `None`: the body is JSON. `Some(Some(json))`: a bytes response and its metadata;
    /// `Some(None)`: a bytes response without a metadata header.
    metadata: Option<Option<Vec<u8>>>,
}

/// What a body says.
#[derive(Default)]
struct Body {
    /// The number of results and the first one's vector length.
    results: Option<(u32, u32)>,
    usage: Option<Usage>,
    error: Option<json::Str>,
    /// An error that is not a string and has no string `message`.
    error_raw: bool,
}

impl PoolingDecoder {
    /// A decoder for JSON bodies.
    pub fn new(kind: PooledKind) -> Self {
        PoolingDecoder {
            kind,
            metadata: None,
        }
    }

    /// A decoder for a bytes response (`encoding_format: "bytes"`) with the head `head`.
    pub fn bytes(kind: PooledKind, head: &ResponseHead) -> Self {
        let metadata = head.header("metadata").map(|m| m.as_bytes().to_vec());
        PoolingDecoder {
            kind,
            metadata: Some(metadata),
        }
    }

    fn scan(bytes: &[u8]) -> json::Result<Body> {
        let mut body = Body::default();
        let mut cur = Cursor::new(bytes);
        let members = cur.object(|key, v| {
            if key.is("data") || key.is("results") {
                body.results = results(v)?;
            } else if key.is("usage") {
                v.object(|key, v| {
                    if key.is("prompt_tokens") {
                        let tokens = v.u64()?.and_then(|n| u32::try_from(n).ok());
                        body.usage = Some(Usage {
                            prompt_tokens: tokens,
                            completion_tokens: None,
                            cached_prompt_tokens: None,
                        });
                    }
                    Ok(())
                })?;
            } else if key.is("error") && !v.null()? {
                if let Some(message) = v.string()? {
                    body.error = Some(message);
                } else {
                    body.error_raw = true;
                    v.object(|key, v| {
                        if key.is("message") {
                            body.error = v.string()?;
                        }
                        Ok(())
                    })?;
                }
            }
            Ok(())
        })?;
        if members.is_none() {
            return Err(json::Error {
                offset: 0,
                what: "expected a JSON object",
            });
        }
        cur.finish()?;
        Ok(body)
    }
}

/// An array's length and its first element's vector length (`embedding` or `data`, an
/// array; 0 for a base64 string or a score); `None` when it is not an array.
fn results(v: &mut Cursor<'_>) -> json::Result<Option<(u32, u32)>> {
    let mut dimension = 0u32;
    let count = v.array(|index, item| {
        if index == 0 {
            item.object(|key, v| {
                if key.is("embedding") || key.is("data") {
                    dimension = v.array(|_, _| Ok(()))?.unwrap_or(0) as u32;
                } else if key.is("shape") {
                    // A bytes response's metadata: the vector's shape, outermost first.
                    v.array(|i, n| {
                        if i == 0 {
                            dimension = n.u64()?.map_or(0, |n| n.min(u64::from(u32::MAX)) as u32);
                        }
                        Ok(())
                    })?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok(count.map(|n| (n as u32, dimension)))
}

impl Decoder for PoolingDecoder {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        // Frames lie end to end: the body is the buffer up to the last frame's end.
        let Some(last) = crate::backend::frames(buffer, frame_ends)?.last() else {
            return Ok(());
        };
        let frame = last.index();
        let bytes = match &self.metadata {
            None => &buffer[..last.range().end],
            Some(Some(metadata)) => metadata.as_slice(),
            Some(None) => {
                out.push(Event {
                    frame,
                    kind: EventKind::malformed_frame(
                        "a bytes response (encoding_format \"bytes\") without its metadata header",
                    ),
                });
                return Ok(());
            }
        };
        let kind = match Self::scan(bytes) {
            Err(e) => EventKind::malformed_frame(format!(
                "invalid JSON in a pooling response: {e}; the body starts {}",
                quote(bytes)
            )),
            Ok(body) if body.error.is_some() || body.error_raw => {
                let message = body
                    .error
                    .map_or_else(|| "(no message)".to_string(), |s| s.text(bytes));
                EventKind::server_error(format!("the server reported an error: {message}"))
            }
            Ok(body) => {
                if let Some(usage) = body.usage {
                    out.push(Event {
                        frame,
                        kind: EventKind::Usage(usage),
                    });
                }
                match body.results {
                    Some((count, dimension)) => EventKind::Pooled(Pooled {
                        kind: self.kind,
                        count,
                        dimension,
                    }),
                    None => EventKind::malformed_frame(format!(
                        "a pooling response without a `data` or `results` array; the body \
                         starts {}",
                        quote(bytes)
                    )),
                }
            }
        };
        out.push(Event { frame, kind });
        Ok(())
    }
}

/// Decodes `body` cut into two frames at every byte boundary (and whole) and checks that
/// every cut gives the events of the whole body, each naming the last frame; returns
/// them rendered (see [`crate::openai::render`]). For plugins' decoder tests: a pooling
/// response is one document however the host framed it.
pub fn decode_at_every_cut<B: Backend>(backend: &B, body: &str) -> Vec<String> {
    let head = ResponseHead {
        status: 200,
        headers: Vec::new(),
    };
    let decode = |ends: &[u32]| {
        let mut decoder = backend.decoder(&head).unwrap();
        let mut out = Vec::new();
        decoder.feed(body.as_bytes(), ends, &mut out).unwrap();
        decoder.finish(&mut out).unwrap();
        out.iter()
            .map(|e| crate::openai::render(body.as_bytes(), e))
            .collect::<Vec<_>>()
    };
    let len = body.len() as u32;
    let whole = decode(&[len]);
    for cut in 0..=len {
        let events = decode(&[cut, len]);
        let moved: Vec<String> = whole.iter().map(|e| e.replacen("0: ", "1: ", 1)).collect();
        assert_eq!(events, moved, "cut at byte {cut}");
    }
    whole
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(kind: PooledKind, frames: &[&str]) -> Vec<String> {
        crate::openai::render_frames(&mut PoolingDecoder::new(kind), frames)
    }

    #[test]
    fn embeddings_give_their_count_dimension_and_prompt_tokens() {
        let body = r#"{"id":"embd-1","object":"list","created":1,"model":"m","data":[{"index":0,"object":"embedding","embedding":[0.1,-0.2,3e-2]},{"index":1,"object":"embedding","embedding":[1,2,3]}],"usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0,"prompt_tokens_details":null}}"#;
        assert_eq!(
            render(PooledKind::Embedding, &[body]),
            [
                "0: usage prompt=12 completion=none",
                "0: pooled PooledKind::Embedding 2x3"
            ]
        );
        // Split in frames, the body is still one document; the events name the last.
        let (a, b) = body.split_at(40);
        assert_eq!(
            render(PooledKind::Embedding, &[a, b]),
            [
                "1: usage prompt=12 completion=none",
                "1: pooled PooledKind::Embedding 2x3"
            ]
        );
    }

    #[test]
    fn rerank_pooling_and_base64_shapes() {
        let rerank = r#"{"id":"rerank-1","model":"m","usage":{"prompt_tokens":30,"total_tokens":30},"results":[{"index":1,"document":{"text":"b"},"relevance_score":0.9},{"index":0,"document":{"text":"a"},"relevance_score":0.1}]}"#;
        assert_eq!(
            render(PooledKind::Score, &[rerank]),
            [
                "0: usage prompt=30 completion=none",
                "0: pooled PooledKind::Score 2x0"
            ]
        );
        let pooling = r#"{"object":"list","data":[{"index":0,"object":"pooling","data":[[1,2],[3,4],[5,6]]}],"usage":{"prompt_tokens":3}}"#;
        assert_eq!(
            render(PooledKind::Other, &[pooling]),
            [
                "0: usage prompt=3 completion=none",
                "0: pooled PooledKind::Other 1x3"
            ]
        );
        let base64 = r#"{"data":[{"embedding":"AAAA"}],"usage":{"total_tokens":4}}"#;
        assert_eq!(
            render(PooledKind::Embedding, &[base64]),
            ["0: pooled PooledKind::Embedding 1x0"]
        );
    }

    #[test]
    fn errors_and_bodies_without_results_fail() {
        let events = render(
            PooledKind::Embedding,
            &[r#"{"error":{"message":"too long","code":400},"data":[]}"#],
        );
        assert_eq!(
            events,
            ["0: error server: the server reported an error: too long"]
        );
        let events = render(PooledKind::Embedding, &[r#"{"object":"list"}"#]);
        assert_eq!(events.len(), 1);
        assert!(
            events[0].starts_with("0: error malformed: a pooling response without"),
            "{events:?}"
        );
        let events = render(PooledKind::Embedding, &[r#"{"data":[1,"#]);
        assert!(
            events[0].starts_with("0: error malformed: invalid JSON in a pooling response"),
            "{events:?}"
        );
        // No frame at all: nothing (the host fails the request for no output).
        assert!(render(PooledKind::Embedding, &[]).is_empty());
        let mut out = Vec::new();
        assert!(
            PoolingDecoder::new(PooledKind::Score)
                .feed(b"{}", &[2, 1], &mut out)
                .is_err()
        );
    }

    #[test]
    fn bytes_responses_are_read_from_their_metadata_header() {
        let head = |headers: &str| ResponseHead {
            status: 200,
            headers: headers.as_bytes().to_vec(),
        };
        let metadata = r#"metadata: {"id":"embd-1","created":1,"model":"m","data":[{"index":0,"embed_dtype":"float32","endianness":"native","start":0,"end":16,"shape":[4]},{"index":1,"embed_dtype":"float32","endianness":"native","start":16,"end":32,"shape":[4]}],"usage":{"prompt_tokens":6,"total_tokens":6}}"#;
        let body = [0u8, 0, 128, 63, 0, 0, 0, 64];
        let decode = |decoder: &mut PoolingDecoder| {
            let mut out = Vec::new();
            decoder.feed(&body, &[4, 8], &mut out).unwrap();
            out.iter()
                .map(|e| crate::openai::render(&body, e))
                .collect::<Vec<_>>()
        };
        let mut decoder = PoolingDecoder::bytes(
            PooledKind::Embedding,
            &head(&format!(
                "content-type: application/octet-stream\r\n{metadata}\r\n"
            )),
        );
        assert_eq!(
            decode(&mut decoder),
            [
                "1: usage prompt=6 completion=none",
                "1: pooled PooledKind::Embedding 2x4"
            ]
        );
        let mut decoder = PoolingDecoder::bytes(PooledKind::Embedding, &head(""));
        let events = decode(&mut decoder);
        assert!(
            events[0].starts_with("1: error malformed: a bytes response"),
            "{events:?}"
        );
        // The client asks for it with the extra body; bytes_only is refused.
        let open = |extra: &str| {
            PoolingClient::open(
                "t",
                ClientConfig {
                    model: "m".into(),
                    ignore_eos: false,
                    stream: false,
                    extra_body: Some(extra.into()),
                    options: Vec::new(),
                },
            )
            .map(|(client, _)| client.bytes)
        };
        assert!(open(r#"{"encoding_format":"bytes"}"#).unwrap());
        assert!(!open(r#"{"encoding_format":"float"}"#).unwrap());
        assert!(matches!(
            open(r#"{"encoding_format":"bytes_only"}"#),
            Err(PluginError::Unsupported(_))
        ));
    }

    /// Damaged bodies (cut, spliced, stray bytes) never panic the decoder and fail only
    /// as malformed or server errors; frame ends out of order are refused.
    #[test]
    fn fuzz_damaged_bodies() {
        struct Api;
        impl PoolingApi for Api {
            const NAME: &'static str = "t";
            const DESCRIPTION: &'static str = "t";
            const DEFAULT_PATH: &'static str = "/t";
            const KIND: PooledKind = PooledKind::Embedding;
            fn fields(
                spec: &RequestSpec,
                body: &mut Map<String, Value>,
            ) -> Result<(), PluginError> {
                body.insert("input".into(), input("t", spec)?);
                Ok(())
            }
        }
        let seeds: [&[u8]; 4] = [
            br#"{"object":"list","data":[{"index":0,"object":"embedding","embedding":[0.5,-1e-3,2]}],"usage":{"prompt_tokens":3,"total_tokens":3}}"#,
            br#"{"id":"rerank-1","usage":{"prompt_tokens":9},"results":[{"index":0,"relevance_score":0.5}]}"#,
            br#"{"data":[{"index":0,"object":"pooling","data":[[1,2],[3]]}]}"#,
            br#"{"error":{"message":"too long","code":400}}"#,
        ];
        let backend = PoolingBackend::<Api>::open(ClientConfig {
            model: "m".into(),
            ignore_eos: false,
            stream: false,
            extra_body: None,
            options: Vec::new(),
        })
        .unwrap();
        let head = ResponseHead {
            status: 200,
            headers: Vec::new(),
        };
        let responses = seeds.map(|seed| [seed]);
        let responses = responses.each_ref().map(|r| &r[..]);
        // One document over the frames of a call: fed whole only.
        let events = crate::testing::Fuzz::new(&responses)
            .one_call_per_response()
            .run(|| backend.decoder(&head).unwrap());
        assert_eq!(
            events[0],
            [
                "0: usage prompt=3 completion=none",
                "0: pooled PooledKind::Embedding 1x3"
            ]
        );
    }

    #[test]
    fn request_indexes_are_the_trailing_number() {
        assert_eq!(request_index(Some("bench-run-12")), Some(12));
        assert_eq!(request_index(Some("7")), Some(7));
        assert_eq!(request_index(Some("bench-")), None);
        assert_eq!(request_index(None), None);
    }
}
