//! The `openai-audio` backend: OpenAI's audio transcriptions and translations
//! (`/v1/audio/transcriptions`, `/v1/audio/translations`), sent and read as vLLM's
//! `--backend openai-audio` does (`async_request_openai_audio` in
//! `vllm/benchmarks/lib/endpoint_request_func.py`, vLLM 0.32).
//!
//! A request uploads its audio clip (the request's binary content part, which the ASR
//! datasets make: `--dataset-name hf` with an ASR set, `custom_audio` without
//! `--enable-multimodal-chat`) as the form's `file`, under the file name and content type
//! the dataset gave it: `audio.wav`, `audio/wav` for a clip re-encoded as 16-bit PCM WAV,
//! exactly what vLLM uploads after `soundfile.write(..., format="WAV")`. The other fields
//! are vLLM's: `model`, `max_completion_tokens`, `stream`, `language: en`,
//! `stream_include_usage` and `stream_continuous_usage_stats` (a form cannot nest
//! `stream_options`), then `ignore_eos` and the extra bodies (sampling parameters,
//! `--extra-body`), later ones winning; each field's value is written as Python's `str`
//! writes it (`True`, `0.0`), since that is what vLLM's form sends. The prompt text is not
//! sent, as vLLM does not send it: the server prompts its model itself.
//!
//! Transcription or translation is the endpoint's choice (`--endpoint
//! /v1/audio/translations`), as in vLLM: the form is the same.
//!
//! The stream is chat-completion-like chunks (`choices[0].delta.content`), read by the
//! SDK's [`OpenAiDecoder`], with vLLM's rule for usage: the usage of the frame without
//! choices is the output length. Without streaming the answer is `{"text": ...}`.

use bench_sdk::json::{self, Cursor, Str};
use bench_sdk::multipart::{self, Part};
use bench_sdk::native::{ServerError, server_error};
use bench_sdk::openai::{ChoiceFields, OpenAiClient, OpenAiDecoder, common_options};
use bench_sdk::{
    Backend, BackendDescription, BinaryData, Chunk, ClientConfig, ContentPart, Decoder, Event,
    EventKind, Frame, Framing, HttpRequest, PluginError, PluginInfo, Prompt, RequestSpec,
    ResponseHead, Usage,
};
use serde_json::{Value, json};

const NAME: &str = "openai-audio";

/// A streamed chunk keeps its text in `choices[0].delta.content`; no reasoning.
const STREAM_FIELDS: ChoiceFields = ChoiceFields {
    holder: Some("delta"),
    content: "content",
    reasoning: &[],
};

/// The transcriptions and translations backend.
pub struct Audio {
    client: OpenAiClient,
}

impl Backend for Audio {
    type Decoder = AudioDecoder;

    fn describe() -> BackendDescription {
        BackendDescription {
            info: PluginInfo {
                name: NAME.into(),
                version: env!("CARGO_PKG_VERSION").into(),
                description: "OpenAI audio transcriptions (/v1/audio/transcriptions) and \
                              translations (--endpoint /v1/audio/translations), as vLLM's \
                              --backend openai-audio: each request uploads its audio clip as \
                              multipart form data and streams the text."
                    .into(),
                options: common_options(),
            },
            // vLLM's OPENAI_COMPATIBLE_BACKENDS leaves the audio request function out.
            openai_compatible: false,
        }
    }

    fn open(config: ClientConfig) -> Result<Self, PluginError> {
        let (client, options) = OpenAiClient::open(NAME, config)?;
        options.finish(&Self::describe().info.options)?;
        Ok(Audio { client })
    }

    fn framing(&self) -> Framing {
        self.client.framing()
    }

    fn default_path(&self) -> String {
        "/v1/audio/transcriptions".into()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        let clip = clip(&spec)?;
        let mut body = self.client.body(&spec);
        body.insert(
            "max_completion_tokens".into(),
            json!(spec.expected_output_len),
        );
        body.insert("language".into(), json!("en"));
        if self.client.stream() {
            body.insert("stream_include_usage".into(), json!(true));
            body.insert("stream_continuous_usage_stats".into(), json!(true));
        }
        let body = self.client.merged(body, &spec, false)?;
        let values: Vec<(&str, String)> = body
            .iter()
            .map(|(key, value)| (key.as_str(), python_str(value)))
            .collect();
        let parts: Vec<Part<'_>> = std::iter::once(Part::file(
            "file",
            &clip.file_name,
            &clip.mime_type,
            &clip.data,
        ))
        .chain(values.iter().map(|(key, value)| Part::text(key, value)))
        .collect();
        let form = multipart::encode(&parts, seed(&spec));
        Ok(HttpRequest {
            method: "POST".into(),
            headers: self.client.headers(&spec, &form.content_type),
            body: form.body,
        })
    }

    fn decoder(&self, _head: &ResponseHead) -> Result<AudioDecoder, PluginError> {
        Ok(if self.client.stream() {
            AudioDecoder::Stream(self.client.decoder(STREAM_FIELDS))
        } else {
            AudioDecoder::Whole
        })
    }
}

bench_sdk::export_backend!(Audio);

