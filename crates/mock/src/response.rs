//! Response bytes in OpenAI's exact shapes, built without serde on the streaming path,
//! and in the shapes of the other servers' own APIs (TGI, Triton's TensorRT-LLM, SGLang,
//! llama.cpp), so that each backend plugin is tested against the protocol it speaks.
//!
//! Per request the mock formats the parts that vary (id, `created`, usage) once; each
//! OpenAI chunk is then four slice copies into a shared, block-allocated buffer, so a
//! stream of N tokens costs about one allocation per 16 KiB of output rather than one per
//! chunk. The other APIs' chunks carry per-token numbers and are formatted per chunk.

use std::convert::Infallible;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use tokio::time::{Instant, Sleep, sleep_until};

use super::reply::{
    Api, ChunkShape, Content, Pieces, Reasoning, ReasoningField, Reply, WORDS, error_object,
    token_text, usage_counts, word,
};
use super::timing::{PendingRequest, SentMetrics, TimingRecorder};

impl Api {
    /// The in-band error event of a server's own API (OpenAI's is [`error_object`]).
    fn error_event(self, message: &str) -> Vec<u8> {
        let message = serde_json::Value::from(message);
        let mut out = Vec::new();
        let _ = match self {
            Api::Tgi => write!(
                out,
                r#"data:{{"error":{message},"error_type":"generation"}}"#
            ),
            Api::Triton => write!(out, r#"data: {{"error":{message}}}"#),
            Api::LlamaCpp => write!(
                out,
                r#"data: {{"error":{{"code":500,"message":{message},"type":"server_error"}}}}"#
            ),
            Api::Responses => {
                super::responses::error_event(&message, &mut out);
                return out;
            }
            Api::Messages => {
                super::messages::error_event(&message, &mut out);
                return out;
            }
            Api::Completions | Api::Chat | Api::Sglang | Api::Audio => {
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&error_object(message.as_str().unwrap_or_default()));
                Ok(())
            }
        };
        out.extend_from_slice(b"\n\n");
        out
    }
}

