//! Bindings of the current contract (`wit/current`), whose types are the host's own.

plugin_worlds!("../../wit/current", current, with: {}, both: {
    // The worlds' WASI imports (`runtime-imports`) are wasmtime-wasi's own, linked by
    // `wasmtime_wasi::p2::add_to_linker_sync`.
    "wasi": wasmtime_wasi::p2::bindings::sync,
});