/// The request's audio clip: its one binary content part.
fn clip(spec: &RequestSpec) -> Result<&BinaryData, PluginError> {
    if let Prompt::Chat(_) = spec.prompt {
        return Err(PluginError::Unsupported(format!(
            "{NAME}: a transcription request uploads an audio clip, not chat messages; \
             without --enable-multimodal-chat the audio datasets make such requests, or \
             use --backend openai-chat for chat with audio"
        )));
    }
    let mut clips = spec.multimodal.iter().filter_map(|part| match part {
        ContentPart::Binary(data) => Some(data),
        _ => None,
    });
    match (clips.next(), clips.next()) {
        (Some(clip), None) if spec.multimodal.len() == 1 => Ok(clip),
        (None, _) => Err(PluginError::Unsupported(format!(
            "{NAME}: the request has no audio clip to upload; use an ASR dataset (--dataset-name \
             hf with an ASR set, or custom_audio)"
        ))),
        _ => Err(PluginError::Unsupported(format!(
            "{NAME}: a transcription request uploads one audio clip and nothing else, but the \
             request has {} multimodal items",
            spec.multimodal.len()
        ))),
    }
}

/// A form field's value as Python's `str` writes it, which is what vLLM's form sends:
/// a string as it is, `True`/`False`, `None`, a whole number as digits and a float with
/// its decimal point (`0.0`). Lists and objects are written as JSON (Python would write
/// its own repr, which no server parses either).
fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            let text = n.to_string();
            if f.is_finite() && !text.contains(['.', 'e', 'E']) {
                format!("{text}.0")
            } else {
                text
            }
        }
        other => other.to_string(),
    }
}

/// The boundary's seed: the request id's bytes (FNV-1a), so a request's body is the same
/// from run to run.
fn seed(spec: &RequestSpec) -> u64 {
    spec.request_id
        .as_deref()
        .unwrap_or_default()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        })
}

/// A streamed response (chunks in OpenAI's format) or one whole `{"text": ...}` answer.
pub enum AudioDecoder {
    Stream(OpenAiDecoder),
    Whole,
}

impl Decoder for AudioDecoder {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError> {
        match self {
            AudioDecoder::Stream(decoder) => decoder.feed(buffer, frame_ends, out),
            AudioDecoder::Whole => {
                for frame in bench_sdk::backend::frames(buffer, frame_ends)? {
                    whole(frame, out);
                }
                Ok(())
            }
        }
    }
}

/// What a whole answer says.
#[derive(Default)]
struct Whole {
    text: Option<Str>,
    usage: Option<Usage>,
    error: Option<ServerError>,
}

/// A whole answer: `text` is a chunk, `usage` (when it has token counts) the usage, a
/// non-null `error` an in-band error.
fn whole(at: Frame<'_>, out: &mut Vec<Event>) {
    let (bytes, frame) = (at.bytes(), at.index());
    let read = || -> json::Result<Whole> {
        let mut answer = Whole::default();
        let mut cur = Cursor::new(bytes);
        let object = cur.object(|key, v| {
            if key.is("text") {
                answer.text = v.string()?;
            } else if key.is("usage") {
                let mut usage = Usage {
                    prompt_tokens: None,
                    completion_tokens: None,
                    cached_prompt_tokens: None,
                };
                v.object(|key, v| {
                    let n = |v: &mut Cursor<'_>| -> json::Result<Option<u32>> {
                        Ok(v.u64()?.and_then(|n| u32::try_from(n).ok()))
                    };
                    if key.is("prompt_tokens") {
                        usage.prompt_tokens = n(v)?;
                    } else if key.is("completion_tokens") {
                        usage.completion_tokens = n(v)?;
                    }
                    Ok(())
                })?;
                // OpenAI's `{"type": "duration", "seconds": n}` has no token counts.
                if usage.prompt_tokens.is_some() || usage.completion_tokens.is_some() {
                    answer.usage = Some(usage);
                }
            } else if key.is("error") {
                answer.error = server_error(v)?;
            }
            Ok(())
        })?;
        if object.is_none() {
            return Err(json::Error {
                offset: 0,
                what: "expected a JSON object",
            });
        }
        cur.finish()?;
        Ok(answer)
    };
    let answer = match read() {
        Ok(answer) => answer,
        Err(e) => {
            let cut = bytes.len().min(120);
            out.push(Event {
                frame,
                kind: EventKind::malformed_frame(format!(
                    "invalid JSON in a response frame: {e}; the frame starts {:?}{}",
                    String::from_utf8_lossy(&bytes[..cut]),
                    if cut < bytes.len() { "..." } else { "" }
                )),
            });
            return;
        }
    };
    if let Some(text) = answer.text {
        out.push(Event {
            frame,
            kind: EventKind::Chunk(Chunk {
                content: Some(at.span(text)),
                reasoning: None,
                tokens: None,
            }),
        });
    }
    if let Some(usage) = answer.usage {
        out.push(Event {
            frame,
            kind: EventKind::Usage(usage),
        });
    }
    if let Some(error) = answer.error {
        out.push(Event {
            frame,
            kind: error.event(bytes),
        });
    }
}

#[cfg(test)]
mod tests;
