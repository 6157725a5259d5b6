//! Bindings of the current contract (`wit/current`), whose types are the host's own.

/// The `dataset-plugin` world (and with it the shared `types`, `tokenizer`, `seed` and
/// `log` interfaces).
pub mod dataset {
    wasmtime::component::bindgen!({
        path: "../../wit/current",
        world: "dataset-plugin",
        // The worlds' WASI imports (`runtime-imports`) are wasmtime-wasi's own,
        // linked by `wasmtime_wasi::p2::add_to_linker_sync`.
        with: {
            "wasi": wasmtime_wasi::p2::bindings::sync,
        },
        imports: {
            // Without a tokenizer these have no error channel: the host traps with a
            // message saying which flag is missing.
            "bench:plugin/tokenizer.vocab-size": trappable,
            "bench:plugin/tokenizer.special-token-ids": trappable,
        },
    });
}

/// The `backend-plugin` world, sharing the dataset world's interfaces: a
/// `RequestSpec` sampled by a dataset is the very type a backend's `build-request`
/// takes, and one linker serves both kinds of plugin.
pub mod backend {
    wasmtime::component::bindgen!({
        path: "../../wit/current",
        world: "backend-plugin",
        with: {
            "bench:plugin/types": crate::bindings::current::dataset::bench::plugin::types,
            "bench:plugin/tokenizer": crate::bindings::current::dataset::bench::plugin::tokenizer,
            "bench:plugin/seed": crate::bindings::current::dataset::bench::plugin::seed,
            "bench:plugin/log": crate::bindings::current::dataset::bench::plugin::log,
            "wasi": wasmtime_wasi::p2::bindings::sync,
        },
    });
}
