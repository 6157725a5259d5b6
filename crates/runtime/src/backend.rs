//! The backend adapter: builds HTTP requests before the clock starts and decodes response
//! frames into events after it (on a worker thread, so `BackendPlugin` is `Send`).

use std::sync::Arc;

use anyhow::{Result, bail};
use wasmtime::component::ResourceAny;

use super::bindings::current::backend::BackendPlugin as Bindings;
use super::bindings::v0_2_0::{self, backend::BackendPlugin as BindingsV0_2_0};
use super::bindings::v0_3_0::{self, backend::BackendPlugin as BindingsV0_3_0};
use super::bindings::v0_4_1::{self, backend::BackendPlugin as BindingsV0_4_1};
use super::bindings::v0_5_0::{self, backend::BackendPlugin as BindingsV0_5_0};
use super::bindings::v0_6_0::{self, backend::BackendPlugin as BindingsV0_6_0};
use super::{
    BackendDescription, CallFailure, Chunks, ClientConfig, Decoded, Framing, HostContext,
    HttpRequest, Loaded, PluginCallError, PluginError, PluginInfo, RequestSpec, ResponseHead,
    Sandbox, TypedPre,
};

/// The instance's exports, by the contract version it was built for.
enum Guest {
    Current(Bindings),
    V0_2_0(BindingsV0_2_0),
    V0_3_0(BindingsV0_3_0),
    V0_4_1(BindingsV0_4_1),
    V0_5_0(BindingsV0_5_0),
    V0_6_0(BindingsV0_6_0),
}