impl Reply<'_> {
    /// `{"id":"…","object":"…","created":…,"model":"…",` (an unfinished JSON object).
    fn object_head(&self, out: &mut Vec<u8>, object: &str) {
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            r#"{{"id":"{}{:016x}","object":"{}","created":{},"model":{},"#,
            self.api.id_prefix(),
            self.id,
            object,
            self.created,
            self.model_json
        );
    }

    /// `"usage":{…}`: the usage member, the object left open for what follows it.
    fn usage_member(&self, out: &mut Vec<u8>) {
        usage_counts(
            out,
            self.prompt_tokens,
            self.usage_tokens(self.completion_tokens),
        );
        if let Some(cached) = self.cached_tokens {
            let _ = write!(
                out,
                r#","prompt_tokens_details":{{"cached_tokens":{cached}}}"#
            );
        }
        out.push(b'}');
    }

    /// The non-streaming response body with its content fault: the whole answer, the
    /// answer's first half (malformed), or the error object; `metrics` goes after the
    /// usage of an OpenAI answer (`--per-request-metrics`).
    pub fn json_body_with(&self, content: &Content, metrics: Option<&SentMetrics>) -> Bytes {
        match content {
            Content::Normal | Content::NoDone => self.json_body(metrics),
            Content::Malformed => {
                let mut body = self.json_body(metrics);
                body.truncate(body.len() / 2);
                body
            }
            Content::ErrorEvent(message) => error_object(message).into(),
        }
    }

    /// The whole non-streaming response body (`text_completion` or `chat.completion`),
    /// always with usage, and with vLLM's per-request `metrics` when given.
    pub fn json_body(&self, metrics: Option<&SentMetrics>) -> Bytes {
        let mut out = Vec::with_capacity(256 + 8 * self.completion_tokens as usize);
        if !self.api.is_openai() {
            self.native_body(&mut out);
            return out.into();
        }
        self.object_head(&mut out, self.api.object());
        let reasoning = self.reasoning_tokens();
        if reasoning > 0 {
            let _ = write!(
                out,
                r#""choices":[{{"index":0,"message":{{"role":"assistant","{}":""#,
                self.reasoning.field.key()
            );
            self.text(reasoning, &mut out);
            out.extend_from_slice(br#"","content":""#);
        } else {
            out.extend_from_slice(match self.api {
                Api::Chat => br#""choices":[{"index":0,"message":{"role":"assistant","content":""#,
                _ => br#""choices":[{"index":0,"text":""#.as_slice(),
            });
        }
        for i in reasoning..self.completion_tokens {
            out.extend_from_slice(self.token_text(i).as_bytes());
        }
        out.extend_from_slice(match self.api {
            Api::Chat => br#""},"#,
            _ => br#"","#.as_slice(),
        });
        let _ = write!(
            out,
            r#""logprobs":null,"finish_reason":"{}"}}],"#,
            self.finish_reason()
        );
        self.usage_member(&mut out);
        if let Some(metrics) = metrics {
            metrics.write_member(&mut out);
        }
        out.push(b'}');
        out.into()
    }

    /// SGLang's `meta_info` after `n` tokens, the finish reason set on the last one.
    fn sglang_meta(&self, n: u32, out: &mut Vec<u8>) {
        let _ = write!(
            out,
            r#""meta_info":{{"id":"{:016x}","finish_reason":"#,
            self.id
        );
        if n == self.completion_tokens {
            let _ = write!(out, r#"{{"type":"length","length":{n}}}"#);
        } else {
            out.extend_from_slice(b"null");
        }
        let _ = write!(
            out,
            r#","prompt_tokens":{},"completion_tokens":{n},"cached_tokens":{}}}}}"#,
            self.prompt_tokens,
            self.cached_tokens.unwrap_or(0)
        );
    }

    /// llama.cpp's last `/completion` event (or whole answer) holding `content`.
    fn llama_final(&self, content: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"index":0,"content":""#);
        out.extend_from_slice(content);
        let _ = write!(
            out,
            r#"","tokens":[],"id_slot":0,"stop":true,"model":{},"tokens_predicted":{},"tokens_evaluated":{},"stop_type":"limit","stopping_word":"","tokens_cached":{}}}"#,
            self.model_json,
            self.completion_tokens,
            self.prompt_tokens,
            (self.prompt_tokens + self.completion_tokens).saturating_sub(1)
        );
        // llama-server's `timings.cache_n`: the prompt tokens its cache served.
        if let Some(cached) = self.cached_tokens {
            out.pop();
            let _ = write!(out, r#","timings":{{"cache_n":{cached}}}}}"#);
        }
    }

    /// The whole answer of a server's own API (streaming endpoints stream regardless, so
    /// only SGLang's and llama.cpp's are asked for; the others get their last event's JSON).
    fn native_body(&self, out: &mut Vec<u8>) {
        let mut text = Vec::with_capacity(8 * self.completion_tokens as usize);
        self.text(self.completion_tokens, &mut text);
        match self.api {
            Api::Sglang => {
                out.extend_from_slice(br#"{"text":""#);
                out.extend_from_slice(&text);
                out.extend_from_slice(br#"","#);
                self.sglang_meta(self.completion_tokens, out);
            }
            Api::LlamaCpp => self.llama_final(&text, out),
            Api::Responses => super::responses::whole(self, out),
            Api::Messages => super::messages::whole(self, out),
            Api::Audio => super::audio::whole(self, out),
            Api::Tgi => {
                out.extend_from_slice(br#"{"generated_text":""#);
                out.extend_from_slice(&text);
                out.extend_from_slice(br#""}"#);
            }
            Api::Triton | Api::Completions | Api::Chat => {
                out.extend_from_slice(br#"{"model_name":"ensemble","text_output":""#);
                out.extend_from_slice(&text);
                out.extend_from_slice(br#""}"#);
            }
        }
    }

    /// The SSE stream: token chunk `i` is released at `first_token_at + i * itl`, then the
    /// usage chunk (when `include_usage`) and `data: [DONE]` follow at once, as one frame;
    /// `content` may break that (see [`Content`]).
    pub fn stream(
        &self,
        include_usage: bool,
        first_token_at: Instant,
        itl: Duration,
        content: &Content,
        timing: Timing,
    ) -> TokenStream {
        let mut head = Vec::with_capacity(160);
        head.extend_from_slice(b"data: ");
        self.object_head(&mut head, self.api.chunk_object());
        head.extend_from_slice(br#""choices":[{"index":0,"#);

        let half = self.completion_tokens / 2;
        let mut trailer = Vec::with_capacity(256);
        // Where the usage chunk's per-request metrics go, once the last token has left.
        let mut metrics_at = None;
        let mut count = self.completion_tokens;
        if let Content::ErrorEvent(message) = content {
            count = half;
            trailer.extend_from_slice(&self.api.error_event(message));
        } else if self.api == Api::Responses {
            // The events that close the items, and the terminal event unless the stream
            // is to end without one (the `NoDone` fault).
            super::responses::trailer(self, *content != Content::NoDone, &mut trailer);
        } else if self.api == Api::Messages {
            // The same, `message_stop` being the terminal event.
            super::messages::trailer(self, *content != Content::NoDone, &mut trailer);
        } else if self.api == Api::Audio {
            if include_usage {
                super::audio::usage_trailer(self, &mut trailer);
            }
        } else if self.api == Api::LlamaCpp {
            // The last event carries no token: the counts and why generation stopped.
            trailer.extend_from_slice(b"data: ");
            self.llama_final(b"", &mut trailer);
            trailer.extend_from_slice(b"\n\n");
        } else if include_usage && self.api.is_openai() {
            trailer.extend_from_slice(b"data: ");
            self.object_head(&mut trailer, self.api.chunk_object());
            trailer.extend_from_slice(br#""choices":[],"#);
            self.usage_member(&mut trailer);
            metrics_at = timing.queue.filter(|_| count > 0).map(|_| trailer.len());
            trailer.extend_from_slice(b"}\n\n");
        }
        // Of the servers' own APIs only SGLang's ends its stream with `[DONE]`.
        if *content != Content::NoDone
            && matches!(
                self.api,
                Api::Completions | Api::Chat | Api::Sglang | Api::Audio
            )
        {
            trailer.extend_from_slice(b"data: [DONE]\n\n");
        }

        let chunk_size = head.len() + 64;
        let block = (chunk_size * count as usize).min(16 * 1024);
        TokenStream {
            native: (!self.api.is_openai()).then_some(Native {
                api: self.api,
                id: self.id,
                prompt_tokens: self.prompt_tokens,
                completion_tokens: self.completion_tokens,
                cached_tokens: self.cached_tokens,
                reasoning: self.reasoning_tokens(),
            }),
            shape: self.api.chunk_shape(),
            pieces: self.pieces.clone(),
            stop: self.stop,
            reasoning: self.reasoning_tokens(),
            reasoning_field: self.reasoning.field,
            head,
            buf: BytesMut::with_capacity(block),
            next: 0,
            count,
            last: self.completion_tokens.checked_sub(1),
            malformed: (*content == Content::Malformed).then_some(half),
            continuous_usage: (self.continuous_usage && self.api.is_openai())
                .then_some((self.prompt_tokens, self.usage_per_word.max(1))),
            first_token_at,
            itl,
            request: timing
                .request_id
                .clone()
                .map(|id| PendingRequest::new(id, count.saturating_sub(1) as usize)),
            request_id: timing.request_id,
            cut_on_purpose: timing.cut_on_purpose,
            recorder: timing.recorder,
            arrival: timing.arrival,
            metrics: metrics_at.zip(timing.queue),
            first_sent: None,
            previous: None,
            timer: None,
            armed: false,
            trailer: (!trailer.is_empty()).then(|| trailer.into()),
        }
    }
}

/// Where a stream records its real send times, when its request arrived, and the
/// request's `x-request-id` when it is to be recorded per request.
pub(super) struct Timing {
    pub recorder: Arc<TimingRecorder>,
    pub arrival: Instant,
    pub request_id: Option<String>,
    /// With `--per-request-metrics`: the request's wait for load (its queue time), and
    /// the stream's usage chunk carries vLLM's per-request metrics.
    pub queue: Option<Duration>,
    /// A delivery fault will end the stream early on purpose: that is no client's abort.
    pub cut_on_purpose: bool,
}

/// The body of a streaming response: one frame per token chunk, each held back until its
/// absolute deadline (so timer lateness never accumulates), then one trailer frame.
pub(super) struct TokenStream {
    /// Set for a server's own API, whose chunks [`TokenStream::native_chunk`] formats.
    native: Option<Native>,
    shape: &'static ChunkShape,
    /// A structured answer's content tokens (see [`Reply::pieces`]).
    pieces: Option<Pieces>,
    /// The last chunk says `finish_reason` `"stop"` (see [`Reply::stop`]).
    stop: bool,
    /// The first `reasoning` token chunks carry reasoning text (under `reasoning_field`).
    reasoning: u32,
    reasoning_field: ReasoningField,
    /// `data: {"id":…,"model":…,"choices":[{"index":0,` shared by every token chunk.
    head: Vec<u8>,
    buf: BytesMut,
    next: u32,
    /// Token chunks to send.
    count: u32,
    /// The answer's last token, whose chunk carries the finish reason (past `count` when
    /// an error event ends the stream early).
    last: Option<u32>,
    /// The token chunk sent malformed.
    malformed: Option<u32>,
    /// With `continuous_usage_stats` on an OpenAI stream: the prompt tokens and the usage
    /// tokens per word, for the usage so far that every token chunk carries.
    continuous_usage: Option<(u32, u32)>,
    first_token_at: Instant,
    itl: Duration,
    recorder: Arc<TimingRecorder>,
    arrival: Instant,
    /// This stream's own per-request record, handed to `recorder` once the last token
    /// chunk leaves (or when the stream is dropped before that).
    request: Option<PendingRequest>,
    /// The request's `x-request-id`, for the record of aborts.
    request_id: Option<String>,
    /// See [`Timing::cut_on_purpose`].
    cut_on_purpose: bool,
    /// With `--per-request-metrics`: where in `trailer` its usage chunk's `metrics` goes,
    /// and the request's queue time.
    metrics: Option<(usize, Duration)>,
    /// When the first token chunk was released.
    first_sent: Option<Instant>,
    /// When the previous token chunk was released.
    previous: Option<Instant>,
    /// Made on the first wait only, then reset: a zero-delay stream never touches the timer.
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer holds the deadline of chunk `next`.
    armed: bool,
    trailer: Option<Bytes>,
}

/// What a server's own API repeats in its chunks.
struct Native {
    api: Api,
    id: u64,
    prompt_tokens: u32,
    completion_tokens: u32,
    cached_tokens: Option<u32>,
    /// Tokens of reasoning before the content (Responses, Messages).
    reasoning: u32,
}

impl Native {
    /// Token chunk `i`, up to the end of its text and after it (a malformed chunk is the
    /// first part alone).
    fn chunk(&self, i: u32, head: &mut Vec<u8>, tail: &mut Vec<u8>) {
        let last = i + 1 == self.completion_tokens;
        match self.api {
            Api::Tgi => {
                let _ = write!(
                    head,
                    r#"data:{{"index":{},"token":{{"id":{},"text":"{}"#,
                    i + 1,
                    i % WORDS.len() as u32,
                    word(i)
                );
                tail.extend_from_slice(br#"","logprob":-0.25,"special":false},"generated_text":"#);
                if last {
                    tail.push(b'"');
                    self.reply().text(self.completion_tokens, tail);
                    let _ = write!(
                        tail,
                        r#"","details":{{"finish_reason":"length","generated_tokens":{},"seed":null}}}}"#,
                        self.completion_tokens
                    );
                } else {
                    tail.extend_from_slice(br#"null,"details":null}"#);
                }
            }
            Api::Triton => {
                head.extend_from_slice(
                    br#"data: {"model_name":"ensemble","model_version":"1","sequence_end":false,"sequence_id":0,"sequence_start":false,"text_output":""#,
                );
                head.extend_from_slice(word(i).as_bytes());
                tail.extend_from_slice(br#""}"#);
            }
            Api::Sglang => {
                head.extend_from_slice(br#"data: {"text":""#);
                self.reply().text(i + 1, head);
                tail.extend_from_slice(br#"","#);
                self.reply().sglang_meta(i + 1, tail);
            }
            Api::LlamaCpp => {
                let _ = write!(head, r#"data: {{"index":0,"content":"{}"#, word(i));
                let _ = write!(
                    tail,
                    r#"","tokens":[{}],"stop":false,"id_slot":0,"tokens_predicted":{},"tokens_evaluated":{}}}"#,
                    i % WORDS.len() as u32,
                    i + 1,
                    self.prompt_tokens
                );
            }
            Api::Responses => {
                super::responses::delta(self.id, i, self.reasoning, head, tail);
                return;
            }
            Api::Messages => {
                let usage = (self.prompt_tokens, self.cached_tokens);
                super::messages::delta((self.id, i, self.reasoning), usage, head, tail);
                return;
            }
            Api::Audio => {
                let (n, prompt) = (self.completion_tokens, self.prompt_tokens);
                super::audio::chunk(self.id, i, n, prompt, head, tail);
                return;
            }
            Api::Completions | Api::Chat => unreachable!("OpenAI chunks use their ChunkShape"),
        }
        tail.extend_from_slice(b"\n\n");
    }

    /// A [`Reply`] with this stream's numbers, for its shared formatting.
    fn reply(&self) -> Reply<'static> {
        Reply {
            api: self.api,
            id: self.id,
            created: 0,
            model_json: "\"\"",
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            cached_tokens: self.cached_tokens,
            reasoning: Reasoning::default(),
            usage_per_word: 1,
            continuous_usage: false,
            pieces: None,
            stop: false,
        }
    }
}

impl TokenStream {
    /// Token chunk `i` of a server's own API.
    fn native_chunk(&mut self, i: u32) -> Bytes {
        let Some(native) = &self.native else {
            unreachable!("only streams of a server's own API have native chunks")
        };
        let (mut head, mut tail) = (Vec::with_capacity(256), Vec::with_capacity(256));
        native.chunk(i, &mut head, &mut tail);
        if self.malformed == Some(i) {
            // The text's closing quote and everything after it are missing.
            head.extend_from_slice(b"\n\n");
        } else {
            head.extend_from_slice(&tail);
        }
        head.into()
    }

    fn finish_request(&mut self) {
        if let Some(request) = self.request.take() {
            self.recorder.finish(request);
        }
    }

    /// Puts vLLM's per-request metrics, measured now that the last token chunk (released
    /// at `last`) is out, into the usage chunk, and into the stream's own record.
    fn add_metrics(&mut self, last: Instant) {
        let (Some((at, queue)), Some(first), Some(trailer)) =
            (self.metrics, self.first_sent, &self.trailer)
        else {
            return;
        };
        let metrics = SentMetrics::new(first - self.arrival, queue, last - first, self.count);
        let mut with = Vec::with_capacity(trailer.len() + 160);
        with.extend_from_slice(&trailer[..at]);
        metrics.write_member(&mut with);
        with.extend_from_slice(&trailer[at..]);
        self.trailer = Some(with.into());
        if let Some(request) = &mut self.request {
            request.metrics(metrics);
        }
    }

    fn chunk(&mut self, i: u32) -> Bytes {
        if self.native.is_some() {
            return self.native_chunk(i);
        }
        let shape = self.shape;
        let open = if i < self.reasoning {
            self.reasoning_field.chat_open(i == 0)
        } else if i == 0 {
            shape.first_open
        } else {
            shape.open
        };
        let close = if self.malformed == Some(i) {
            // The text's closing quote and everything after it are missing.
            b"\n\n".as_slice()
        } else if Some(i) == self.last {
            if self.stop {
                shape.stop_close
            } else {
                shape.last_close
            }
        } else {
            shape.close
        };
        let text = token_text(self.pieces.as_ref(), self.reasoning, i).as_bytes();
        self.buf
            .reserve(self.head.len() + open.len() + text.len() + close.len());
        self.buf.extend_from_slice(&self.head);
        self.buf.extend_from_slice(open);
        self.buf.extend_from_slice(text);
        match self.continuous_usage {
            // vLLM's continuous usage: the object closes after the usage so far.
            Some((prompt, per_word)) if self.malformed != Some(i) => {
                let object_end = close.len() - b"}\n\n".len();
                let mut usage = Vec::with_capacity(96);
                usage.push(b',');
                usage_counts(&mut usage, prompt, u64::from(i + 1) * u64::from(per_word));
                self.buf.extend_from_slice(&close[..object_end]);
                self.buf.extend_from_slice(&usage);
                self.buf.extend_from_slice(b"}}\n\n");
            }
            _ => self.buf.extend_from_slice(close),
        }
        self.buf.split().freeze()
    }
}

impl Stream for TokenStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.next == this.count {
            return Poll::Ready(this.trailer.take().map(Ok));
        }
        if !this.armed {
            let deadline = this.first_token_at + this.itl * this.next;
            if deadline > Instant::now() {
                match &mut this.timer {
                    Some(timer) => timer.as_mut().reset(deadline),
                    None => this.timer = Some(Box::pin(sleep_until(deadline))),
                }
                this.armed = true;
            }
        }
        if this.armed {
            if let Some(timer) = &mut this.timer {
                ready!(timer.as_mut().poll(cx));
            }
            this.armed = false;
        }
        let now = Instant::now();
        match this.previous {
            None => {
                this.first_sent = Some(now);
                let ttft = now - this.arrival;
                this.recorder.first_token(ttft);
                if let Some(request) = &mut this.request {
                    request.first_token(ttft);
                }
            }
            Some(previous) => {
                let gap = now - previous;
                this.recorder.gap(gap);
                if let Some(request) = &mut this.request {
                    request.gap(gap);
                }
            }
        }
        if this.next == this.reasoning
            && let Some(request) = &mut this.request
        {
            request.first_content(now - this.arrival);
        }
        this.previous = Some(now);
        let chunk = this.chunk(this.next);
        this.next += 1;
        if this.next == this.count {
            this.add_metrics(now);
            // Before the trailer leaves, so the entry is kept before the client can see
            // the end of the stream (and, say, send the same id again).
            this.finish_request();
        }
        Poll::Ready(Some(Ok(chunk)))
    }
}

impl Drop for TokenStream {
    /// A stream that ended early (client gone, delivery fault) still leaves its entry; one
    /// whose client went away before its last token is recorded as aborted.
    fn drop(&mut self) {
        if self.next < self.count && !self.cut_on_purpose {
            self.recorder.abort(self.request_id.as_deref());
        }
        self.finish_request();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::{Reasoning, ReasoningField, WORDS};
    use crate::{MockConfig, MockServer, spawn};

    async fn reasoning_server(tokens: u32, field: ReasoningField) -> MockServer {
        spawn(MockConfig {
            ttft: Duration::from_millis(20),
            itl: Duration::from_millis(5),
            reasoning: Reasoning { tokens, field },
            ..MockConfig::default()
        })
        .await
        .expect("start the mock server")
    }

    /// The `data:` payloads of a whole SSE body.
    async fn post(server: &MockServer, path: &str, id: &str, body: Value) -> String {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", server.base_url()))
            .header("x-request-id", id)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("send the request");
        assert!(response.status().is_success(), "{response:?}");
        response.text().await.expect("read the body")
    }

    fn payloads(body: &str) -> Vec<Value> {
        body.split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter(|data| *data != "[DONE]")
            .map(|data| serde_json::from_str(data).expect("a JSON payload"))
            .collect()
    }

    fn words(range: std::ops::Range<usize>) -> String {
        range.map(|i| WORDS[i % WORDS.len()]).collect()
    }

    /// vLLM's `continuous_usage_stats`: every token chunk carries the usage so far, here
    /// of a server that counts 3 tokens per word, which its final usage and a whole answer
    /// count too.
    #[tokio::test]
    async fn continuous_usage_counts_each_chunk_at_the_servers_tokens_per_word() {
        let server = spawn(MockConfig {
            usage_tokens_per_word: 3,
            ..MockConfig::default()
        })
        .await
        .expect("start the mock server");
        for (path, prompt) in [
            (
                "/v1/chat/completions",
                json!({"messages": [{"role": "user", "content": "a b"}]}),
            ),
            ("/v1/completions", json!({"prompt": "a b"})),
        ] {
            let mut body = prompt;
            body["max_tokens"] = json!(4);
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true, "continuous_usage_stats": true});
            let chunks = payloads(&post(&server, path, "c-0", body.clone()).await);
            assert_eq!(chunks.len(), 5, "{path}: 4 tokens and usage: {chunks:?}");
            for (i, chunk) in chunks[..4].iter().enumerate() {
                assert_eq!(chunk["choices"].as_array().unwrap().len(), 1, "{chunk}");
                let usage = &chunk["usage"];
                assert_eq!(usage["prompt_tokens"], json!(2), "{chunk}");
                assert_eq!(usage["completion_tokens"], json!(3 * (i + 1)), "{chunk}");
                assert_eq!(usage["total_tokens"], json!(2 + 3 * (i + 1)), "{chunk}");
            }
            assert_eq!(chunks[3]["choices"][0]["finish_reason"], json!("length"));
            assert_eq!(chunks[4]["usage"]["completion_tokens"], json!(12));
            // Without the option, only the last frame has usage.
            body["stream_options"] = json!({"include_usage": true});
            let chunks = payloads(&post(&server, path, "c-1", body.clone()).await);
            assert!(
                chunks[..4].iter().all(|c| c.get("usage").is_none()),
                "{chunks:?}"
            );
            body["stream"] = json!(false);
            let whole = &payloads(&format!("data: {}", post(&server, path, "c-2", body).await))[0];
            assert_eq!(whole["usage"]["completion_tokens"], json!(12), "{whole}");
        }
    }

    #[tokio::test]
    async fn chat_streams_the_first_tokens_as_reasoning_and_records_the_first_content() {
        for (field, key) in [
            (ReasoningField::ReasoningContent, "reasoning_content"),
            (ReasoningField::Reasoning, "reasoning"),
        ] {
            let server = reasoning_server(3, field).await;
            let body = json!({
                "model": "m", "messages": [{"role": "user", "content": "hi"}],
                "max_completion_tokens": 7, "stream": true,
                "stream_options": {"include_usage": true},
            });
            let chunks = payloads(&post(&server, "/v1/chat/completions", "r-0", body).await);
            assert_eq!(chunks.len(), 8, "7 tokens and usage: {chunks:?}");
            for (i, chunk) in chunks[..7].iter().enumerate() {
                let delta = &chunk["choices"][0]["delta"];
                let (has, lacks) = if i < 3 {
                    (key, "content")
                } else {
                    ("content", key)
                };
                assert_eq!(delta[has], json!(WORDS[i]), "chunk {i}: {chunk}");
                assert!(delta.get(lacks).is_none(), "chunk {i}: {chunk}");
                assert_eq!(delta.get("role").is_some(), i == 0, "chunk {i}: {chunk}");
            }
            // Reasoning tokens are output tokens.
            assert_eq!(chunks[7]["usage"]["completion_tokens"], json!(7));

            let record = server.requests().pop().expect("a record");
            assert_eq!(record.itl_ms.len(), 6);
            // The chunk of token 3 is the first content: TTFT plus the first 3 gaps.
            let first_content = record.first_content_ms.expect("a content chunk was sent");
            let due = record.ttft_ms + record.itl_ms[..3].iter().sum::<f64>();
            assert!((first_content - due).abs() < 1e-6, "{record:?}");
            assert!(first_content >= 20.0 + 3.0 * 5.0, "{record:?}");
        }
    }

    #[tokio::test]
    async fn a_whole_chat_answer_splits_reasoning_from_content() {
        let server = reasoning_server(4, ReasoningField::ReasoningContent).await;
        let body = json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "max_completion_tokens": 6,
        });
        let answer: Value =
            serde_json::from_str(&post(&server, "/v1/chat/completions", "r-0", body).await)
                .unwrap();
        let message = &answer["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], json!(words(0..4)), "{answer}");
        assert_eq!(message["content"], json!(words(4..6)), "{answer}");
        assert_eq!(answer["usage"]["completion_tokens"], json!(6));
    }

    #[tokio::test]
    async fn all_reasoning_has_no_first_content_and_other_apis_have_no_reasoning() {
        let server = reasoning_server(10, ReasoningField::ReasoningContent).await;
        let chat = json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "max_completion_tokens": 4, "stream": true,
        });
        let chunks = payloads(&post(&server, "/v1/chat/completions", "chat", chat).await);
        assert!(
            chunks
                .iter()
                .all(|c| c["choices"][0]["delta"].get("content").is_none()),
            "{chunks:?}"
        );
        let completions = json!({"model": "m", "prompt": "hi", "max_tokens": 4, "stream": true});
        let chunks = payloads(&post(&server, "/v1/completions", "cmpl", completions).await);
        let text: String = chunks
            .iter()
            .map(|c| c["choices"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, words(0..4));
        let records = server.requests();
        let chat = records.iter().find(|r| r.id == "chat").unwrap();
        assert_eq!(chat.first_content_ms, None, "{chat:?}");
        let completions = records.iter().find(|r| r.id == "cmpl").unwrap();
        assert_eq!(
            completions.first_content_ms,
            Some(completions.ttft_ms),
            "{completions:?}"
        );
    }
}
