//! What lives in each plugin's store: the WASI context (no env, no args, no network, only
//! the dataset path read-only), the memory limiter, the captured stdout/stderr, and the
//! host imports (`tokenizer`, `seed`, `log`).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::bindings::current::dataset::bench::plugin::{log, seed, tokenizer, types};
use super::{ChatMessage, ContentPart};

/// What the host lends a plugin: the run's tokenizer (if any) and seed.
#[derive(Clone, Debug, Default)]
pub struct HostContext {
    pub tokenizer: Option<Arc<bench_tokenizer::Tokenizer>>,
    pub seed: u64,
}

/// Links the host's side of the contract: the `bench:plugin` interfaces. The worlds'
/// WASI imports are linked apart, by `wasmtime_wasi::p2::add_to_linker_sync` (the
/// worlds' own `add_to_linker` would link them twice).
pub fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    types::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
    tokenizer::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
    seed::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)?;
    log::add_to_linker::<StoreState, HasSelf<StoreState>>(linker, |state| state)
}

/// Largest single text a plugin may hand to the tokenizer. Host calls cannot be
/// interrupted by the time budget, so their work is bounded by their input size.
const MAX_TEXT_BYTES: usize = 16 << 20;
/// Largest total of the texts of one `encode-batch` call.
const MAX_BATCH_BYTES: usize = 64 << 20;
/// Most token ids one `decode` call may take.
const MAX_DECODE_IDS: usize = 4 << 20;
/// Most bytes of chat messages one `apply-chat-template` call may take.
const MAX_TEMPLATE_BYTES: usize = 16 << 20;
/// How much of a plugin's stdout and of its stderr is kept (the tail) for fault reports.
const OUTPUT_TAIL_BYTES: usize = 8 << 10;
/// Longest log message forwarded; longer ones are cut.
const MAX_LOG_MESSAGE: usize = 4 << 10;
/// Log rate limit: a burst of this many messages, refilled at this many per second.
const LOG_BURST: f64 = 100.0;
const LOG_PER_SECOND: f64 = 20.0;

/// The data of one plugin store.
pub(crate) struct StoreState {
    wasi: WasiCtx,
    table: ResourceTable,
    host: HostContext,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stdout: OutputTail,
    pub(crate) stderr: OutputTail,
    log: LogLimiter,
    plugin: Arc<str>,
    /// What the time budget measures in the current call (see [`CallClock`]).
    pub(crate) clock: CallClock,
}

/// The time of one guest call, split into the plugin's own time and the time the host
/// spent working for it in its imports.
///
/// The time budget is there to stop a plugin that loops, so it counts the plugin's own
/// time only. The host's tokenizer work (encoding batches on every core, decoding) is not
/// the plugin running away: it is bounded per call by the size caps above, and a dataset
/// that must make its whole request set in one call (vLLM's `prefix_repetition` shuffles
/// the finished list) spends nearly all of that call in it, so counting it would fail a
/// large workload on a fixed budget however well the plugin behaves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallClock {
    started: Instant,
    in_host: std::time::Duration,
}

impl CallClock {
    fn new() -> CallClock {
        CallClock {
            started: Instant::now(),
            in_host: std::time::Duration::ZERO,
        }
    }

    /// A new call starts now.
    pub(crate) fn restart(&mut self) {
        *self = CallClock::new();
    }

    /// The plugin's own time in this call so far: the call's time less the host's.
    pub(crate) fn guest_time(&self) -> std::time::Duration {
        self.started.elapsed().saturating_sub(self.in_host)
    }
}

impl StoreState {
    /// Runs host work for an import, keeping its time off the plugin's budget.
    fn host_work<R>(&mut self, work: impl FnOnce(&mut StoreState) -> R) -> R {
        let started = Instant::now();
        let out = work(self);
        self.clock.in_host += started.elapsed();
        out
    }
}

impl StoreState {
    /// A sandbox for `plugin`: `dataset`, when given, is the only path it can see, read-only.
    /// Returns the state and the guest path of `dataset`.
    pub(crate) fn new(
        plugin: Arc<str>,
        host: HostContext,
        memory_limit: u64,
        dataset: Option<&Path>,
    ) -> Result<(StoreState, Option<String>)> {
        let stdout = OutputTail::default();
        let stderr = OutputTail::default();
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            // Any use of WASI's insecure random is reproducible for a given --seed.
            .insecure_random_seed(u128::from(host.seed));
        let guest_path = match dataset {
            Some(path) => Some(grant_read_only(&mut wasi, path)?),
            None => None,
        };
        let state = StoreState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            host,
            limiter: MemoryLimiter::new(memory_limit),
            stdout,
            stderr,
            log: LogLimiter::new(),
            plugin,
            clock: CallClock::new(),
        };
        Ok((state, guest_path))
    }

    /// The captured output, for a fault message; empty when the plugin printed nothing.
    pub(crate) fn output_report(&self) -> String {
        let mut report = String::new();
        for (name, tail) in [("stderr", &self.stderr), ("stdout", &self.stdout)] {
            let text = tail.text();
            if !text.trim().is_empty() {
                report.push_str(&format!(
                    "\nplugin {name}:\n{}",
                    text.trim_matches(|c| c == '\n' || c == '\r')
                ));
            }
        }
        report
    }
}