/// The `client` resource's functions, by contract version.
enum Client<'a> {
    Current(super::bindings::current::backend::exports::bench::plugin::backend::GuestClient<'a>),
    V0_2_0(v0_2_0::backend::exports::bench::plugin::backend::GuestClient<'a>),
    V0_3_0(v0_3_0::backend::exports::bench::plugin::backend::GuestClient<'a>),
    V0_4_1(v0_4_1::backend::exports::bench::plugin::backend::GuestClient<'a>),
    V0_5_0(v0_5_0::backend::exports::bench::plugin::backend::GuestClient<'a>),
    V0_6_0(v0_6_0::backend::exports::bench::plugin::backend::GuestClient<'a>),
}

impl<'a> Client<'a> {
    fn of(guest: &'a Guest) -> Client<'a> {
        match guest {
            Guest::Current(b) => Client::Current(b.bench_plugin_backend().client()),
            Guest::V0_2_0(b) => Client::V0_2_0(b.bench_plugin_backend().client()),
            Guest::V0_3_0(b) => Client::V0_3_0(b.bench_plugin_backend().client()),
            Guest::V0_4_1(b) => Client::V0_4_1(b.bench_plugin_backend().client()),
            Guest::V0_5_0(b) => Client::V0_5_0(b.bench_plugin_backend().client()),
            Guest::V0_6_0(b) => Client::V0_6_0(b.bench_plugin_backend().client()),
        }
    }
}

/// An instantiated backend plugin in its own sandbox.
pub struct BackendPlugin {
    sandbox: Sandbox,
    bindings: Guest,
    host: HostContext,
    /// The opened client and the configuration it was opened with (so `fork` can repeat it).
    client: Option<(ResourceAny, ClientConfig)>,
}

impl BackendPlugin {
    pub(crate) fn new(loaded: Arc<Loaded>, host: HostContext) -> Result<BackendPlugin> {
        if !matches!(
            loaded.pre,
            TypedPre::Backend(_)
                | TypedPre::BackendV0_2_0(_)
                | TypedPre::BackendV0_3_0(_)
                | TypedPre::BackendV0_4_1(_)
                | TypedPre::BackendV0_5_0(_)
                | TypedPre::BackendV0_6_0(_)
        ) {
            bail!("plugin '{}' is not a backend plugin", loaded.name);
        }
        let (mut sandbox, _) = Sandbox::new(loaded.clone(), host.clone(), None)?;
        let bindings = match &loaded.pre {
            TypedPre::BackendV0_2_0(pre) => Guest::V0_2_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            TypedPre::BackendV0_3_0(pre) => Guest::V0_3_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            TypedPre::BackendV0_4_1(pre) => Guest::V0_4_1(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            TypedPre::BackendV0_5_0(pre) => Guest::V0_5_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            TypedPre::BackendV0_6_0(pre) => Guest::V0_6_0(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            TypedPre::Backend(pre) => Guest::Current(
                sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?,
            ),
            _ => unreachable!("checked above"),
        };
        Ok(BackendPlugin {
            sandbox,
            bindings,
            host,
            client: None,
        })
    }

    /// Another instance of the same plugin in a fresh store (cheap: the component is
    /// compiled and pre-linked once), opened with the same configuration if this one is.
    /// Each decode worker gets its own, and replaces a faulted one with a fork (forking
    /// never calls into this instance, so it works after a fault).
    pub fn fork(&self) -> Result<BackendPlugin> {
        let mut plugin = BackendPlugin::new(self.sandbox.loaded.clone(), self.host.clone())?;
        if let Some((_, config)) = &self.client {
            plugin.open(config.clone())?;
        }
        Ok(plugin)
    }

    /// The plugin's name as the user gave it.
    pub fn name(&self) -> &str {
        &self.sandbox.loaded.name
    }

    /// Whether a call faulted (trapped, ran out of time or memory). A faulted instance
    /// refuses every later call, so a caller that wants to go on replaces it with
    /// [`BackendPlugin::fork`]. A plugin error (`Err` from the plugin) is not a fault.
    pub fn faulted(&self) -> bool {
        self.sandbox.faulted()
    }

    /// Name, version, description and options.
    pub fn describe(&mut self) -> Result<PluginInfo, PluginCallError> {
        Ok(self.description()?.info)
    }

    /// What the plugin says of itself: [`BackendPlugin::describe`] and the rules the host
    /// applies for it.
    pub fn description(&mut self) -> Result<BackendDescription, PluginCallError> {
        match &self.bindings {
            Guest::Current(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
            }
            Guest::V0_2_0(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_2_0::backend_description_up)
            }
            Guest::V0_3_0(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_3_0::backend_description_up)
            }
            Guest::V0_4_1(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_4_1::backend_description_up)
            }
            Guest::V0_5_0(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_5_0::backend_description_up)
            }
            Guest::V0_6_0(b) => {
                let guest = b.bench_plugin_backend();
                self.sandbox
                    .call_infallible("describe", |store| guest.call_describe(store))
                    .map(v0_6_0::backend_description_up)
            }
        }
    }

    /// Opens the client (validating the configuration); replaces a client opened before.
    pub fn open(&mut self, config: ClientConfig) -> Result<(), PluginCallError> {
        if let Some((old, _)) = self.client.take() {
            self.sandbox
                .call_infallible("drop client", |store| old.resource_drop(store))?;
        }
        let handle = match Client::of(&self.bindings) {
            Client::Current(c) => self
                .sandbox
                .call("open", |store| c.call_open(store, &config))?,
            Client::V0_2_0(c) => {
                let old = v0_2_0::client_config_down(&config);
                self.sandbox
                    .call("open", |store| c.call_open(store, &old))?
            }
            Client::V0_3_0(c) => {
                let old = v0_3_0::client_config_down(&config);
                self.sandbox
                    .call("open", |store| c.call_open(store, &old))?
            }
            Client::V0_4_1(c) => {
                let old = v0_4_1::client_config_down(&config);
                self.sandbox
                    .call("open", |store| c.call_open(store, &old))?
            }
            Client::V0_5_0(c) => {
                let old = v0_5_0::client_config_down(&config);
                self.sandbox
                    .call("open", |store| c.call_open(store, &old))?
            }
            Client::V0_6_0(c) => {
                let old = v0_6_0::client_config_down(&config);
                self.sandbox
                    .call("open", |store| c.call_open(store, &old))?
            }
        };
        self.client = Some((handle, config));
        Ok(())
    }

    fn client(&self, call: &str) -> Result<ResourceAny, PluginCallError> {
        self.client
            .as_ref()
            .map(|(handle, _)| *handle)
            .ok_or_else(|| self.sandbox.error(call, CallFailure::NotOpen))
    }

    /// How response bodies are split into frames.
    pub fn framing(&mut self) -> Result<Framing, PluginCallError> {
        let handle = self.client("framing")?;
        match Client::of(&self.bindings) {
            Client::Current(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle)),
            Client::V0_2_0(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle))
                .map(v0_2_0::framing_up),
            Client::V0_3_0(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle))
                .map(v0_3_0::framing_up),
            Client::V0_4_1(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle))
                .map(v0_4_1::framing_up),
            Client::V0_5_0(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle))
                .map(v0_5_0::framing_up),
            Client::V0_6_0(c) => self
                .sandbox
                .call_infallible("framing", |store| c.call_framing(store, handle))
                .map(v0_6_0::framing_up),
        }
    }

    /// The endpoint path used when the user gives none.
    pub fn default_path(&mut self) -> Result<String, PluginCallError> {
        let handle = self.client("default-path")?;
        match Client::of(&self.bindings) {
            Client::Current(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
            Client::V0_2_0(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
            Client::V0_3_0(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
            Client::V0_4_1(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
            Client::V0_5_0(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
            Client::V0_6_0(c) => self
                .sandbox
                .call_infallible("default-path", |store| c.call_default_path(store, handle)),
        }
    }

    /// The HTTP request for one sampled request. A backend of an older contract takes it in
    /// its own types, and refuses (a plugin error, `unsupported`) what it cannot express.
    pub fn build_request(&mut self, spec: &RequestSpec) -> Result<HttpRequest, PluginCallError> {
        let handle = self.client("build-request")?;
        let refused = |sandbox: &Sandbox, why: String| {
            let refusal = PluginError::Unsupported(why);
            sandbox.error("build-request", CallFailure::Plugin(refusal))
        };
        // 0.3.0 to 0.5.0 share their request type (`v0_5_0`'s), and a refusal names the
        // plugin's own version.
        let spec_0_5_0 = |sandbox: &Sandbox| {
            v0_5_0::request_spec_down(spec, sandbox.loaded.version)
                .map_err(|why| refused(sandbox, why))
        };
        match Client::of(&self.bindings) {
            Client::Current(c) => self.sandbox.call("build-request", |store| {
                c.call_build_request(store, handle, spec)
            }),
            Client::V0_2_0(c) => {
                let old =
                    v0_2_0::request_spec_down(spec).map_err(|why| refused(&self.sandbox, why))?;
                self.sandbox
                    .call("build-request", |store| {
                        c.call_build_request(store, handle, &old)
                    })
                    .map(v0_2_0::http_request_up)
            }
            Client::V0_3_0(c) => {
                let old = spec_0_5_0(&self.sandbox)?;
                self.sandbox
                    .call("build-request", |store| {
                        c.call_build_request(store, handle, &old)
                    })
                    .map(v0_3_0::http_request_up)
            }
            Client::V0_4_1(c) => {
                let old = spec_0_5_0(&self.sandbox)?;
                self.sandbox
                    .call("build-request", |store| {
                        c.call_build_request(store, handle, &old)
                    })
                    .map(v0_4_1::http_request_up)
            }
            Client::V0_5_0(c) => {
                let old = spec_0_5_0(&self.sandbox)?;
                self.sandbox
                    .call("build-request", |store| {
                        c.call_build_request(store, handle, &old)
                    })
                    .map(v0_5_0::http_request_up)
            }
            // 0.6.0's request is the current one.
            Client::V0_6_0(c) => self
                .sandbox
                .call("build-request", |store| {
                    c.call_build_request(store, handle, spec)
                })
                .map(v0_6_0::http_request_up),
        }
    }

    /// Decodes one whole response (payloads end to end in `buffer`, `frame_ends[i]` the
    /// end of frame i) in one call, and checks that what comes back names frames that
    /// exist, in order, with every text inside its own frame. What breaks those rules is a
    /// contract error ([`CallFailure::Contract`]): the response fails with it (naming the
    /// plugin), and the instance goes on with the next.
    pub fn decode(
        &mut self,
        head: &ResponseHead,
        buffer: &[u8],
        frame_ends: &[u32],
    ) -> Result<Decoded, PluginCallError> {
        let handle = self.client("decode")?;
        let decoded = match Client::of(&self.bindings) {
            Client::Current(c) => self.sandbox.call("decode", |store| {
                c.call_decode(store, handle, head, buffer, frame_ends)
            })?,
            Client::V0_2_0(c) => {
                let head = v0_2_0::response_head_down(head);
                self.sandbox
                    .call("decode", |store| {
                        c.call_decode(store, handle, &head, buffer, frame_ends)
                    })
                    .map(v0_2_0::decoded_up)?
            }
            Client::V0_3_0(c) => {
                let head = v0_3_0::response_head_down(head);
                self.sandbox
                    .call("decode", |store| {
                        c.call_decode(store, handle, &head, buffer, frame_ends)
                    })
                    .map(v0_3_0::decoded_up)?
            }
            Client::V0_4_1(c) => {
                let head = v0_4_1::response_head_down(head);
                self.sandbox
                    .call("decode", |store| {
                        c.call_decode(store, handle, &head, buffer, frame_ends)
                    })
                    .map(v0_4_1::decoded_up)?
            }
            Client::V0_5_0(c) => {
                let head = v0_5_0::response_head_down(head);
                self.sandbox
                    .call("decode", |store| {
                        c.call_decode(store, handle, &head, buffer, frame_ends)
                    })
                    .map(v0_5_0::decoded_up)?
            }
            Client::V0_6_0(c) => {
                let head = v0_6_0::response_head_down(head);
                self.sandbox
                    .call("decode", |store| {
                        c.call_decode(store, handle, &head, buffer, frame_ends)
                    })
                    .map(v0_6_0::decoded_up)?
            }
        };
        check_decoded(&decoded, buffer.len(), frame_ends)
            .map_err(|why| self.sandbox.error("decode", CallFailure::Contract(why)))?;
        Ok(decoded)
    }
}

/// Rejects output whose chunk lists disagree in length, that names a frame that does not
/// exist, whose chunks are out of frame order (the host takes their times in order), or
/// whose text spans lie outside their chunk's frame: so the host can slice with it without
/// a bounds panic, and a span built from a frame's own offsets as if they were the
/// buffer's (which would show other text) fails instead of passing. `frame_ends` are the
/// ends the host handed over, in order, inside the `buffer_len` bytes.
fn check_decoded(
    decoded: &Decoded,
    buffer_len: usize,
    frame_ends: &[u32],
) -> std::result::Result<(), String> {
    let frames = frame_ends.len();
    let Chunks {
        frames: chunk_frames,
        spans,
        escaped,
        tokens,
    } = &decoded.chunks;
    let chunks = chunk_frames.len();
    if spans.len() != 4 * chunks || escaped.len() != chunks {
        return Err(format!(
            "{chunks} chunks need {} span numbers and {chunks} escape flags, got {} and {}",
            4 * chunks,
            spans.len(),
            escaped.len()
        ));
    }
    if !tokens.is_empty() && tokens.len() != chunks {
        return Err(format!(
            "{chunks} chunks need no token counts or {chunks}, got {}",
            tokens.len()
        ));
    }
    let frame_ok = |frame: u32| (frame as usize) < frames.max(1);
    if let Some((i, frame)) = chunk_frames
        .iter()
        .enumerate()
        .find(|(_, f)| !frame_ok(**f))
    {
        return Err(format!("chunk {i} refers to frame {frame} of {frames}"));
    }
    if let Some(i) = chunk_frames.windows(2).position(|w| w[1] < w[0]) {
        return Err(format!(
            "chunk {} is in frame {}, before chunk {i}'s frame {}: chunks must come in frame \
             order",
            i + 1,
            chunk_frames[i + 1],
            chunk_frames[i]
        ));
    }
    for (i, (&frame, spans)) in chunk_frames.iter().zip(spans.chunks_exact(4)).enumerate() {
        let start = match frame as usize {
            0 => 0,
            f => frame_ends[f - 1],
        };
        // No frames at all: nothing to point at.
        let end = frame_ends.get(frame as usize).copied().unwrap_or(0);
        for (what, span) in [("content", &spans[..2]), ("reasoning", &spans[2..])] {
            let (from, len) = (span[0], span[1]);
            // A length of 0 is no text: the host reads nothing.
            if len == 0 || (from >= start && u64::from(from) + u64::from(len) <= u64::from(end)) {
                continue;
            }
            let outside = if u64::from(from) + u64::from(len) > buffer_len as u64 {
                format!("the {buffer_len}-byte buffer")
            } else {
                "its frame".to_owned()
            };
            return Err(format!(
                "chunk {i} has a text span outside {outside}: its {what} span (start {from}, \
                 len {len}), in frame {frame} (bytes {start}..{end} of the buffer); span \
                 offsets count from the buffer's start, not the frame's"
            ));
        }
    }
    if let Some((i, event)) = decoded
        .events
        .iter()
        .enumerate()
        .find(|(_, e)| !frame_ok(e.frame))
    {
        return Err(format!(
            "event {i} refers to frame {} of {frames}",
            event.frame
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, EventKind};

    /// One chunk with content `start..start+len` in `frame`.
    fn one_chunk(frame: u32, start: u32, len: u32) -> Decoded {
        Decoded {
            chunks: Chunks {
                frames: vec![frame],
                spans: vec![start, len, 0, 0],
                escaped: vec![0],
                tokens: vec![],
            },
            events: vec![],
        }
    }

    #[test]
    fn output_must_stay_inside_the_buffer() {
        check_decoded(&one_chunk(1, 4, 6), 10, &[4, 10]).unwrap();
        let err = check_decoded(&one_chunk(0, 8, 3), 10, &[10]).unwrap_err();
        assert_eq!(
            err,
            "chunk 0 has a text span outside the 10-byte buffer: its content span (start 8, \
             len 3), in frame 0 (bytes 0..10 of the buffer); span offsets count from the \
             buffer's start, not the frame's"
        );
        let err = check_decoded(&one_chunk(0, u32::MAX, 2), 10, &[10]).unwrap_err();
        assert!(err.contains("outside the 10-byte buffer"), "{err}");
        let mut reasoning_out = one_chunk(0, 0, 1);
        reasoning_out.chunks.spans[2..].copy_from_slice(&[9, 2]);
        let err = check_decoded(&reasoning_out, 10, &[10]).unwrap_err();
        assert!(
            err.starts_with("chunk 0 has a text span outside the 10-byte buffer: its reasoning"),
            "{err}"
        );
    }

    #[test]
    fn text_must_stay_inside_its_own_frame() {
        // Frames 0..4, 4..10, 10..16: a chunk of frame 1 may point at 4..10 only.
        let ends = [4, 10, 16];
        check_decoded(&one_chunk(1, 4, 6), 16, &ends).unwrap();
        // Offsets into frame 1's own bytes, as if it started the buffer.
        let err = check_decoded(&one_chunk(1, 1, 3), 16, &ends).unwrap_err();
        assert_eq!(
            err,
            "chunk 0 has a text span outside its frame: its content span (start 1, len 3), in \
             frame 1 (bytes 4..10 of the buffer); span offsets count from the buffer's start, \
             not the frame's"
        );
        // Running into the next frame.
        let err = check_decoded(&one_chunk(1, 8, 4), 16, &ends).unwrap_err();
        assert!(
            err.contains("(start 8, len 4), in frame 1 (bytes 4..10"),
            "{err}"
        );
        // An empty span is no text, wherever it points.
        check_decoded(&one_chunk(2, 0, 0), 16, &ends).unwrap();
    }

    #[test]
    fn chunks_must_come_in_frame_order() {
        let mut swapped = one_chunk(2, 10, 1);
        swapped.chunks.frames.push(1);
        swapped.chunks.spans.extend([4, 1, 0, 0]);
        swapped.chunks.escaped.push(0);
        let err = check_decoded(&swapped, 16, &[4, 10, 16]).unwrap_err();
        assert_eq!(
            err,
            "chunk 1 is in frame 1, before chunk 0's frame 2: chunks must come in frame order"
        );
    }

    #[test]
    fn frames_must_exist_and_lists_must_agree() {
        let err = check_decoded(&one_chunk(2, 0, 1), 10, &[5, 10]).unwrap_err();
        assert!(err.contains("chunk 0 refers to frame 2 of 2"), "{err}");
        let mut event_out = one_chunk(0, 0, 1);
        event_out.events.push(Event {
            frame: 5,
            kind: EventKind::Finish("stop".into()),
        });
        let err = check_decoded(&event_out, 10, &[5, 10]).unwrap_err();
        assert!(err.contains("event 0 refers to frame 5 of 2"), "{err}");
        let mut short = one_chunk(0, 0, 1);
        short.chunks.spans.pop();
        let err = check_decoded(&short, 10, &[10]).unwrap_err();
        assert!(err.contains("1 chunks need 4 span numbers"), "{err}");
        let mut flags = one_chunk(0, 0, 1);
        flags.chunks.escaped.clear();
        assert!(check_decoded(&flags, 10, &[10]).is_err());
    }

    #[test]
    fn backend_plugins_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<BackendPlugin>();
    }
}
