//! The backend side: implement [`Backend`] and [`Decoder`], then call
//! [`export_backend!`](crate::export_backend).

use std::cell::RefCell;

use crate::backend_bindings::exports::bench::plugin::backend::{
    Client, Decoder as DecoderHandle, GuestClient, GuestDecoder,
};
use crate::{
    ClientConfig, Event, Framing, HttpRequest, PluginError, PluginInfo, RequestSpec, ResponseHead,
};

/// An API: builds HTTP requests (before the clock starts) and makes decoders for responses.
pub trait Backend: Sized + 'static {
    type Decoder: Decoder;

    /// Name, version, description and options, for `bench plugin inspect`.
    fn describe() -> PluginInfo;
    /// Validates the configuration (unknown option keys are an error).
    fn open(config: ClientConfig) -> Result<Self, PluginError>;
    /// How the host frames response bodies for [`Decoder::feed`].
    fn framing(&self) -> Framing;
    /// The endpoint path used when the user gives no `--endpoint`.
    fn default_path(&self) -> String;
    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError>;
    fn decoder(&self, head: ResponseHead) -> Result<Self::Decoder, PluginError>;
}

/// Turns the frames of one response into events.
///
/// `buffer` holds frame payloads end to end; frame `i` is
/// `buffer[frame_ends[i-1]..frame_ends[i]]` (from 0 for the first). Events refer to text
/// by [`TextSpan`](crate::TextSpan)s into `buffer` instead of copying it, so the host reads
/// the text natively.
pub trait Decoder: 'static {
    fn feed(
        &mut self,
        buffer: &[u8],
        frame_ends: &[u32],
        out: &mut Vec<Event>,
    ) -> Result<(), PluginError>;
    /// Called once after the last frame.
    fn finish(&mut self, _out: &mut Vec<Event>) -> Result<(), PluginError> {
        Ok(())
    }
}

/// Adapts a [`Backend`] to the generated resource trait.
#[doc(hidden)]
pub struct ClientAdapter<T>(T);

/// Adapts a [`Decoder`] to the generated resource trait (resources take `&self`).
#[doc(hidden)]
pub struct DecoderAdapter<D>(RefCell<D>);

impl<T: Backend> GuestClient for ClientAdapter<T> {
    fn open(config: ClientConfig) -> Result<Client, PluginError> {
        Ok(Client::new(ClientAdapter(T::open(config)?)))
    }

    fn framing(&self) -> Framing {
        self.0.framing()
    }

    fn default_path(&self) -> String {
        self.0.default_path()
    }

    fn build_request(&self, spec: RequestSpec) -> Result<HttpRequest, PluginError> {
        self.0.build_request(spec)
    }

    fn decoder(&self, head: ResponseHead) -> Result<DecoderHandle, PluginError> {
        Ok(DecoderHandle::new(DecoderAdapter(RefCell::new(
            self.0.decoder(head)?,
        ))))
    }
}

impl<D: Decoder> GuestDecoder for DecoderAdapter<D> {
    fn feed(&self, buffer: Vec<u8>, frame_ends: Vec<u32>) -> Result<Vec<Event>, PluginError> {
        let mut out = Vec::with_capacity(frame_ends.len() + 2);
        self.0.borrow_mut().feed(&buffer, &frame_ends, &mut out)?;
        Ok(out)
    }

    fn finish(&self) -> Result<Vec<Event>, PluginError> {
        let mut out = Vec::new();
        self.0.borrow_mut().finish(&mut out)?;
        Ok(out)
    }
}

/// Exports a type implementing [`Backend`] as the plugin's `backend` interface.
#[macro_export]
macro_rules! export_backend {
    ($t:ty) => {
        #[doc(hidden)]
        struct __BenchBackendExport;

        impl $crate::backend_bindings::exports::bench::plugin::backend::Guest for __BenchBackendExport {
            type Client = $crate::backend::ClientAdapter<$t>;
            type Decoder = $crate::backend::DecoderAdapter<<$t as $crate::Backend>::Decoder>;

            fn describe() -> $crate::PluginInfo {
                <$t as $crate::Backend>::describe()
            }
        }

        // Component exports exist only on wasm; natively (unit tests of a plugin crate)
        // the names are not valid linker symbols.
        #[cfg(target_arch = "wasm32")]
        $crate::backend_bindings::__export_backend_world!(__BenchBackendExport with_types_in $crate::backend_bindings);
    };
}