/// Preopens what the plugin needs to read `path`, read-only, under the same (absolute)
/// path in the guest, so messages that name the file make sense to the user. A file is
/// granted through its parent directory (WASI grants directories only).
fn grant_read_only(wasi: &mut WasiCtxBuilder, path: &Path) -> Result<String> {
    let path = path
        .canonicalize()
        .with_context(|| format!("dataset path {}", path.display()))?;
    let dir = if path.is_dir() {
        path.clone()
    } else {
        path.parent()
            .context("dataset path has no parent directory")?
            .to_path_buf()
    };
    let guest_dir = dir
        .to_str()
        .map(str::to_owned)
        .unwrap_or_else(|| "/dataset".to_owned());
    wasi.preopened_dir(&dir, &guest_dir, wasmtime_wasi::FsPerms::ReadOnly)
        .map_err(super::wasm_error)
        .with_context(|| format!("granting read access to {}", dir.display()))?;
    Ok(if path == dir {
        guest_dir
    } else {
        let name = path.file_name().context("dataset path has no file name")?;
        format!("{guest_dir}/{}", name.to_string_lossy()).replace("//", "/")
    })
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps the total linear memory of a store. Growing past the cap traps (instead of
/// `memory.grow` returning -1, which Rust turns into an opaque abort), and the limiter
/// remembers it so the fault says "memory limit" rather than a bare trap.
pub(crate) struct MemoryLimiter {
    limit: u64,
    used: u64,
    /// The total the plugin asked for when it was refused.
    pub(crate) refused: Option<u64>,
}

impl MemoryLimiter {
    fn new(limit: u64) -> Self {
        MemoryLimiter {
            limit,
            used: 0,
            refused: None,
        }
    }

    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        let total = self.used.saturating_add(growth);
        if total > self.limit {
            self.refused = Some(total);
            wasmtime::bail!(
                "memory limit exceeded: growing to {} MiB, the limit is {} MiB",
                total >> 20,
                self.limit >> 20
            );
        }
        self.used = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Tables hold function references; a million entries is far past any real plugin.
        Ok(desired <= 1 << 20)
    }
}

/// A bounded capture of a plugin's stdout or stderr: keeps the last
/// [`OUTPUT_TAIL_BYTES`] bytes, never blocks and never fails the plugin.
#[derive(Clone, Default)]
pub(crate) struct OutputTail(Arc<Mutex<VecDeque<u8>>>);

impl OutputTail {
    fn push(&self, bytes: &[u8]) {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let keep = bytes.len().min(OUTPUT_TAIL_BYTES);
        buf.extend(&bytes[bytes.len() - keep..]);
        let excess = buf.len().saturating_sub(OUTPUT_TAIL_BYTES);
        buf.drain(..excess);
    }

    /// The captured tail, lossily decoded.
    pub(crate) fn text(&self) -> String {
        let buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = buf.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

impl IsTerminal for OutputTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for OutputTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for OutputTail {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for OutputTail {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for OutputTail {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A token bucket for plugin log messages, so a chatty plugin cannot flood the log.
struct LogLimiter {
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

impl LogLimiter {
    fn new() -> Self {
        LogLimiter {
            tokens: LOG_BURST,
            last: Instant::now(),
            suppressed: 0,
        }
    }

    /// Whether a message may go out now; counts the ones that may not.
    fn admit(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * LOG_PER_SECOND)
            .min(LOG_BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

/// A seed derived from `run_seed` and `label`: the first 8 bytes (little-endian) of
/// SHA-256 over the seed's 8 little-endian bytes followed by the label. Stable across
/// platforms and releases, so the same `--seed` gives the same workload everywhere.
pub fn derive_seed(run_seed: u64, label: &str) -> u64 {
    let mut hasher = Sha256::new();
    hasher.update(run_seed.to_le_bytes());
    hasher.update(label.as_bytes());
    let digest = hasher.finalize();
    u64::from_le_bytes(
        digest[..8]
            .try_into()
            .expect("a SHA-256 digest has 32 bytes"),
    )
}

impl StoreState {
    fn tokenizer(&self) -> std::result::Result<&bench_tokenizer::Tokenizer, String> {
        self.host.tokenizer.as_deref().ok_or_else(|| {
            "this plugin needs a tokenizer, and the run loads none (--skip-tokenizer-init): \
             run without that flag, with --tokenizer (a tokenizer.json, a directory, or a \
             cached Hugging Face id) or --model"
                .to_string()
        })
    }
}

fn too_large(what: &str, size: usize, limit: usize) -> String {
    format!("{what} is too large ({size} > {limit} bytes)")
}

/// A chat message as chat templates read it (what `apply-chat-template` renders for a
/// plugin): also used by the native engine target to render a conversation's prompt.
pub fn chat_message_json(message: &ChatMessage) -> serde_json::Value {
    let text_only = message
        .content
        .iter()
        .all(|p| matches!(p, ContentPart::Text(_)));
    let content = if text_only {
        let text: String = message
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        serde_json::Value::String(text)
    } else {
        serde_json::Value::Array(
            message
                .content
                .iter()
                .map(|part| match part {
                    ContentPart::Text(t) => serde_json::json!({"type": "text", "text": t}),
                    ContentPart::ImageUrl(u) => {
                        serde_json::json!({"type": "image_url", "image_url": {"url": u}})
                    }
                    ContentPart::AudioUrl(u) => {
                        serde_json::json!({"type": "audio_url", "audio_url": {"url": u}})
                    }
                    ContentPart::VideoUrl(u) => {
                        serde_json::json!({"type": "video_url", "video_url": {"url": u}})
                    }
                    // Templates see that a file is there, not its bytes.
                    ContentPart::Binary(b) => serde_json::json!({
                        "type": "file",
                        "file": {"filename": b.file_name, "mime_type": b.mime_type},
                    }),
                })
                .collect(),
        )
    };
    serde_json::json!({"role": message.role, "content": content})
}

fn message_bytes(message: &ChatMessage) -> usize {
    message.role.len()
        + message
            .content
            .iter()
            .map(|p| match p {
                ContentPart::Text(s)
                | ContentPart::ImageUrl(s)
                | ContentPart::AudioUrl(s)
                | ContentPart::VideoUrl(s) => s.len(),
                ContentPart::Binary(b) => b.data.len() + b.file_name.len() + b.mime_type.len(),
            })
            .sum::<usize>()
}

impl types::Host for StoreState {}

impl tokenizer::Host for StoreState {
    fn encode(
        &mut self,
        text: String,
        add_special_tokens: bool,
    ) -> std::result::Result<Vec<u32>, String> {
        if text.len() > MAX_TEXT_BYTES {
            return Err(too_large("text", text.len(), MAX_TEXT_BYTES));
        }
        self.host_work(|s| {
            s.tokenizer()?
                .encode(&text, add_special_tokens)
                .map_err(|e| format!("{e:#}"))
        })
    }

    fn encode_batch(
        &mut self,
        texts: Vec<String>,
        add_special_tokens: bool,
    ) -> std::result::Result<Vec<Vec<u32>>, String> {
        let total: usize = texts.iter().map(String::len).sum();
        if total > MAX_BATCH_BYTES {
            return Err(too_large("batch of texts", total, MAX_BATCH_BYTES));
        }
        self.host_work(|s| {
            s.tokenizer()?
                .encode_batch(&texts, add_special_tokens)
                .map_err(|e| format!("{e:#}"))
        })
    }

    fn decode(
        &mut self,
        ids: Vec<u32>,
        skip_special_tokens: bool,
    ) -> std::result::Result<String, String> {
        if ids.len() > MAX_DECODE_IDS {
            return Err(format!(
                "too many token ids ({} > {MAX_DECODE_IDS})",
                ids.len()
            ));
        }
        self.host_work(|s| {
            s.tokenizer()?
                .decode(&ids, skip_special_tokens)
                .map_err(|e| format!("{e:#}"))
        })
    }

    fn vocab_size(&mut self, with_added_tokens: bool) -> wasmtime::Result<u32> {
        Ok(self
            .tokenizer()
            .map_err(wasmtime::Error::msg)?
            .vocab_size(with_added_tokens))
    }

    fn special_token_ids(&mut self) -> wasmtime::Result<Vec<u32>> {
        Ok(self
            .tokenizer()
            .map_err(wasmtime::Error::msg)?
            .special_token_ids()
            .to_vec())
    }

    fn apply_chat_template(
        &mut self,
        messages: Vec<ChatMessage>,
        add_generation_prompt: bool,
    ) -> std::result::Result<String, String> {
        let total: usize = messages.iter().map(message_bytes).sum();
        if total > MAX_TEMPLATE_BYTES {
            return Err(too_large("chat", total, MAX_TEMPLATE_BYTES));
        }
        self.host_work(|s| {
            let json: Vec<serde_json::Value> = messages.iter().map(chat_message_json).collect();
            s.tokenizer()?
                .apply_chat_template(&json, add_generation_prompt)
                .map_err(|e| format!("{e:#}"))
        })
    }

    fn apply_chat_template_with_tools(
        &mut self,
        messages: Vec<ChatMessage>,
        tools: String,
        add_generation_prompt: bool,
    ) -> std::result::Result<String, String> {
        let total = messages.iter().map(message_bytes).sum::<usize>() + tools.len();
        if total > MAX_TEMPLATE_BYTES {
            return Err(too_large("chat with tools", total, MAX_TEMPLATE_BYTES));
        }
        let tools: Vec<serde_json::Value> = serde_json::from_str(&tools)
            .map_err(|e| format!("tools must be a JSON array of tool definitions: {e}"))?;
        self.host_work(|s| {
            let json: Vec<serde_json::Value> = messages.iter().map(chat_message_json).collect();
            s.tokenizer()?
                .apply_chat_template_with_tools(&json, Some(&tools), add_generation_prompt)
                .map_err(|e| format!("{e:#}"))
        })
    }
}

impl seed::Host for StoreState {
    fn run_seed(&mut self) -> u64 {
        self.host.seed
    }

    fn derive(&mut self, label: String) -> u64 {
        derive_seed(self.host.seed, &label)
    }
}

/// The `tracing` target of what plugins log, so that a subscriber can show their `info`
/// (a dataset's counts of rows its rules filtered out, as vLLM prints them) while the
/// host's own `info` stays quiet.
pub const PLUGIN_LOG_TARGET: &str = "bench::plugin";

impl log::Host for StoreState {
    fn log(&mut self, level: log::Level, mut message: String) {
        if !self.log.admit() {
            return;
        }
        if message.len() > MAX_LOG_MESSAGE {
            let mut cut = MAX_LOG_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
            message.push_str("...");
        }
        let suppressed = std::mem::take(&mut self.log.suppressed);
        if suppressed > 0 {
            tracing::warn!(plugin = %self.plugin, "{suppressed} log messages of this plugin were dropped (rate limit)");
        }
        let plugin = &*self.plugin;
        match level {
            log::Level::Debug => tracing::debug!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
            log::Level::Info => tracing::info!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
            log::Level::Warn => tracing::warn!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
            log::Level::Error => tracing::error!(target: PLUGIN_LOG_TARGET, plugin, "{message}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter as _;

    #[test]
    fn derived_seeds_are_stable_and_label_dependent() {
        // Pinned: changing the derivation would silently change every workload.
        let expected = {
            let digest = Sha256::digest([42u64.to_le_bytes().as_slice(), b"random"].concat());
            u64::from_le_bytes(digest[..8].try_into().unwrap())
        };
        assert_eq!(derive_seed(42, "random"), expected);
        assert_ne!(derive_seed(42, "random"), derive_seed(42, "sharegpt"));
        assert_ne!(derive_seed(42, "random"), derive_seed(43, "random"));
    }

    #[test]
    fn output_tail_keeps_the_last_bytes() {
        let tail = OutputTail::default();
        tail.push(b"start ");
        tail.push(&vec![b'x'; OUTPUT_TAIL_BYTES]);
        tail.push(b" end");
        let text = tail.text();
        assert_eq!(text.len(), OUTPUT_TAIL_BYTES);
        assert!(text.ends_with("x end"));
        assert!(!text.contains("start"));
    }

    #[test]
    fn memory_limiter_refuses_growth_past_the_cap() {
        let mut limiter = MemoryLimiter::new(4 << 20);
        assert!(limiter.memory_growing(0, 2 << 20, None).unwrap());
        assert!(limiter.memory_growing(2 << 20, 4 << 20, None).unwrap());
        let err = limiter.memory_growing(4 << 20, 5 << 20, None).unwrap_err();
        assert!(err.to_string().contains("memory limit exceeded"), "{err}");
        assert_eq!(limiter.refused, Some(5 << 20));
    }

    #[test]
    fn log_limiter_allows_a_burst_then_drops() {
        let mut limiter = LogLimiter::new();
        let admitted = (0..1000).filter(|_| limiter.admit()).count();
        assert!(
            (LOG_BURST as usize..LOG_BURST as usize + 5).contains(&admitted),
            "{admitted}"
        );
        assert!(limiter.suppressed > 800);
    }

    #[test]
    fn chat_messages_become_template_json() {
        let text = ChatMessage {
            role: "user".into(),
            content: vec![ContentPart::Text("a".into()), ContentPart::Text("b".into())],
        };
        assert_eq!(
            chat_message_json(&text),
            serde_json::json!({"role": "user", "content": "ab"})
        );
        let mixed = ChatMessage {
            role: "user".into(),
            content: vec![
                ContentPart::Text("look".into()),
                ContentPart::ImageUrl("http://x/y.png".into()),
            ],
        };
        assert_eq!(
            chat_message_json(&mixed),
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "http://x/y.png"}}
            ]})
        );
    }
}
