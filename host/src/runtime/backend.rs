//! The backend adapter: builds HTTP requests before the clock starts and decodes response
//! frames into events after it (on a worker thread, so `BackendPlugin` is `Send`).

use std::sync::Arc;

use anyhow::{Result, anyhow, bail};
use wasmtime::component::ResourceAny;

use super::bindings::backend::BackendPlugin as Bindings;
use super::{
    ClientConfig, Event, EventKind, Framing, HostContext, HttpRequest, Loaded, PluginInfo,
    RequestSpec, ResponseHead, Sandbox, TextSpan, TypedPre,
};

/// An instantiated backend plugin in its own sandbox.
pub struct BackendPlugin {
    sandbox: Sandbox,
    bindings: Bindings,
    host: HostContext,
    /// The opened client and the configuration it was opened with (so `fork` can repeat it).
    client: Option<(ResourceAny, ClientConfig)>,
}

impl BackendPlugin {
    pub(crate) fn new(loaded: Arc<Loaded>, host: HostContext) -> Result<BackendPlugin> {
        let TypedPre::Backend(pre) = &loaded.pre else {
            bail!("plugin '{}' is not a backend plugin", loaded.name);
        };
        let pre = pre.clone();
        let (mut sandbox, _) = Sandbox::new(loaded, host.clone(), None)?;
        let bindings = sandbox.call_infallible("instantiate", |store| pre.instantiate(store))?;
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
    pub fn describe(&mut self) -> Result<PluginInfo> {
        let guest = self.bindings.bench_plugin_backend();
        self.sandbox
            .call_infallible("describe", |store| guest.call_describe(store))
    }

    /// Opens the client (validating the configuration); replaces a client opened before.
    pub fn open(&mut self, config: ClientConfig) -> Result<()> {
        if let Some((old, _)) = self.client.take() {
            self.sandbox
                .call_infallible("drop client", |store| old.resource_drop(store))?;
        }
        let client = self.bindings.bench_plugin_backend().client();
        let handle = self
            .sandbox
            .call("open", |store| client.call_open(store, &config))?;
        self.client = Some((handle, config));
        Ok(())
    }

    fn client(&self) -> Result<ResourceAny> {
        self.client
            .as_ref()
            .map(|(handle, _)| *handle)
            .ok_or_else(|| anyhow!("plugin '{}': the client is used before `open`", self.name()))
    }

    /// How response bodies are split into frames.
    pub fn framing(&mut self) -> Result<Framing> {
        let handle = self.client()?;
        let client = self.bindings.bench_plugin_backend().client();
        self.sandbox
            .call_infallible("framing", |store| client.call_framing(store, handle))
    }

    /// The endpoint path used when the user gives none.
    pub fn default_path(&mut self) -> Result<String> {
        let handle = self.client()?;
        let client = self.bindings.bench_plugin_backend().client();
        self.sandbox.call_infallible("default-path", |store| {
            client.call_default_path(store, handle)
        })
    }

    /// The HTTP request for one sampled request.
    pub fn build_request(&mut self, spec: &RequestSpec) -> Result<HttpRequest> {
        let handle = self.client()?;
        let client = self.bindings.bench_plugin_backend().client();
        self.sandbox.call("build-request", |store| {
            client.call_build_request(store, handle, spec)
        })
    }

    /// Decodes one whole response: a decoder for `head`, one `feed` with every frame
    /// (payloads end to end in `buffer`, `frame_ends[i]` the end of frame i), then
    /// `finish`. Returns the events of both calls in order, checked to point inside
    /// `buffer`.
    pub fn decode(
        &mut self,
        head: &ResponseHead,
        buffer: &[u8],
        frame_ends: &[u32],
    ) -> Result<Vec<Event>> {
        let handle = self.client()?;
        let guest = self.bindings.bench_plugin_backend();
        let decoder = self.sandbox.call("decoder", |store| {
            guest.client().call_decoder(store, handle, head)
        })?;
        let decoding = guest.decoder();
        let result = self
            .sandbox
            .call("feed", |store| {
                decoding.call_feed(store, decoder, buffer, frame_ends)
            })
            .and_then(|mut events| {
                let finished = self
                    .sandbox
                    .call("finish", |store| decoding.call_finish(store, decoder))?;
                events.extend(finished);
                Ok(events)
            });
        // Always release the decoder, unless the store is dead anyway after a fault.
        let dropped = self
            .sandbox
            .call_infallible("drop decoder", |store| decoder.resource_drop(store));
        let events = result?;
        dropped?;
        check_events(&events, buffer.len(), frame_ends.len())
            .map_err(|e| anyhow!("plugin '{}': {e}", self.name()))?;
        Ok(events)
    }
}

/// Rejects events that point outside the buffer or at a frame that does not exist, so
/// the host can slice with them without a bounds panic.
fn check_events(events: &[Event], buffer_len: usize, frames: usize) -> Result<()> {
    let span_ok = |span: &Option<TextSpan>| match span {
        Some(s) => (s.start as usize)
            .checked_add(s.len as usize)
            .is_some_and(|end| end <= buffer_len),
        None => true,
    };
    for (i, event) in events.iter().enumerate() {
        if event.frame as usize >= frames.max(1) {
            bail!("event {i} refers to frame {} of {frames}", event.frame);
        }
        if let EventKind::Chunk(chunk) = &event.kind
            && !(span_ok(&chunk.content) && span_ok(&chunk.reasoning))
        {
            bail!("event {i} has a text span outside the {buffer_len}-byte buffer");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Chunk;

    fn chunk(frame: u32, start: u32, len: u32) -> Event {
        Event {
            frame,
            kind: EventKind::Chunk(Chunk {
                content: Some(TextSpan {
                    start,
                    len,
                    escaped: false,
                }),
                reasoning: None,
            }),
        }
    }

    #[test]
    fn events_must_stay_inside_the_buffer() {
        check_events(&[chunk(0, 0, 4), chunk(1, 4, 6)], 10, 2).unwrap();
        let err = check_events(&[chunk(0, 8, 3)], 10, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside"), "{err}");
        let err = check_events(&[chunk(0, u32::MAX, 2)], 10, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("outside"), "{err}");
        let err = check_events(&[chunk(2, 0, 1)], 10, 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("frame 2 of 2"), "{err}");
    }

    #[test]
    fn backend_plugins_can_move_to_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<BackendPlugin>();
    }
}
