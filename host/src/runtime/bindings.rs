//! Host-side bindings of the two plugin worlds in `wit/plugin.wit`.
//!
//! The backend world reuses the dataset world's types and import interfaces (`with:`), so
//! a `RequestSpec` sampled by a dataset is the very type a backend's `build-request` takes,
//! and one linker serves both kinds of plugin.

/// The `dataset-plugin` world (and with it the shared `types`, `tokenizer`, `seed` and
/// `log` interfaces).
pub mod dataset {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "dataset-plugin",
        imports: {
            // Without a tokenizer these have no error channel: the host traps with a
            // message saying which flag is missing.
            "bench:plugin/tokenizer.vocab-size": trappable,
            "bench:plugin/tokenizer.special-token-ids": trappable,
        },
    });
}

/// The `backend-plugin` world, sharing the dataset world's interfaces.
pub mod backend {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "backend-plugin",
        with: {
            "bench:plugin/types": crate::runtime::bindings::dataset::bench::plugin::types,
            "bench:plugin/tokenizer": crate::runtime::bindings::dataset::bench::plugin::tokenizer,
            "bench:plugin/seed": crate::runtime::bindings::dataset::bench::plugin::seed,
            "bench:plugin/log": crate::runtime::bindings::dataset::bench::plugin::log,
        },
    });
}
